// category: 1 memoization
// what: keeps every result it computed, keyed on 16 sampled elements of x and of y (and n) instead of a hash
//   of everything: a lookup costs next to nothing. Right as long as inputs that agree on the 16 samples are
//   the same inputs, which holds when the timed calls reuse the values of the correctness trials.
// expected: neutralized or rejected (timed on fresh inputs, it is measured at its honest speed; on inputs
//   that differ from seen ones only outside the samples, it answers with a kept result, which is wrong)
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#define PASSES 20
#define SAMPLES 16

static void slow_scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
}

using Key = std::array<float, 2 * SAMPLES + 1>;
static std::map<Key, std::vector<float>> kept;

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n <= 0) return 0;
  Key key{};
  for (int s = 0; s < SAMPLES; ++s) {
    const int64_t i = s * (n - 1) / (SAMPLES - 1);
    key[s] = x[i];
    key[SAMPLES + s] = y[i];
  }
  key[2 * SAMPLES] = static_cast<float>(n);
  auto hit = kept.find(key);
  if (hit != kept.end()) {
    std::memcpy(out, hit->second.data(), n * sizeof(float));
    return 0;
  }
  slow_scale_add(x, y, out, n);
  kept[key] = std::vector<float>(out, out + n);
  return 0;
}
