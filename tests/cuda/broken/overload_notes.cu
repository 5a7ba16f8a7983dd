// No overload matches: the message continues on a second line and notes point at the candidates.
__device__ float take(int a, int b);
__device__ float take(float a, float b);

__global__ void call(float* out)
{
    out[1] = take(out, 1);
}
