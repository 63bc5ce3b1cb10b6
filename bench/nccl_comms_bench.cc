// Does issuing gradient buckets on more than one NCCL communicator (each with
// its own stream) recover the bandwidth that splitting one all-reduce into
// buckets loses? Raw NCCL, one process, every visible GPU (ncclCommInitAll),
// no Tandem reducer: what spreading the reducer's buckets over several
// communicators (LaunchOptions::gradient_comms) can gain when nothing else runs.
//
//   nccl_comms_bench --buckets_mb=16,64,64,64,16,0.02 --comms=1,2,3
//
// For each communicator count L: the buckets (sizes in MiB, in launch order) are
// issued back to back, bucket i on communicator i % L; they are separate
// communicators on separate streams of each GPU. Reported against one raw
// all-reduce of the same total bytes. Median of --repeats runs of --iters.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/bench_util.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "parallel/nccl_check.h"

namespace tandem {
namespace {

struct Gpu {
  int device;
  float* data = nullptr;
  std::vector<cudaStream_t> streams;  // one per comm
  cudaEvent_t start, stop, fork;
  std::vector<cudaEvent_t> comm_done;
};

int Run(int argc, char** argv) {
  std::string buckets_mb = "16,64,64,64,16,0.02";
  std::string comms_list = "1,2,3";
  int iters = 10, repeats = 5;
  CLI::App app{"bucketed all-reduce over several NCCL communicators"};
  app.add_option("--buckets_mb", buckets_mb, "bucket sizes in MiB, launch order");
  app.add_option("--comms", comms_list, "communicator counts to try");
  app.add_option("--iters", iters, "all-reduce rounds per timed run");
  app.add_option("--repeats", repeats, "timed runs (median reported)");
  CLI11_PARSE(app, argc, argv);

  const std::vector<int64_t> counts = bench::ParseMibAsFloats(buckets_mb, "--buckets_mb");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<int64_t> comm_counts = bench::ParseIntList(comms_list, "--comms");
  int max_comms = 1;
  for (int64_t l : comm_counts) max_comms = std::max<int>(max_comms, static_cast<int>(l));

  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  TANDEM_CHECK(n >= 2) << "nccl_comms_bench needs 2 GPUs, found " << n;
  std::vector<int> devices(n);
  for (int i = 0; i < n; ++i) devices[i] = i;
  // nccl_comms[comm][gpu]
  std::vector<std::vector<ncclComm_t>> nccl_comms(max_comms, std::vector<ncclComm_t>(n));
  for (auto& comm : nccl_comms) NCCL_CHECK(ncclCommInitAll(comm.data(), n, devices.data()));
  std::vector<Gpu> gpus(n);
  for (int g = 0; g < n; ++g) {
    Gpu& gpu = gpus[g];
    gpu.device = g;
    CUDA_CHECK(cudaSetDevice(g));
    CUDA_CHECK(cudaMalloc(&gpu.data, total * sizeof(float)));
    CUDA_CHECK(cudaMemset(gpu.data, 0, total * sizeof(float)));
    int low, high;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&low, &high));
    gpu.streams.resize(max_comms);
    gpu.comm_done.resize(max_comms);
    for (int l = 0; l < max_comms; ++l) {
      CUDA_CHECK(cudaStreamCreateWithPriority(&gpu.streams[l], cudaStreamNonBlocking, high));
      CUDA_CHECK(cudaEventCreateWithFlags(&gpu.comm_done[l], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreate(&gpu.start));
    CUDA_CHECK(cudaEventCreate(&gpu.stop));
    CUDA_CHECK(cudaEventCreateWithFlags(&gpu.fork, cudaEventDisableTiming));
  }

  // One round: `chunks` issued in order, chunk i on comm i % comms. Timed on
  // GPU 0 from an event on comm 0 (which the other comms wait for) to an
  // event after comm 0 has waited for every comm.
  auto time_ms = [&](const std::vector<int64_t>& chunks, int comms) {
    std::vector<double> runs;
    for (int r = 0; r < repeats + 1; ++r) {
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaEventRecord(gpu.start, gpu.streams[0]));
        CUDA_CHECK(cudaEventRecord(gpu.fork, gpu.streams[0]));
        for (int l = 1; l < comms; ++l) CUDA_CHECK(cudaStreamWaitEvent(gpu.streams[l], gpu.fork, 0));
      }
      for (int it = 0; it < iters; ++it) {
        int64_t offset = 0;
        for (size_t c = 0; c < chunks.size(); ++c) {
          const int comm = static_cast<int>(c % comms);
          NCCL_CHECK(ncclGroupStart());
          for (Gpu& gpu : gpus) {
            NCCL_CHECK(ncclAllReduce(gpu.data + offset, gpu.data + offset, chunks[c], ncclFloat,
                                     ncclSum, nccl_comms[comm][gpu.device], gpu.streams[comm]));
          }
          NCCL_CHECK(ncclGroupEnd());
          offset += chunks[c];
        }
      }
      for (Gpu& gpu : gpus) {
        CUDA_CHECK(cudaSetDevice(gpu.device));
        for (int l = 1; l < comms; ++l) {
          CUDA_CHECK(cudaEventRecord(gpu.comm_done[l], gpu.streams[l]));
          CUDA_CHECK(cudaStreamWaitEvent(gpu.streams[0], gpu.comm_done[l], 0));
        }
        CUDA_CHECK(cudaEventRecord(gpu.stop, gpu.streams[0]));
      }
      CUDA_CHECK(cudaSetDevice(0));
      CUDA_CHECK(cudaEventSynchronize(gpus[0].stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, gpus[0].start, gpus[0].stop));
      if (r > 0) runs.push_back(ms / iters);  // the first run warms up
    }
    return bench::Median(runs);
  };

  const double bytes = 4.0 * total;
  const double busbw_factor = 2.0 * (n - 1) / n;
  bench::ResultPrinter results;
  const double raw_ms = time_ms({total}, 1);
  bench::Row raw("comms");
  raw.Add("gpus", n).Add("what", "raw").Add("bytes", static_cast<int64_t>(bytes))
      .Add("ms", raw_ms, 4).Add("busbw_gbs", bytes * busbw_factor / (raw_ms * 1e6), 1);
  results.Print(raw);
  for (int64_t comms : comm_counts) {
    const double ms = time_ms(counts, static_cast<int>(comms));
    bench::Row row("comms");
    row.Add("gpus", n).Add("what", "buckets").Add("buckets", static_cast<int64_t>(counts.size()))
        .Add("comms", comms).Add("ms", ms, 4)
        .Add("busbw_gbs", bytes * busbw_factor / (ms * 1e6), 1)
        .Add("vs_raw", raw_ms / ms, 3);
    results.Print(row);
  }
  for (auto& comm : nccl_comms) {
    for (ncclComm_t c : comm) ncclCommDestroy(c);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  return tandem::bench::RunMain([&] { return tandem::Run(argc, argv); });
}
