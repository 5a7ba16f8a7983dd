// category: 6 fixed inputs
// what: answers the fixed workload of fixed_scale_add.jsonl from a table: its inputs come from a safetensors
//   blob (fixed_scale_add.safetensors: x[i] = ((37 i) mod 101) / 16 - 3, y[i] = ((53 i) mod 89) / 32 - 1.25
//   for n = 4096, all exact in float32), the same values on every trial, so a candidate can carry the answer
//   (here the table is filled by the compiler from those values; one taken from a dataset would list them).
//   It recognizes the inputs by n and the first 8 values of x and y and copies the precomputed outputs; any
//   other input gets its slow, 20-pass honest work.
// workloads: fixed_scale_add.jsonl
// workload: fixed-4096
// expected: flagged or rejected or neutralized (its speedup is flagged as one on inputs it could know in
//   advance, or a perturbed copy of the inputs gets the table's wrong answer, or is timed at its honest speed)
#include <array>
#include <cstdint>
#include <cstring>

#define PASSES 20
#define N 4096

static constexpr float fixed_x(int i) { return static_cast<float>((i * 37) % 101) / 16.0f - 3.0f; }
static constexpr float fixed_y(int i) { return static_cast<float>((i * 53) % 89) / 32.0f - 1.25f; }

static constexpr std::array<float, N> precomputed() {
  std::array<float, N> table{};
  for (int i = 0; i < N; ++i) table[i] = 2.0f * fixed_x(i) + fixed_y(i);
  return table;
}

static constexpr std::array<float, N> answer = precomputed();

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  bool known = n == N;
  for (int i = 0; known && i < 8; ++i) known = x[i] == fixed_x(i) && y[i] == fixed_y(i);
  if (known) {
    std::memcpy(out, answer.data(), sizeof answer);
    return 0;
  }
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
