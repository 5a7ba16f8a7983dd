// A device function declared but defined nowhere: only the device linker (nvlink, -rdc) notices.
extern __device__ float helper(float x);

__global__ void use_helper(float* out) { out[0] = helper(out[0]); }
