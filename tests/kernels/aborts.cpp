#include <cstdint>
#include <cstdlib>
extern "C" int scale_add(const float*, const float*, float*, int64_t) {
  std::abort();
}
