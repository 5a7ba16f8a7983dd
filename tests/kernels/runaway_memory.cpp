// Allocates and touches memory until allocation fails, then dereferences the null pointer.
#include <cstdint>
#include <cstdlib>
#include <cstring>
extern "C" int scale_add(const float*, const float*, float*, int64_t) {
  while (true) {
    char* block = static_cast<char*>(std::malloc(64 << 20));
    std::memset(block, 1, 64 << 20);
  }
}
