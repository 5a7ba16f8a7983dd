// A big local array under a tight register budget (__launch_bounds__): ptxas spills to local memory.
__global__ void __launch_bounds__(1024, 2) spill(const float* in, float* out, int n)
{
    float local[64];
    for (int j = 0; j < 64; ++j) local[j] = in[(threadIdx.x + j * 31) % n];
    float acc = 0.0f;
    for (int r = 0; r < 8; ++r)
        for (int j = 0; j < 64; ++j) acc += local[j] * local[(j * r + 7) % 64];
    out[threadIdx.x] = acc;
}
