// The bad inline PTX sits in a header function inlined into the kernel.
#include "include/bad_move.cuh"

__global__ void convert(float* out)
{
    out[1] = bad_move(out[0]);
}
