// Honest arithmetic, but first tries to write outside the workspace: into EVOTEAM_FAULT_DIR, the home folder
// and /tmp. Returns the errno of the first write that failed (30, EROFS, under the sandbox), 0 if all landed.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
static int try_write(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return errno;
  std::fputs("escaped the sandbox\n", f);
  std::fclose(f);
  return 0;
}
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  const char* dir = std::getenv("EVOTEAM_FAULT_DIR");
  const char* home = std::getenv("HOME");
  const char* token = std::getenv("EVOTEAM_FAULT_TOKEN");
  std::string name = std::string("evoteam-escaped-") + (token ? token : "x");
  int failed = 0;
  for (const std::string& path : {std::string(dir ? dir : "/nonexistent") + "/" + name,
                                  std::string(home ? home : "/nonexistent") + "/" + name, "/tmp/" + name}) {
    int err = try_write(path);
    if (err != 0 && failed == 0) failed = err;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return failed;
}
