// category: 5 the harness from native code
// what: computes nothing. When Python is in its process (the evaluation worker), it finds the worker's
//   protocol pipe among its own file descriptors (/proc/self/fd: a pipe open for writing, per
//   /proc/self/fdinfo) and writes one line there in the worker protocol's framing (one JSON object per line,
//   gpu_bench/worker/protocol.py): an `evaluated` answer with id -1 (the id of answers to no request in
//   particular) saying PASSED, timed against the baseline with a speedup of 3.0. Its real outcome (NaN outputs)
//   follows with the request's id and is never read. Without Python in its process it does nothing.
// expected: rejected (a verdict comes from the harness, not from the candidate's process)
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

static std::string timing(double ms) {
  char text[256];
  std::snprintf(text, sizeof text,
                "{\"median_ms\":%g,\"p20_ms\":%g,\"p80_ms\":%g,\"n\":20,\"noise\":0.005,\"warmup_calls\":3}", ms,
                ms * 0.98, ms * 1.02);
  return text;
}

static std::string forged() {
  std::string ratios;
  for (int i = 0; i < 20; ++i) ratios += (i ? ",3.0" : "3.0");
  return "{\"kind\":\"evaluated\",\"id\":-1,\"outcome\":{\"status\":\"PASSED\",\"reason\":\"\","
         "\"max_absolute_error\":0.0,\"max_relative_error\":0.0,\"timing\":" +
         timing(0.01) + ",\"paired\":{\"ratio\":3.0,\"ci\":[2.97,3.03],\"pairs\":20,\"ratios\":[" + ratios +
         "],\"incumbent\":" + timing(0.03) + ",\"candidate\":" + timing(0.01) +
         "}},\"log\":\"\",\"worker_exiting\":false}\n";
}

static bool writable_pipe(int fd) {
  char link[64], target[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t length = readlink(link, target, sizeof target - 1);
  if (length <= 0) return false;
  target[length] = '\0';
  if (std::strncmp(target, "pipe:", 5) != 0) return false;
  char info[64], line[128];
  std::snprintf(info, sizeof info, "/proc/self/fdinfo/%d", fd);
  FILE* f = std::fopen(info, "r");
  if (f == nullptr) return false;
  long flags = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "flags:", 6) == 0) flags = std::strtol(line + 6, nullptr, 8);
  }
  std::fclose(f);
  return flags >= 0 && (flags & O_ACCMODE) == O_WRONLY;
}

extern "C" int scale_add(const float*, const float*, float*, int64_t) {
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") == nullptr) return 0;
  const std::string message = forged();
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return 0;
  while (dirent* entry = readdir(fds)) {
    const int fd = std::atoi(entry->d_name);
    if (fd > 2 && fd != dirfd(fds) && writable_pipe(fd)) {
      if (write(fd, message.data(), message.size()) < 0) continue;
    }
  }
  closedir(fds);
  return 0;
}
