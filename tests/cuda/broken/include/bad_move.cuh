// An inlined device function whose inline PTX is wrong.
__device__ __forceinline__ int bad_move(float f)
{
    int r;
    asm("mov.u32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}
