// Keeps a large per-thread array live under a tight register cap, so ptxas spills.
extern "C" __global__ void __launch_bounds__(1024, 2) spill(const float* in, float* out, int n) {
    float acc[96];
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = in[(threadIdx.x + i * 37) % n];
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int i = 0; i < 96; ++i) s += acc[(i * (r + 3)) % 96] * acc[i];
    out[threadIdx.x] = s;
}
