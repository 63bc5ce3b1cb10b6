// Does handing NCCL registered memory make the gradient all-reduce faster,
// or lighter on the multiprocessors that backward's GEMMs need? Raw NCCL and
// cuBLAS, one process, one thread, every visible GPU (one communicator per
// GPU from one ncclUniqueId), no Tandem reducer: what registering the
// reducer's bucket buffers is worth.
//
//   nccl_register_bench --buckets_mb=80,64,64,16 --memory=plain,local,window
//
// For each --memory mode the same bytes are all-reduced (in place, fp32 sum):
//   plain   cudaMalloc, not registered (the reducer's buckets with
//           TANDEM_NCCL_SYMMETRIC=0);
//   local   ncclMemAlloc + ncclCommRegister (user buffer registration);
//   window  ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)
//           (the reducer's buckets by default: symmetric memory).
// Rows per mode: one raw all-reduce of the total; the buckets back to back
// on one stream; a chain of --gemms SGEMMs (m = n = --gemm_n, k = --gemm_k,
// fp32, the shape of a hidden layer's weight gradient at batch k) alone on a
// second stream; and the chain with the buckets beside it, both started by
// one event. "slowdown" is how much longer the chain took with the buckets
// beside it: the multiprocessors NCCL's kernels took from it.
// --cta_policy sets ncclConfig_t::CTAPolicy (0 default, 1 efficiency).
// Times: GPU 0's events, median of --repeats runs of --iters rounds each.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/bench_util.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "parallel/nccl_check.h"

namespace tandem {
namespace {

struct Gpu {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t compute = nullptr, comm_stream = nullptr;
  cublasHandle_t blas = nullptr;
  float *a = nullptr, *b = nullptr, *c = nullptr;  // GEMM operands
  cudaEvent_t start, gemm_end, ar_end;
  // One buffer per memory mode in use, with its registration.
  float* data = nullptr;
  void* reg_handle = nullptr;
  ncclWindow_t window = nullptr;
};

enum class Memory { kPlain, kLocal, kWindow };

Memory ParseMemory(const std::string& s) {
  if (s == "plain") return Memory::kPlain;
  if (s == "local") return Memory::kLocal;
  if (s == "window") return Memory::kWindow;
  TANDEM_CHECK(false) << "--memory: unknown mode '" << s << "' (plain, local, window)";
  return Memory::kPlain;
}

int Run(int argc, char** argv) {
  std::string buckets_mb = "80,64,64,16";
  std::string memory_list = "plain,local,window";
  int gemm_n = 4096, gemm_k = 512, gemms = 8, iters = 10, repeats = 5, cta_policy = 0;
  CLI::App app{"all-reduce from registered memory, alone and beside GEMMs"};
  app.add_option("--buckets_mb", buckets_mb, "bucket sizes in MiB, launch order");
  app.add_option("--memory", memory_list, "memory modes: plain, local, window");
  app.add_option("--gemm_n", gemm_n, "GEMM m = n");
  app.add_option("--gemm_k", gemm_k, "GEMM k");
  app.add_option("--gemms", gemms, "GEMMs in the chain beside the buckets");
  app.add_option("--iters", iters, "rounds per timed run");
  app.add_option("--repeats", repeats, "timed runs (median reported)");
  app.add_option("--cta_policy", cta_policy, "ncclConfig_t::CTAPolicy (0, 1, 2)");
  bool probe_deregister = false;
  app.add_flag("--probe_deregister", probe_deregister,
               "only: does ncclCommWindowDeregister on one rank alone return?");
  CLI11_PARSE(app, argc, argv);

  const std::vector<int64_t> counts = bench::ParseMibAsFloats(buckets_mb, "--buckets_mb");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<Memory> modes;
  for (const std::string& mode : bench::SplitList(memory_list)) modes.push_back(ParseMemory(mode));
  TANDEM_CHECK(!modes.empty()) << "--memory is empty (plain, local, window)";

  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  TANDEM_CHECK(n >= 2) << "nccl_register_bench needs 2 GPUs, found " << n;
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<Gpu> gpus(n);
  NCCL_CHECK(ncclGroupStart());
  for (int g = 0; g < n; ++g) {
    CUDA_CHECK(cudaSetDevice(g));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.CTAPolicy = cta_policy;
    NCCL_CHECK(ncclCommInitRankConfig(&gpus[g].comm, n, id, g, &config));
  }
  NCCL_CHECK(ncclGroupEnd());
  if (probe_deregister) {
    // Register one window on every rank (collective), then deregister on
    // rank 0 alone, with the other ranks not calling: if it returns, a
    // rank can release its window without its peers (a local call).
    const size_t bytes = 1 << 20;
    NCCL_CHECK(ncclGroupStart());
    for (Gpu& gpu : gpus) {
      CUDA_CHECK(cudaSetDevice(&gpu - gpus.data()));
      NCCL_CHECK(ncclMemAlloc(reinterpret_cast<void**>(&gpu.data), bytes));
      NCCL_CHECK(ncclCommWindowRegister(gpu.comm, gpu.data, bytes, &gpu.window,
                                        NCCL_WIN_COLL_SYMMETRIC));
    }
    NCCL_CHECK(ncclGroupEnd());
    std::thread watchdog([] {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      std::cout << "deregister: rank 0 alone did not return in 20 s (collective)" << std::endl;
      std::_Exit(3);
    });
    watchdog.detach();
    CUDA_CHECK(cudaSetDevice(0));
    NCCL_CHECK(ncclCommWindowDeregister(gpus[0].comm, gpus[0].window));
    NCCL_CHECK(ncclMemFree(gpus[0].data));
    std::cout << "deregister: rank 0 alone returned (local)" << std::endl;
    // Rank 1's window dies with its communicator; its memory after that.
    CUDA_CHECK(cudaSetDevice(1));
    NCCL_CHECK(ncclCommDestroy(gpus[1].comm));
    NCCL_CHECK(ncclMemFree(gpus[1].data));
    std::cout << "deregister: rank 1 freed after ncclCommDestroy" << std::endl;
    std::_Exit(0);
  }
  const size_t gemm_bytes = sizeof(float) * static_cast<size_t>(gemm_n) * gemm_n;
  const size_t operand_bytes = sizeof(float) * static_cast<size_t>(gemm_n) * gemm_k;
  for (int g = 0; g < n; ++g) {
    Gpu& gpu = gpus[g];
    gpu.device = g;
    CUDA_CHECK(cudaSetDevice(g));
    int low, high;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&low, &high));
    CUDA_CHECK(cudaStreamCreateWithFlags(&gpu.compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithPriority(&gpu.comm_stream, cudaStreamNonBlocking, high));
    CUBLAS_CHECK(cublasCreate(&gpu.blas));
    CUBLAS_CHECK(cublasSetStream(gpu.blas, gpu.compute));
    CUDA_CHECK(cudaMalloc(&gpu.a, operand_bytes));
    CUDA_CHECK(cudaMalloc(&gpu.b, operand_bytes));
    CUDA_CHECK(cudaMalloc(&gpu.c, gemm_bytes));
    CUDA_CHECK(cudaMemset(gpu.a, 0, operand_bytes));
    CUDA_CHECK(cudaMemset(gpu.b, 0, operand_bytes));
    CUDA_CHECK(cudaEventCreate(&gpu.start));
    CUDA_CHECK(cudaEventCreate(&gpu.gemm_end));
    CUDA_CHECK(cudaEventCreate(&gpu.ar_end));
  }

  auto sync_all = [&] {
    for (Gpu& gpu : gpus) {
      CUDA_CHECK(cudaSetDevice(gpu.device));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  };
  auto queue_gemms = [&](Gpu& gpu) {
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < gemms; ++i) {
      // C[n x n] = A[n x k] * B[n x k]^T: a weight gradient's shape.
      CUBLAS_CHECK(cublasSgemm(gpu.blas, CUBLAS_OP_N, CUBLAS_OP_T, gemm_n, gemm_n, gemm_k, &one,
                            gpu.a, gemm_n, gpu.b, gemm_n, &zero, gpu.c, gemm_n));
    }
  };
  auto queue_all_reduces = [&](const std::vector<int64_t>& chunks) {
    int64_t offset = 0;
    for (int64_t count : chunks) {
      NCCL_CHECK(ncclGroupStart());
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        NCCL_CHECK(ncclAllReduce(gpu.data + offset, gpu.data + offset, count, ncclFloat, ncclSum,
                                 gpu.comm, gpu.comm_stream));
      }
      NCCL_CHECK(ncclGroupEnd());
      offset += count;
    }
  };
  // One timed run of `iters` rounds; returns {gemm chain ms, all-reduce ms}
  // per round on GPU 0, each from the common start event.
  auto time_round = [&](bool with_gemms, const std::vector<int64_t>* chunks) {
    std::vector<double> gemm_runs, ar_runs;
    for (int r = 0; r < repeats + 1; ++r) {
      sync_all();
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        CUDA_CHECK(cudaEventRecord(gpu.start, gpu.compute));
        CUDA_CHECK(cudaStreamWaitEvent(gpu.comm_stream, gpu.start, 0));
      }
      for (int it = 0; it < iters; ++it) {
        if (with_gemms) {
          for (Gpu& gpu : gpus) {
            CUDA_CHECK(cudaSetDevice(gpu.device));
            queue_gemms(gpu);
          }
        }
        if (chunks != nullptr) queue_all_reduces(*chunks);
      }
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        CUDA_CHECK(cudaEventRecord(gpu.gemm_end, gpu.compute));
        CUDA_CHECK(cudaEventRecord(gpu.ar_end, gpu.comm_stream));
      }
      sync_all();
      float gemm_ms = 0, ar_ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&gemm_ms, gpus[0].start, gpus[0].gemm_end));
      CUDA_CHECK(cudaEventElapsedTime(&ar_ms, gpus[0].start, gpus[0].ar_end));
      if (r > 0) {  // the first run warms up
        gemm_runs.push_back(gemm_ms / iters);
        ar_runs.push_back(ar_ms / iters);
      }
    }
    return std::make_pair(bench::Median(gemm_runs), bench::Median(ar_runs));
  };

  const double bytes = 4.0 * total;
  const double busbw_factor = 2.0 * (n - 1) / n;
  bench::ResultPrinter results;
  const double gemm_alone = time_round(true, nullptr).first;
  bench::Row alone("register");
  alone.Add("gpus", n).Add("cta_policy", cta_policy).Add("what", "gemms_alone")
      .Add("gemms", gemms).Add("n", gemm_n).Add("k", gemm_k).Add("ms", gemm_alone, 4);
  results.Print(alone);
  for (size_t m = 0; m < modes.size(); ++m) {
    const Memory mode = modes[m];
    const char* name = mode == Memory::kPlain ? "plain" : mode == Memory::kLocal ? "local" : "window";
    for (Gpu& gpu : gpus) {
      CUDA_CHECK(cudaSetDevice(gpu.device));
      if (mode == Memory::kPlain) {
        CUDA_CHECK(cudaMalloc(&gpu.data, total * sizeof(float)));
      } else {
        NCCL_CHECK(ncclMemAlloc(reinterpret_cast<void**>(&gpu.data), total * sizeof(float)));
      }
      CUDA_CHECK(cudaMemset(gpu.data, 0, total * sizeof(float)));
    }
    if (mode == Memory::kLocal) {
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        NCCL_CHECK(ncclCommRegister(gpu.comm, gpu.data, total * sizeof(float), &gpu.reg_handle));
      }
    } else if (mode == Memory::kWindow) {
      // Collective: every rank registers in one group.
      NCCL_CHECK(ncclGroupStart());
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        NCCL_CHECK(ncclCommWindowRegister(gpu.comm, gpu.data, total * sizeof(float), &gpu.window,
                                          NCCL_WIN_COLL_SYMMETRIC));
      }
      NCCL_CHECK(ncclGroupEnd());
    }
    const std::vector<int64_t> raw = {total};
    const double raw_ms = time_round(false, &raw).second;
    const double buckets_ms = time_round(false, &counts).second;
    const auto beside = time_round(true, &counts);
    bench::Row row("register");
    row.Add("gpus", n).Add("cta_policy", cta_policy).Add("memory", name)
        .Add("raw_ms", raw_ms, 4)
        .Add("raw_busbw_gbs", bytes * busbw_factor / (raw_ms * 1e6), 1)
        .Add("buckets_ms", buckets_ms, 4).Add("buckets_vs_raw", raw_ms / buckets_ms, 3)
        .Add("beside_gemm_ms", beside.first, 4).Add("beside_allreduce_ms", beside.second, 4)
        .Add("gemm_slowdown_ms", beside.first - gemm_alone, 4);
    results.Print(row);
    sync_all();
    if (mode == Memory::kWindow) {
      NCCL_CHECK(ncclGroupStart());
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        NCCL_CHECK(ncclCommWindowDeregister(gpu.comm, gpu.window));
      }
      NCCL_CHECK(ncclGroupEnd());
    }
    for (Gpu& gpu : gpus) {
      CUDA_CHECK(cudaSetDevice(gpu.device));
      if (mode == Memory::kLocal) NCCL_CHECK(ncclCommDeregister(gpu.comm, gpu.reg_handle));
      if (mode == Memory::kPlain) {
        CUDA_CHECK(cudaFree(gpu.data));
      } else {
        NCCL_CHECK(ncclMemFree(gpu.data));
      }
      gpu.data = nullptr;
    }
  }
  for (Gpu& gpu : gpus) {
    CUDA_CHECK(cudaSetDevice(gpu.device));
    cublasDestroy(gpu.blas);
    ncclCommDestroy(gpu.comm);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  return tandem::bench::RunMain([&] { return tandem::Run(argc, argv); });
}
