// Writes far past the end of its output: an illegal memory access, which poisons the CUDA context. The harness
// must report RUNTIME_ERROR with CUDA's error text and replace the worker, so the next candidate still runs.
#include <cuda_runtime.h>

#include <cstdint>

__global__ void oob_kernel(const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i + (static_cast<int64_t>(1) << 40)] = 2.0f * x[i] + y[i];  // 4 TiB past the buffer
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  oob_kernel<<<blocks, threads, 0, stream>>>(x, y, out, n);
  return static_cast<int>(cudaGetLastError());  // 0: the fault happens later, asynchronously
}
