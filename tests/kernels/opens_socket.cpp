// Honest arithmetic, but first connects to 127.0.0.1:EVOTEAM_FAULT_PORT (a listener of the test's) and sends a
// line. Returns the errno of the failed connect (ENETUNREACH or ECONNREFUSED in a sandbox), 0 if it got out.
#include <arpa/inet.h>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  const char* port = std::getenv("EVOTEAM_FAULT_PORT");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(port ? port : "9")));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int result = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    result = errno;
  } else {
    const char line[] = "a candidate reached the network\n";
    (void)!write(fd, line, sizeof line - 1);
  }
  close(fd);
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return result;
}
