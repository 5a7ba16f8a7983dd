// RMSNorm over rows of bfloat16 (hidden_size = 4096), evoteam's C ABI: a straightforward first version.
#include <cmath>
#include <cstdint>
#include <cstring>

static float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) {  // round to nearest even, as torch does
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

extern "C" int rmsnorm(const uint16_t* hidden_states, const uint16_t* weight, uint16_t* output,
                       int64_t batch_size) {
  const int64_t hidden_size = 4096;
  const float eps = 1e-5f;
  for (int64_t row = 0; row < batch_size; ++row) {
    const uint16_t* x = hidden_states + row * hidden_size;
    float sum = 0.0f;
    for (int64_t i = 0; i < hidden_size; ++i) {
      float v = bf16_to_float(x[i]);
      sum += v * v;
    }
    float inv_rms = 1.0f / std::sqrt(sum / hidden_size + eps);
    for (int64_t i = 0; i < hidden_size; ++i) {
      output[row * hidden_size + i] = float_to_bf16(bf16_to_float(x[i]) * inv_rms * bf16_to_float(weight[i]));
    }
  }
  return 0;
}
