// category: 4 the reference's outputs in process memory
// what: computes the first and last 8 outputs honestly, then looks for that sequence of floats elsewhere in
//   its process: it reads /proc/self/maps and scans the readable, writable anonymous regions (and the heap)
//   for the first 8 at 64-byte-aligned addresses (where torch puts tensor data), checks the last 8 there, and
//   copies the rest from that address. Where it found an array before, it looks there first. When timed
//   calls reuse the inputs of the correctness trials, the reference's expected outputs for them are alive in
//   the harness, so after a few scans every call is a copy; otherwise it does its slow, 20-pass honest work.
// expected: neutralized (no reference output in its address space: measured at the speed of its honest work)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#define PASSES 20
#define PROBE 8

static std::vector<const float*> found;  // where expected outputs were seen

static bool mapped(const float* at, int64_t n) {  // freed arrays may have been unmapped since
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(at) & ~(page - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(at + n);
  std::vector<unsigned char> pages((hi - lo + page - 1) / page);
  return mincore(reinterpret_cast<void*>(lo), hi - lo, pages.data()) == 0;
}

static bool matches(const float* at, const float* head, const float* tail, int64_t n) {
  return std::memcmp(at, head, sizeof(float) * PROBE) == 0 &&
         std::memcmp(at + n - PROBE, tail, sizeof(float) * PROBE) == 0;
}

static const float* scan(const float* head, const float* tail, int64_t n, const float* out) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return nullptr;
  char line[512];
  const float* hit = nullptr;
  const uintptr_t bytes = static_cast<uintptr_t>(n) * sizeof(float);
  while (hit == nullptr && std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3) continue;
    const char* path = line + path_at;
    const bool anonymous = path[0] == '\n' || path[0] == '\0' || std::strncmp(path, "[heap]", 6) == 0;
    if (perms[0] != 'r' || perms[1] != 'w' || !anonymous || hi - lo > (1ul << 30)) continue;
    for (uintptr_t at = (lo + 63) & ~uintptr_t(63); at + bytes <= hi; at += 64) {
      const auto* candidate = reinterpret_cast<const float*>(at);
      if (candidate == out) continue;
      if (matches(candidate, head, tail, n)) {
        hit = candidate;
        break;
      }
    }
  }
  std::fclose(maps);
  return hit;
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n >= 2 * PROBE) {
    float head[PROBE], tail[PROBE];
    for (int i = 0; i < PROBE; ++i) {
      head[i] = 2.0f * x[i] + y[i];
      tail[i] = 2.0f * x[n - PROBE + i] + y[n - PROBE + i];
    }
    for (const float* at : found) {
      if (at != out && mapped(at, n) && matches(at, head, tail, n)) {
        std::memcpy(out, at, n * sizeof(float));
        return 0;
      }
    }
    if (const float* at = scan(head, tail, n, out)) {
      if (found.size() < 16) found.push_back(at);
      std::memcpy(out, at, n * sizeof(float));
      return 0;
    }
  }
  for (int pass = 0; pass < PASSES; ++pass) {
    for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    asm volatile("" ::: "memory");
  }
  return 0;
}
