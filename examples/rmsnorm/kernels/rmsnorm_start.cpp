// RMSNorm over rows of bfloat16 (hidden_size = 4096), evoteam's C ABI: the tuned version set back to one lane,
// the starting point of the README's demo (`evoteam evolve rmsnorm_start`: the team finds the lanes again).
// Rows in parallel (OpenMP), the weight converted once, and branch-free loops the compiler vectorizes.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {
constexpr int64_t kHidden = 4096;
constexpr int kLanes = 1;  // independent partial sums: more break the add dependency chain

inline float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even; inputs here are finite
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
}  // namespace

extern "C" int rmsnorm(const uint16_t* __restrict hidden_states, const uint16_t* __restrict weight,
                       uint16_t* __restrict output, int64_t batch_size) {
  alignas(64) float w[kHidden];
  for (int64_t i = 0; i < kHidden; ++i) w[i] = bf16_to_float(weight[i]);
  const float eps = 1e-5f;
#pragma omp parallel for schedule(static) if (batch_size >= 8)
  for (int64_t row = 0; row < batch_size; ++row) {
    const uint16_t* __restrict x = hidden_states + row * kHidden;
    uint16_t* __restrict y = output + row * kHidden;
    alignas(64) float xf[kHidden];
    float partial[kLanes] = {0};
    for (int64_t i = 0; i < kHidden; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        float v = bf16_to_float(x[i + l]);
        xf[i + l] = v;
        partial[l] += v * v;
      }
    }
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += partial[l];
    const float inv_rms = 1.0f / std::sqrt(sum / kHidden + eps);
    for (int64_t i = 0; i < kHidden; ++i) y[i] = float_to_bf16(xf[i] * inv_rms * w[i]);
  }
  return 0;
}
