// Host inline assembly with an operand the assembler rejects.
int pick(int x)
{
    int y;
    asm("movl %1, %0" : "=q"(y) : "xyz"(x));
    return y;
}

__global__ void touch(float* out) { out[0] = 1.0f; }
