// A header that does not exist: the preprocessor (g++ -E) stops with a fatal error.
#include "no_such_header.cuh"

__global__ void touch(float* out) { out[0] = 1.0f; }
