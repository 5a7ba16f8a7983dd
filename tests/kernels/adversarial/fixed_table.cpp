// category: 6 fixed inputs
// what: answers the fixed workload of fixed_scale_add.jsonl from a table: its inputs come from a safetensors
//   blob (fixed_scale_add.safetensors: x[i] = ((37 i) mod 101) / 16 - 3, y[i] = ((53 i) mod 89) / 32 - 1.25
//   for n = 256, all exact in float32), the same values on every trial, so a candidate can carry the answer.
//   It recognizes them by n and the first 8 values of x and y and copies the precomputed outputs; any other
//   input gets its slow, 20-pass honest work.
// workloads: fixed_scale_add.jsonl
// workload: fixed-256
// expected: flagged (fixed-inputs: a speedup on inputs a candidate can know in advance is not trusted)
#include <cstdint>
#include <cstring>

#define PASSES 20

static const float known_x[8] = {-3.0f, -0.6875f, 1.625f, -2.375f, -0.0625f, 2.25f, -1.75f, 0.5625f};
static const float known_y[8] = {-1.25f, 0.40625f, -0.71875f, 0.9375f, -0.1875f, 1.46875f, 0.34375f, -0.78125f};
static const float answer[256] = {
    -7.25f, -0.96875f, 2.53125f, -3.8125f, -0.3125f, 5.96875f, -3.15625f, 0.34375f, 6.625f, -2.5f,
    3.78125f, -5.34375f, -1.84375f, 4.4375f, -4.6875f, 1.59375f, 5.09375f, -4.03125f, 2.25f, 5.75f,
    -0.59375f, 2.90625f, -6.21875f, 0.0625f, 3.5625f, -2.78125f, 0.71875f, 4.21875f, -2.125f, 1.375f,
    7.65625f, -1.46875f, 2.03125f, -4.3125f, -0.8125f, 5.46875f, -3.65625f, -0.15625f, 6.125f, -3.0f,
    3.28125f, -5.84375f, -2.34375f, 3.9375f, -5.1875f, 1.09375f, 4.59375f, -1.75f, 1.75f, 5.25f,
    -1.09375f, 2.40625f, -3.9375f, -0.4375f, 3.0625f, -3.28125f, 0.21875f, 6.5f, -2.625f, 0.875f,
    7.15625f, -1.96875f, 4.3125f, -4.8125f, -1.3125f, 4.96875f, -4.15625f, 2.125f, 5.625f, -3.5f,
    2.78125f, -6.34375f, -0.0625f, 3.4375f, -5.6875f, 0.59375f, 4.09375f, -2.25f, 1.25f, 4.75f,
    -1.59375f, 1.90625f, -4.4375f, -0.9375f, 2.5625f, -3.78125f, -0.28125f, 6.0f, -3.125f, 0.375f,
    6.65625f, -2.46875f, 3.8125f, -5.3125f, 0.96875f, 4.46875f, -4.65625f, 1.625f, 5.125f, -1.21875f,
    2.28125f, -6.84375f, -0.5625f, 2.9375f, -3.40625f, 0.09375f, 3.59375f, -2.75f, 0.75f, 7.03125f,
    -2.09375f, 1.40625f, -4.9375f, -1.4375f, 4.84375f, -4.28125f, -0.78125f, 5.5f, -3.625f, 2.65625f,
    6.15625f, -2.96875f, 3.3125f, -5.8125f, 0.46875f, 3.96875f, -5.15625f, 1.125f, 4.625f, -1.71875f,
    1.78125f, 5.28125f, -1.0625f, 2.4375f, -3.90625f, -0.40625f, 5.875f, -3.25f, 0.25f, 6.53125f,
    -2.59375f, 3.6875f, -5.4375f, -1.9375f, 4.34375f, -4.78125f, 1.5f, 5.0f, -4.125f, 2.15625f,
    5.65625f, -0.6875f, 2.8125f, -6.3125f, -0.03125f, 3.46875f, -2.875f, 0.625f, 4.125f, -2.21875f,
    1.28125f, 7.5625f, -1.5625f, 1.9375f, -4.40625f, -0.90625f, 5.375f, -3.75f, -0.25f, 6.03125f,
    -3.09375f, 3.1875f, -5.9375f, -2.4375f, 3.84375f, -5.28125f, 1.0f, 4.5f, -4.625f, 1.65625f,
    5.15625f, -1.1875f, 2.3125f, -4.03125f, -0.53125f, 2.96875f, -3.375f, 0.125f, 6.40625f, -2.71875f,
    0.78125f, 7.0625f, -2.0625f, 4.21875f, -4.90625f, -1.40625f, 4.875f, -4.25f, 2.03125f, 5.53125f,
    -3.59375f, 2.6875f, -6.4375f, -0.15625f, 3.34375f, -5.78125f, 0.5f, 4.0f, -2.34375f, 1.15625f,
    4.65625f, -1.6875f, 1.8125f, -4.53125f, -1.03125f, 2.46875f, -3.875f, -0.375f, 5.90625f, -3.21875f,
    0.28125f, 6.5625f, -2.5625f, 3.71875f, -5.40625f, 0.875f, 4.375f, -4.75f, 1.53125f, 5.03125f,
    -1.3125f, 2.1875f, 5.6875f, -0.65625f, 2.84375f, -3.5f, 0.0f, 3.5f, -2.84375f, 0.65625f,
    6.9375f, -2.1875f, 1.3125f, -5.03125f, -1.53125f, 4.75f, -4.375f, -0.875f, 5.40625f, -3.71875f,
    2.5625f, 6.0625f, -3.0625f, 3.21875f, -5.90625f, 0.375f,};

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n == 256 && std::memcmp(x, known_x, sizeof known_x) == 0 && std::memcmp(y, known_y, sizeof known_y) == 0) {
    std::memcpy(out, answer, sizeof answer);
    return 0;
  }
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
