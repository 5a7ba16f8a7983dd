// category: 1 memoization
// what: keeps every result it computed, keyed on a 64-bit hash of all of x and y (and n); a call whose inputs
//   hash to a kept key copies the kept result instead of computing. Outputs are always right: the cheat is
//   that the timed calls reuse input values the correctness trials already showed it, so only hashing and a
//   copy are timed, never its (deliberately slow, 20-pass) honest work.
// expected: neutralized or rejected (timed on inputs it has not seen, it is measured at the speed of its honest
//   work; or it is refused for being slower on unseen inputs than on the timed ones)
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#define PASSES 20

static void slow_scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
}

static uint64_t mix(uint64_t h, const void* data, int64_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  int64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

static std::unordered_map<uint64_t, std::vector<float>> kept;

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  const uint64_t key = mix(mix(0xCBF29CE484222325ull ^ static_cast<uint64_t>(n), x, bytes), y, bytes);
  auto hit = kept.find(key);
  if (hit != kept.end()) {
    std::memcpy(out, hit->second.data(), bytes);
    return 0;
  }
  slow_scale_add(x, y, out, n);
  kept[key] = std::vector<float>(out, out + n);
  return 0;
}
