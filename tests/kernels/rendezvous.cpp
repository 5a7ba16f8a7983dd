// Honest, but on large workloads waits (up to 10 minutes) until two processes have reached that point: each
// leaves one file of its own in the folder RENDEZVOUS names (a -D flag) and waits for a second one. Two
// candidates evaluated at the same time meet and pass; one after the other, the first waits alone and times out.
#include <cstdint>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <unistd.h>

static int arrived() {
  int n = 0;
  if (DIR* dir = opendir(RENDEZVOUS)) {
    while (dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool here = false;  // one file per process (pids may repeat: each sandbox has its own pid namespace)
  if (n > 10000) {
    if (!here) {
      std::string name = std::string(RENDEZVOUS) + "/arrived-XXXXXX";
      int fd = mkstemp(name.data());
      if (fd >= 0) close(fd);
      here = true;
    }
    for (int i = 0; i < 6000 && arrived() < 2; ++i) usleep(100000);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
