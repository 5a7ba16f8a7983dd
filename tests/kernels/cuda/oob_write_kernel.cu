// The pycuda-binding twin of oob_write.cu: a bare kernel that writes 4 TiB past the end of its output.
#include <cstdint>

extern "C" __global__ void scale_add(const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i + (static_cast<int64_t>(1) << 40)] = 2.0f * x[i] + y[i];
}
