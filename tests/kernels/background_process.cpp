// Honest, but leaves a daemon behind (on its first call): a grandchild in a session of its own, sleeping for ten
// minutes under the name evoteam-fault-<EVOTEAM_FAULT_TOKEN> (its argv[0]), so a test can look for it.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  static bool spawned = false;
  pid_t child = spawned ? -1 : fork();
  spawned = true;
  if (child == 0) {
    setsid();
    if (fork() == 0) {
      const char* token = std::getenv("EVOTEAM_FAULT_TOKEN");
      std::string name = std::string("evoteam-fault-") + (token ? token : "x");
      execl("/bin/sleep", name.c_str(), "600", static_cast<char*>(nullptr));
    }
    _exit(0);
  }
  if (child > 0) waitpid(child, nullptr, 0);
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
