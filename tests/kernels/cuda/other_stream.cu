// Correct results, but computed on a stream of its own that never joins the harness's stream, after a ~0.2 ms
// spin: CUDA events on the harness's stream see almost nothing while the wall clock sees all of it. The
// harness's cross-check must REJECT it (the outputs are right only because the harness synchronizes the device).
#include <cuda_runtime.h>

#include <cstdint>

__global__ void slow_scale_add(const float* x, const float* y, float* out, int64_t n) {
  const long long start = clock64();
  while (clock64() - start < 400000) {
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t /*stream*/) {
  static cudaStream_t own = nullptr;
  if (own == nullptr) {
    const cudaError_t made = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
    if (made != cudaSuccess) return static_cast<int>(made);
  }
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  slow_scale_add<<<blocks, threads, 0, own>>>(x, y, out, n);
  return static_cast<int>(cudaGetLastError());
}
