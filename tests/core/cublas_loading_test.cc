// cuBLAS is loaded when the CUDA backend first calls it, never by a program
// that only computes on the CPU (Note [cuBLAS loaded on first use] in
// core/cuda/cublas_loader.cc). The process's own memory map says which
// libraries it has loaded.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/backend_registry.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace tandem {
namespace {

// Whether a file whose name starts with `library` is mapped.
bool Loaded(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/" + library) != std::string::npos) return true;
  }
  return false;
}

// c = a b for 2x2 matrices on `device`.
Tensor Product(Device device) {
  const Tensor a = Tensor::FromVector({1, 2, 3, 4}, {2, 2}, device);
  const Tensor b = Tensor::FromVector({5, 6, 7, 8}, {2, 2}, device);
  Tensor c = Tensor::Zeros({2, 2}, device);
  ops::Gemm(MainLane(device), a, false, b, false, c);
  return c;
}

// One test, in this order: the CPU half must see the process before any
// CUDA work.
TEST(CublasLoadingTest, OnlyCudaWorkLoadsCublas) {
  ASSERT_TRUE(Loaded("libc.so")) << "/proc/self/maps lists no libc: cannot judge";
  EXPECT_EQ(Product(Device::Cpu()).ToVector(), (std::vector<float>{19, 22, 43, 50}));
  CudaDeviceCount();  // asks the CUDA runtime, as --device=auto does
  EXPECT_FALSE(Loaded("libcublas.so") || Loaded("libcublasLt.so")) << "CPU work loaded cuBLAS";

  if (CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device: only the CPU half ran (" << CudaUnavailableReason() << ")";
  }
  EXPECT_EQ(Product(Device::Cuda(0)).ToVector(), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_TRUE(Loaded("libcublasLt.so")) << "a CUDA GEMM ran without loading cuBLASLt";
}

}  // namespace
}  // namespace tandem
