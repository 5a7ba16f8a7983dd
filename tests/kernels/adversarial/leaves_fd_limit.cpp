// category: 9 process state left behind
// what: honest (one pass), but lowers the worker's soft limit on open files (RLIMIT_NOFILE) to just above its
//   highest open descriptor: enough for the worker to answer, too few for the pipes of a compiler, so the next
//   candidate the same worker has to build fails to build (an honest kernel is reported as a compile error).
// expected: caught (the worker that ran it is replaced and says why; the next candidate is measured clean)
#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  int highest = 2;
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(fds)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > highest && fd != dirfd(fds)) highest = fd;
    }
    closedir(fds);
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = static_cast<rlim_t>(highest) + 3;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
