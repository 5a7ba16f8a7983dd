// Static shared memory (256 floats + 32 ints = 1152 bytes), one barrier, a user constant bank and a
// device function that is not inlined (so ptxas reports its properties too).
__constant__ float coeffs[16];

__device__ __noinline__ float blend(float a, float b) { return a * coeffs[0] + b * coeffs[1]; }

__global__ void reverse_block(float* data)
{
    __shared__ float tile[256];
    __shared__ int flags[32];
    int t = threadIdx.x;
    tile[t] = data[blockIdx.x * 256 + t];
    if (t < 32) flags[t] = t;
    __syncthreads();
    data[blockIdx.x * 256 + t] = blend(tile[255 - t], (float)flags[t % 32]);
}
