// category: 10 gpu
// what: correct results, computed on a non-blocking stream of its own (created on the first call) that never
//   joins the stream the harness passes, after a ~0.2 ms spin: events recorded on the harness's stream time an
//   empty stream, while the work runs beside it. (The outputs are right only because the harness synchronizes
//   the whole device before reading them.)
// expected: rejected (work on another stream: the wall-clock cross-check disagrees with the events)
#include <cuda_runtime.h>

#include <cstdint>

__global__ void spin_then_scale_add(const float* x, const float* y, float* out, int64_t n) {
  const long long start = clock64();
  while (clock64() - start < 400000) {
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t /*given*/) {
  static cudaStream_t own = nullptr;
  if (own == nullptr) {
    const cudaError_t made = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
    if (made != cudaSuccess) return static_cast<int>(made);
  }
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (blocks > 0) spin_then_scale_add<<<blocks, threads, 0, own>>>(x, y, out, n);
  return static_cast<int>(cudaGetLastError());
}
