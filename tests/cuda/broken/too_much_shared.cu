// 240000 bytes of static shared memory: more than one block may use on sm_90.
__global__ void hog(float* out)
{
    __shared__ float big[60000];
    big[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = big[threadIdx.x + 1];
}
