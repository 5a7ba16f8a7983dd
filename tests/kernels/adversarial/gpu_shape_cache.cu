// category: 10 gpu
// what: keeps a device copy of the outputs it computed for each size n; from the fourth call on a size it
//   copies the kept outputs into `out` (one device-to-device copy on the given stream) instead of computing:
//   right for as long as the inputs repeat, which they do not.
// expected: rejected (new inputs per trial: the kept outputs are wrong)
#include <cuda_runtime.h>

#include <cstdint>
#include <map>

__global__ void scale_add_kernel(const float* x, const float* y, float* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}

struct Kept {
  float* outputs = nullptr;
  int calls = 0;
};

extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  static std::map<int64_t, Kept> kept;
  Kept& k = kept[n];
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (++k.calls > 3 && k.outputs != nullptr) {
    return static_cast<int>(cudaMemcpyAsync(out, k.outputs, bytes, cudaMemcpyDeviceToDevice, stream));
  }
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (blocks > 0) scale_add_kernel<<<blocks, threads, 0, stream>>>(x, y, out, n);
  if (k.outputs == nullptr && cudaMalloc(&k.outputs, bytes) != cudaSuccess) k.outputs = nullptr;
  if (k.outputs != nullptr) cudaMemcpyAsync(k.outputs, out, bytes, cudaMemcpyDeviceToDevice, stream);
  return static_cast<int>(cudaGetLastError());
}
