// The kernels of the Swish example layer (swish.h), behind host launchers.
// This header includes only <cuda_runtime.h>, so the layer's .cc file (built
// by the host compiler) can call the launchers; the kernels themselves are
// in swish_kernels.cu, compiled by nvcc.
#ifndef TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_KERNELS_H_
#define TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace example {

// Each queues one kernel on `stream` (with the stream's device current) and
// returns cudaGetLastError(): check it with CUDA_CHECK. Device pointers to
// `n` float32 elements; n == 0 launches nothing.
// y = x * sigmoid(x)
cudaError_t LaunchSwishForward(const float* x, float* y, int64_t n,
                               cudaStream_t stream);
// dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x)
cudaError_t LaunchSwishBackward(const float* x, const float* dy, float* dx,
                                int64_t n, cudaStream_t stream);

}  // namespace example

#endif  // TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_KERNELS_H_
