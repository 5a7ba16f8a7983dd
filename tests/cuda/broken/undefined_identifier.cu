// An identifier that is never declared: a front-end (cudafe) error with a caret.
__global__ void add_bias(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = out[i] + undefined_bias * 2.0f;
}
