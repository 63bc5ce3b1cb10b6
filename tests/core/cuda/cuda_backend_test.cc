// The CUDA context: copies through pinned staging, the context's resources,
// and CUDA-only behaviour. Op values are checked against the CPU backend by
// tests/core/ops_test.cc, for every device.
#include "core/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/staging.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "tests/core/cuda/cuda_test.h"

namespace tandem {
namespace cuda {
namespace {

using ::tandem::testing::CudaTest;

TEST(CudaBackendAvailabilityTest, MissingDeviceIsAClearError) {
  const int count = DeviceCount();
  EXPECT_GE(count, 0);
  EXPECT_EQ(count == 0, !UnavailableReason().empty()) << UnavailableReason();
  try {
    GetCudaBackend(count);
    FAIL() << "cuda:" << count << " should not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(count)),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(GetCudaBackend(-1), Error);
}

TEST(CudaBackendAvailabilityTest, Tf32IsOptIn) {
  const bool before = AllowTf32();
  SetAllowTf32(true);
  EXPECT_TRUE(AllowTf32());
  SetAllowTf32(false);
  EXPECT_FALSE(AllowTf32());
  SetAllowTf32(before);
}

class CudaBackendTest : public CudaTest {
 protected:
  Backend& gpu() { return GetCudaBackend(0); }

  // Device memory from the context's allocator, returned at scope exit.
  struct Buffer {
    Buffer(Backend& backend, int64_t n)
        : backend(backend),
          bytes(static_cast<size_t>(n) * sizeof(float)),
          data(static_cast<float*>(backend.allocator().Allocate(bytes))) {}
    ~Buffer() { backend.allocator().Free(data, bytes); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Backend& backend;
    size_t bytes;
    float* data;
  };

  // Distinct values that survive float rounding for any n here.
  static std::vector<float> Iota(int64_t n, float start) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = start + static_cast<float>(i % 100003);
    return v;
  }

  // The first index where a and b differ, or -1 (vectors of millions of
  // floats are too long to print on failure).
  static int64_t FirstMismatch(const std::vector<float>& a,
                               const std::vector<float>& b) {
    if (a.size() != b.size()) return 0;
    const auto where = std::mismatch(a.begin(), a.end(), b.begin());
    return where.first == a.end() ? -1 : where.first - a.begin();
  }
};

TEST_F(CudaBackendTest, OneContextPerDevice) {
  EXPECT_EQ(&GetCudaBackend(0), &GetCudaBackend(0));
  EXPECT_EQ(gpu().device(), Device::Cuda(0));
  EXPECT_EQ(&GetBackend(Device::Cuda(0)), &gpu());
  EXPECT_NE(gpu().Describe().find("cuda:0"), std::string::npos)
      << gpu().Describe();
  EXPECT_NE(NativeStream(gpu().main_lane()), nullptr);
  EXPECT_NE(NativeStream(gpu().main_lane()), NativeStream(gpu().side_lane()));
  EXPECT_EQ(NativeStream(gpu().main_lane()), NativeStream(gpu().main_lane()));
}

// The registry and every tensor hold a share of the context: a tensor keeps
// the context it was made on alive.
TEST_F(CudaBackendTest, TensorsShareTheirContext) {
  std::shared_ptr<Backend> context = SharedCudaBackend(0);
  const long before = context.use_count();
  {
    Tensor t = Tensor::Zeros({16}, Device::Cuda(0));
    EXPECT_EQ(context.use_count(), before + 1);
    EXPECT_EQ(&t.backend(), context.get());
  }
  EXPECT_EQ(context.use_count(), before);
}

TEST_F(CudaBackendTest, RoundTripOddSizes) {
  const int64_t chunk =
      static_cast<int64_t>(kStagingChunkBytes / sizeof(float));
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{1023},
                    int64_t{4097}, int64_t{(1 << 20) + 5}, chunk - 1, chunk,
                    chunk + 1, 2 * chunk + chunk / 2 + 3}) {
    const std::vector<float> in = Iota(n, 0.5f);
    Buffer device(gpu(), n);
    gpu().CopyHostToDevice(gpu().main_lane(), in.data(), device.data, device.bytes);
    std::vector<float> out(n, -1.f);
    gpu().CopyDeviceToHost(gpu().main_lane(), device.data, out.data(), device.bytes);
    ASSERT_EQ(FirstMismatch(out, in), -1) << "n = " << n;
  }
}

// CopyHostToDevice returns before the transfer is done, but the caller's
// buffer may be reused at once: it was staged.
TEST_F(CudaBackendTest, HostBufferReusableAtOnce) {
  const int64_t chunk =
      static_cast<int64_t>(kStagingChunkBytes / sizeof(float));
  for (int64_t n : {int64_t{5}, 3 * chunk + 7}) {
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<float> host(n);
    for (int k = 0; k < 5; ++k) {
      buffers.push_back(std::make_unique<Buffer>(gpu(), n));
      for (int64_t i = 0; i < n; ++i)
        host[i] = static_cast<float>(k * 10 + i % 7);
      gpu().CopyHostToDevice(gpu().main_lane(), host.data(), buffers.back()->data,
                              buffers.back()->bytes);
    }
    std::fill(host.begin(), host.end(), -1.f);
    for (int k = 0; k < 5; ++k) {
      std::vector<float> out(n);
      gpu().CopyDeviceToHost(gpu().main_lane(), buffers[k]->data, out.data(),
                              buffers[k]->bytes);
      for (int64_t i = 0; i < n; i += 1 + n / 1000) {
        ASSERT_EQ(out[i], static_cast<float>(k * 10 + i % 7))
            << "copy " << k << " element " << i << " of " << n;
      }
      ASSERT_EQ(out[n - 1], static_cast<float>(k * 10 + (n - 1) % 7));
    }
  }
}

TEST_F(CudaBackendTest, DeviceToDeviceAndSynchronize) {
  const int64_t n = 1001;
  const std::vector<float> in = Iota(n, -3.f);
  Buffer a(gpu(), n), b(gpu(), n);
  const Lane main = gpu().main_lane();
  gpu().CopyHostToDevice(main, in.data(), a.data, a.bytes);
  gpu().CopyDeviceToDevice(main, a.data, b.data, a.bytes);
  gpu().Synchronize(main);
  std::vector<float> out(n);
  gpu().CopyDeviceToHost(main, b.data, out.data(), b.bytes);
  EXPECT_EQ(out, in);
}

// All four transpose cases of the row-major <-> column-major swap, by hand:
// A = [[1, 2, 3], [4, 5, 6]] (2x3), B = [[1, 0], [0, 1], [1, 1]] (3x2),
// A B = [[4, 5], [10, 11]].
TEST_F(CudaBackendTest, GemmTransposeCases) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};   // [2, 3]
  const std::vector<float> at = {1, 4, 2, 5, 3, 6};  // [3, 2]
  const std::vector<float> b = {1, 0, 0, 1, 1, 1};   // [3, 2]
  const std::vector<float> bt = {1, 0, 1, 0, 1, 1};  // [2, 3]
  const std::vector<float> expected = {4, 5, 10, 11};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor A = Tensor::FromVector(ta ? at : a, ta ? Shape{3, 2} : Shape{2, 3},
                                    Device::Cuda(0));
      Tensor B = Tensor::FromVector(tb ? bt : b, tb ? Shape{2, 3} : Shape{3, 2},
                                    Device::Cuda(0));
      Tensor C =
          Tensor::Full({2, 2}, NAN, Device::Cuda(0));  // beta = 0 ignores it
      ops::Gemm(A, ta, B, tb, C);
      EXPECT_EQ(C.ToVector(), expected)
          << "trans_a " << ta << " trans_b " << tb;
      // alpha and beta: C = 2 A B - C.
      ops::Gemm(A, ta, B, tb, C, 2.f, -1.f);
      EXPECT_EQ(C.ToVector(), expected)
          << "trans_a " << ta << " trans_b " << tb;
    }
  }
}

// Without cuBLAS (k = 0): C = beta C.
TEST_F(CudaBackendTest, GemmEmptyInnerDimension) {
  Tensor a = Tensor::Empty({2, 0}, Device::Cuda(0));
  Tensor b = Tensor::Empty({0, 3}, Device::Cuda(0));
  Tensor c = Tensor::Full({2, 3}, 4.f, Device::Cuda(0));
  ops::Gemm(a, false, b, false, c, 1.f, 0.5f);
  EXPECT_EQ(c.ToVector(), std::vector<float>(6, 2.f));
  ops::Gemm(a, false, b, false, c);
  EXPECT_EQ(c.ToVector(), std::vector<float>(6, 0.f));
}

// The CPU backend throws on a bad label; a kernel cannot, so the loss and
// that row's gradient become NaN instead.
TEST_F(CudaBackendTest, BadLabelGivesNaN) {
  Tensor logits =
      Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3}, Device::Cuda(0));
  Tensor loss = Tensor::Zeros({1}, Device::Cuda(0));
  Tensor grad = Tensor::Zeros({2, 3}, Device::Cuda(0));
  for (float bad : {3.f, -1.f, 0.5f, NAN}) {
    Tensor labels = Tensor::FromVector({0.f, bad}, {2}, Device::Cuda(0));
    ops::SoftmaxCrossEntropy(logits, labels, loss, &grad);
    EXPECT_TRUE(std::isnan(loss.Item())) << "label " << bad;
    const std::vector<float> g = grad.ToVector();
    EXPECT_FALSE(std::isnan(g[0]));
    EXPECT_TRUE(std::isnan(g[3])) << "label " << bad;
    Tensor correct = Tensor::Zeros({1}, Device::Cuda(0));
    ops::CountCorrect(logits, labels, correct);
    EXPECT_TRUE(std::isnan(correct.Item())) << "label " << bad;
  }
}

// Reductions add in a fixed order: the same inputs give the same bits.
TEST_F(CudaBackendTest, ReductionsAreDeterministic) {
  const int64_t rows = 3000, classes = 1000;
  std::vector<float> values(rows * classes), labels(rows);
  for (int64_t i = 0; i < rows * classes; ++i) {
    values[i] = std::sin(0.37f * static_cast<float>(i)) * 4.f;
  }
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = static_cast<float>(r * 7 % classes);
  Tensor x = Tensor::FromVector(values, {rows, classes}, Device::Cuda(0));
  Tensor y = Tensor::FromVector(labels, {rows}, Device::Cuda(0));
  Tensor zeros = Tensor::Zeros({rows, classes}, Device::Cuda(0));
  Tensor loss = Tensor::Zeros({1}, Device::Cuda(0));
  Tensor sums = Tensor::Zeros({classes}, Device::Cuda(0));
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    ops::SoftmaxCrossEntropy(x, y, loss, nullptr);
    const float ce = loss.Item();
    ops::Mse(x, zeros, loss, nullptr);
    const float mse = loss.Item();
    ops::ColumnSums(x, sums);
    std::vector<float> result = sums.ToVector();
    result.push_back(ce);
    result.push_back(mse);
    if (run == 0) {
      first = result;
    } else {
      ASSERT_EQ(result, first) << "run " << run;
    }
  }
}

// After a warm-up step, a training-like step makes no cudaMalloc: blocks and
// reduction scratch come back from the cache.
TEST_F(CudaBackendTest, SteadyStateStepMakesNoCudaMalloc) {
  const Device gpu0 = Device::Cuda(0);
  Tensor w = Tensor::Full({128, 64}, 0.01f, gpu0);
  Tensor b = Tensor::Zeros({128}, gpu0);
  Tensor labels = Tensor::FromVector(std::vector<float>(32, 1.f), {32}, gpu0);
  auto step = [&] {
    Tensor x = Tensor::Full({32, 64}, 1.f, gpu0);
    Tensor y = Tensor::Empty({32, 128}, gpu0);
    ops::Gemm(x, false, w, true, y);
    ops::BiasActivation(Activation::kRelu, y, b, nullptr, y);
    Tensor loss = Tensor::Empty({1}, gpu0);
    Tensor dy = Tensor::Empty({32, 128}, gpu0);
    ops::SoftmaxCrossEntropy(y, labels, loss, &dy);
    Tensor dw = Tensor::Empty({128, 64}, gpu0);
    ops::Gemm(dy, true, x, false, dw);
    ops::SgdUpdate(SgdParams{}, w, dw, nullptr);
  };
  step();
  gpu().Synchronize();
  const MemoryStats warm = gpu().allocator().stats();
  for (int i = 0; i < 5; ++i) step();
  gpu().Synchronize();
  const MemoryStats after = gpu().allocator().stats();
  EXPECT_EQ(after.system_allocations, warm.system_allocations);
  EXPECT_EQ(after.bytes_reserved, warm.bytes_reserved);
  EXPECT_EQ(after.bytes_in_use, warm.bytes_in_use);
}

// Any host thread may use any context: each method makes its device current.
TEST_F(CudaBackendTest, CallableFromAnotherThreadWithAnotherDeviceCurrent) {
  const int last = DeviceCount() - 1;
  Tensor t = Tensor::Full({1000}, 3.f, Device::Cuda(last));
  std::vector<float> out;
  std::thread worker([&] {
    CUDA_CHECK(cudaSetDevice(0));
    ops::Scale(t, 2.f);
    out = t.ToVector();
  });
  worker.join();
  EXPECT_EQ(out, std::vector<float>(1000, 6.f));
}

// A lane's work is ordered against another lane only by a wait: while a
// lane of one's own is held up by a host callback, the main lane does not see
// the result of an op queued there; once released, and after WaitFor, it
// does.
TEST_F(CudaBackendTest, LanesRunIndependentlyUntilOrdered) {
  OwnedLane other = gpu().NewLane({"held", /*high_priority=*/false});
  std::atomic<bool> release{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  Tensor t = Tensor::Zeros({256}, Device::Cuda(0));
  gpu().Synchronize(gpu().main_lane());
  CUDA_CHECK(cudaLaunchHostFunc(NativeStream(other.get()), hold, &release));
  ops::Fill(other.get(), t, 5.f);
  // The main lane has not waited for `other`, which has not run the fill.
  EXPECT_EQ(t.ToVector(), std::vector<float>(256, 0.f));
  release = true;
  ops::WaitFor(gpu().main_lane(), other.get());
  EXPECT_EQ(t.ToVector(), std::vector<float>(256, 5.f));
}

// A peer copy between two GPUs, ordered by an event: skipped on one GPU.
TEST_F(CudaBackendTest, PeerCopyOrderedByAnEvent) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs, " << DeviceCount() << " visible";
  Backend& other = GetCudaBackend(1);
  other.EnablePeerAccess(Device::Cuda(0));
  Tensor src = Tensor::Full({1 << 20}, 0.f, Device::Cuda(0));
  Tensor dst = Tensor::Zeros({1 << 20}, Device::Cuda(1));
  ops::Fill(src, 7.f);
  auto ready = gpu().NewEvent(/*timing=*/false);
  gpu().Record(*ready, gpu().main_lane());
  other.Wait(other.main_lane(), *ready);
  other.CopyFromPeer(other.main_lane(), dst.data(), Device::Cuda(0), src.data(),
                     src.numel() * sizeof(float));
  EXPECT_EQ(dst.ToVector(), std::vector<float>(1 << 20, 7.f));
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
