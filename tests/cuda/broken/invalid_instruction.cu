// Inline PTX with an instruction that does not exist.
__global__ void bogus(float* out)
{
    asm volatile("bogus.op.u32 %0;" ::"f"(out[0]));
}
