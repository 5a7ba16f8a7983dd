#include <cstdint>
extern "C" int scale_add(const float*, const float*, float*, int64_t) { return 7; }
