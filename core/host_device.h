// TANDEM_HOST_DEVICE marks small inline functions that both the CPU backend
// and CUDA kernels call, so the two compute the same thing.
#ifndef TANDEM_CORE_HOST_DEVICE_H_
#define TANDEM_CORE_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TANDEM_HOST_DEVICE inline
#endif

#endif  // TANDEM_CORE_HOST_DEVICE_H_
