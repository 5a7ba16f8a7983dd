// A template error that shows only when the kernel is instantiated: two levels of context.
template <typename T>
__device__ T twice(T x)
{
    return x.value * 2;
}

template <typename T>
__global__ void scale(T* out, int n)
{
    int i = threadIdx.x;
    if (i < n) out[i] = twice(out[i]);
}

template __global__ void scale<float>(float*, int);
