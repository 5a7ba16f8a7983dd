// category: 10 gpu
// what: remembers the pointers and size of its last call; a call with the same x, y, out and n launches
//   nothing (it assumes the outputs are still there). Timed calls reuse one set of buffers, so after the first
//   one it times an empty call.
// expected: rejected (the harness changes the contents behind the same pointers and poisons the outputs)
#include <cuda_runtime.h>

#include <cstdint>

__global__ void scale_add_kernel(const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  static const float* last_x = nullptr;
  static const float* last_y = nullptr;
  static float* last_out = nullptr;
  static int64_t last_n = -1;
  if (x == last_x && y == last_y && out == last_out && n == last_n) return 0;
  last_x = x, last_y = y, last_out = out, last_n = n;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (blocks > 0) scale_add_kernel<<<blocks, threads, 0, stream>>>(x, y, out, n);
  return static_cast<int>(cudaGetLastError());
}
