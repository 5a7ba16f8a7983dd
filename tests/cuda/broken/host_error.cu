// Host code that the CUDA front end accepts but the host compiler (g++) rejects.
__attribute__((error("host_only_entry must not be called"))) void host_only_entry();

void launch()
{
    host_only_entry();
}

__global__ void touch(float* out) { out[0] = 1.0f; }
