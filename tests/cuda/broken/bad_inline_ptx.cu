// Inline PTX that moves a .f32 register with mov.u32: ptxas rejects the operand types.
__global__ void reinterpret(float* out)
{
    float f = out[0];
    int r;
    asm("mov.u32 %0, %1;" : "=r"(r) : "f"(f));
    out[1] = r;
}
