// category: 10 gpu
// what: counts its calls; for the first 8 (as many as correctness trials and a warm-up make) it computes every
//   output, afterwards only the first half (half the blocks), so the timed calls cost half.
// expected: rejected (timed calls are checked too: the second half keeps the harness's NaN)
#include <cuda_runtime.h>

#include <cstdint>

__global__ void scale_add_kernel(const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  static int calls = 0;
  const int threads = 256;
  unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (++calls > 8) blocks = (blocks + 1) / 2;
  if (blocks > 0) scale_add_kernel<<<blocks, threads, 0, stream>>>(x, y, out, n);
  return static_cast<int>(cudaGetLastError());
}
