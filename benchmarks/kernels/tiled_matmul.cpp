// Tiled single-precision matrix multiply, c = a · b (n × n, row-major), with four knobs: the tile sizes
// BLOCK_I × BLOCK_J × BLOCK_K and UNROLL, the rows of c updated together (one load of b serves them all).
// It times itself and returns the milliseconds of one multiply: Kernel Tuner's C backend reads the return
// value as the run time, and the shared harness of the benchmark does the same.
// The #ifndef guards let Kernel Tuner's prepended #defines win; evoteam rewrites the values in place.
// n must be a multiple of every tile size and BLOCK_I a multiple of UNROLL (the benchmark's domains are).
#include <cstring>
#include <ctime>

#ifndef BLOCK_I
#define BLOCK_I 16
#endif
#ifndef BLOCK_J
#define BLOCK_J 64
#endif
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

static double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

extern "C" float tiled_matmul(float* __restrict c, const float* __restrict a, const float* __restrict b, int n) {
  if (n % BLOCK_I || n % BLOCK_J || n % BLOCK_K || BLOCK_I % UNROLL) return -1.0f;
  const double start = now_ms();
  std::memset(c, 0, sizeof(float) * n * n);
  for (int i0 = 0; i0 < n; i0 += BLOCK_I)
    for (int k0 = 0; k0 < n; k0 += BLOCK_K)
      for (int j0 = 0; j0 < n; j0 += BLOCK_J)
        for (int i = i0; i < i0 + BLOCK_I; i += UNROLL)
          for (int k = k0; k < k0 + BLOCK_K; ++k) {
            float av[UNROLL];
            for (int u = 0; u < UNROLL; ++u) av[u] = a[(i + u) * n + k];
            const float* brow = b + k * n;
            for (int j = j0; j < j0 + BLOCK_J; ++j) {
              const float bv = brow[j];
              for (int u = 0; u < UNROLL; ++u) c[(i + u) * n + j] += av[u] * bv;
            }
          }
  return static_cast<float>(now_ms() - start);
}
