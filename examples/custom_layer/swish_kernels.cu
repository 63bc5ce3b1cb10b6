#include "examples/custom_layer/swish_kernels.h"

#include <algorithm>

namespace example {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // a grid-stride loop covers the rest

__device__ float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void SwishForward(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i] * Sigmoid(x[i]);
  }
}

__global__ void SwishBackward(const float* x, const float* dy, float* dx,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float s = Sigmoid(x[i]);
    dx[i] = dy[i] * (s * (1.f + x[i] * (1.f - s)));
  }
}

int Blocks(int64_t n) {
  return static_cast<int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

cudaError_t LaunchSwishForward(const float* x, float* y, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;  // a grid of 0 blocks is a launch error
  SwishForward<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchSwishBackward(const float* x, const float* dy, float* dx,
                                int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SwishBackward<<<Blocks(n), kThreads, 0, stream>>>(x, dy, dx, n);
  return cudaGetLastError();
}

}  // namespace example
