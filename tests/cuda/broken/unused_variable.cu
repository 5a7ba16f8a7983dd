// A variable declared and never used, and one set but never read.
__global__ void copy(const float* in, float* out)
{
    int unused_index = 4;
    float scratch;
    scratch = in[0];
    out[threadIdx.x] = in[threadIdx.x];
}
