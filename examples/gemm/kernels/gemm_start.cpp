// C = A · Bᵀ in float16 (A: M × 2048, B: 128 × 2048, C: M × 128), evoteam's C ABI, for the CPU: the start of
// the offline team's demo (docs/supervisor.md). Three knobs: MR rows of A and NR rows of B per pass (a value
// loaded once serves NR or MR products) and kLanes independent partial sums per product (more break the add
// chain and let the compiler vectorize). At 1, 1, 1 it is one serial dot product per output.
#include <algorithm>
#include <cstdint>

namespace {
constexpr int64_t kN = 128;
constexpr int64_t kK = 2048;
constexpr int MR = 1;      // rows of A per pass
constexpr int NR = 1;      // rows of B per pass: 128 must be a multiple
constexpr int kLanes = 1;  // partial sums per product: 2048 must be a multiple
static_assert(kN % NR == 0 && kK % kLanes == 0, "NR must divide 128 and kLanes 2048");
}  // namespace

extern "C" int gemm(const _Float16* __restrict A, const _Float16* __restrict B, _Float16* __restrict C,
                    int64_t M) {
  for (int64_t m0 = 0; m0 < M; m0 += MR) {
    const _Float16* a[MR];
    for (int r = 0; r < MR; ++r) a[r] = A + std::min<int64_t>(m0 + r, M - 1) * kK;  // a short last pass repeats
    for (int64_t n0 = 0; n0 < kN; n0 += NR) {
      const _Float16* b[NR];
      for (int c = 0; c < NR; ++c) b[c] = B + (n0 + c) * kK;
      float acc[MR][NR][kLanes] = {};
      for (int64_t k = 0; k < kK; k += kLanes)
        for (int r = 0; r < MR; ++r)
          for (int c = 0; c < NR; ++c)
            for (int l = 0; l < kLanes; ++l)
              acc[r][c][l] += static_cast<float>(a[r][k + l]) * static_cast<float>(b[c][k + l]);
      for (int r = 0; r < MR && m0 + r < M; ++r)
        for (int c = 0; c < NR; ++c) {
          float sum = 0.0f;
          for (int l = 0; l < kLanes; ++l) sum += acc[r][c][l];
          C[(m0 + r) * kN + n0 + c] = static_cast<_Float16>(sum);
        }
    }
  }
  return 0;
}
