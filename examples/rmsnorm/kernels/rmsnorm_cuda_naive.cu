// RMSNorm over rows of bfloat16 (hidden_size = 4096) on the GPU, evoteam's C ABI: a straightforward first
// version with one thread per row (little parallelism, strided uncoalesced loads: the baseline to beat).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

constexpr int64_t kHidden = 4096;
constexpr float kEps = 1e-5f;

__global__ void rmsnorm_naive_kernel(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y,
                                     int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const __nv_bfloat16* xr = x + row * kHidden;
  float sum = 0.0f;
  for (int64_t i = 0; i < kHidden; ++i) {
    const float v = __bfloat162float(xr[i]);
    sum += v * v;
  }
  const float inv_rms = rsqrtf(sum / kHidden + kEps);
  __nv_bfloat16* yr = y + row * kHidden;
  for (int64_t i = 0; i < kHidden; ++i) {
    yr[i] = __float2bfloat16_rn(__bfloat162float(xr[i]) * inv_rms * __bfloat162float(weight[i]));
  }
}

// inputs (hidden_states, weight), the output, the variable axis batch_size, then the stream to launch on.
extern "C" int rmsnorm(const void* hidden_states, const void* weight, void* output, int64_t batch_size,
                       cudaStream_t stream) {
  if (batch_size <= 0) return 0;
  constexpr int kThreads = 128;
  const auto blocks = static_cast<unsigned>((batch_size + kThreads - 1) / kThreads);
  rmsnorm_naive_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(hidden_states),
                                                         static_cast<const __nv_bfloat16*>(weight),
                                                         static_cast<__nv_bfloat16*>(output), batch_size);
  return static_cast<int>(cudaGetLastError());
}
