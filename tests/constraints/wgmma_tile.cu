// One warpgroup-wide m64n8k16 bf16 MMA issued with wgmma.mma_async (Hopper, sm_90a), from shared memory
// descriptors: the "hard design" a constraint can hold a team to.
#include <cstdint>

extern "C" __global__ void tile_wgmma(float* out, uint64_t desc_a, uint64_t desc_b) {
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(desc_a), "l"(desc_b));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    int t = threadIdx.x;
    out[4 * t + 0] = d0;
    out[4 * t + 1] = d1;
    out[4 * t + 2] = d2;
    out[4 * t + 3] = d3;
}
