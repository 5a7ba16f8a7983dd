// RMSNorm over rows of bfloat16 (hidden_size = 4096) on the GPU, evoteam's C ABI: the improved version.
// One block per row; each thread loads its slice once as 128-bit vectors (8 bf16) into registers, sums
// squares in fp32, the block reduces with warp shuffles plus one shared-memory step, then each thread scales
// its slice by inv_rms * weight (weight read as 128-bit vectors through the read-only path) and stores it
// as 128-bit vectors. A scalar path covers pointers that are not 16-byte aligned.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {
constexpr int kHidden = 4096;
constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;                                 // bf16 per 128-bit load
constexpr int kIters = kHidden / (kThreads * kVec);     // 128-bit loads per thread and row
static_assert(kHidden % (kThreads * kVec) == 0, "hidden size must split evenly over the block");

union Pack {
  uint4 raw;
  __nv_bfloat162 h2[kVec / 2];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum over the block, returned to every thread.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kWarps];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < kWarps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

}  // namespace

template <bool kAligned>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(const __nv_bfloat16* __restrict__ x,
                                                           const __nv_bfloat16* __restrict__ weight,
                                                           __nv_bfloat16* __restrict__ y) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * kHidden;
  __nv_bfloat16* yr = y + row * kHidden;
  Pack xs[kIters];
  float sum = 0.0f;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int col = (it * kThreads + threadIdx.x) * kVec;  // consecutive threads read consecutive 16 bytes
    if constexpr (kAligned) {
      xs[it].raw = *reinterpret_cast<const uint4*>(xr + col);
    } else {
#pragma unroll
      for (int j = 0; j < kVec / 2; ++j) xs[it].h2[j] = __halves2bfloat162(xr[col + 2 * j], xr[col + 2 * j + 1]);
    }
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      const float2 f = __bfloat1622float2(xs[it].h2[j]);
      sum = fmaf(f.x, f.x, sum);
      sum = fmaf(f.y, f.y, sum);
    }
  }
  const float inv_rms = rsqrtf(block_sum(sum) / kHidden + kEps);
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int col = (it * kThreads + threadIdx.x) * kVec;
    Pack w;
    if constexpr (kAligned) {
      w.raw = __ldg(reinterpret_cast<const uint4*>(weight + col));
    } else {
#pragma unroll
      for (int j = 0; j < kVec / 2; ++j) w.h2[j] = __halves2bfloat162(weight[col + 2 * j], weight[col + 2 * j + 1]);
    }
    Pack out;
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      const float2 xv = __bfloat1622float2(xs[it].h2[j]);
      const float2 wv = __bfloat1622float2(w.h2[j]);
      out.h2[j] = __floats2bfloat162_rn(xv.x * inv_rms * wv.x, xv.y * inv_rms * wv.y);  // as the reference: (x*r)*w
    }
    if constexpr (kAligned) {
      *reinterpret_cast<uint4*>(yr + col) = out.raw;
    } else {
#pragma unroll
      for (int j = 0; j < kVec / 2; ++j) {
        yr[col + 2 * j] = __low2bfloat16(out.h2[j]);
        yr[col + 2 * j + 1] = __high2bfloat16(out.h2[j]);
      }
    }
  }
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// inputs (hidden_states, weight), the output, the variable axis batch_size, then the stream to launch on.
extern "C" int rmsnorm(const void* hidden_states, const void* weight, void* output, int64_t batch_size,
                       cudaStream_t stream) {
  if (batch_size <= 0) return 0;
  if (batch_size > 0x7fffffff) return static_cast<int>(cudaErrorInvalidConfiguration);
  const auto* x = static_cast<const __nv_bfloat16*>(hidden_states);
  const auto* w = static_cast<const __nv_bfloat16*>(weight);
  auto* y = static_cast<__nv_bfloat16*>(output);
  const auto blocks = static_cast<unsigned>(batch_size);
  if (aligned16(x) && aligned16(w) && aligned16(y)) {
    rmsnorm_kernel<true><<<blocks, kThreads, 0, stream>>>(x, w, y);
  } else {
    rmsnorm_kernel<false><<<blocks, kThreads, 0, stream>>>(x, w, y);
  }
  return static_cast<int>(cudaGetLastError());
}
