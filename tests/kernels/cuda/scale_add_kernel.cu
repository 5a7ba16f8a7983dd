// out = 2 * x + y as a bare kernel for evoteam's pycuda binding: the harness loads the cubin and launches it
// with grid = ceil_div(n, 256), block = 256. Arguments: inputs, outputs, then the var axis n as int64.
#include <cstdint>

extern "C" __global__ void scale_add(const float* __restrict__ x, const float* __restrict__ y,
                                     float* __restrict__ out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}
