// RMSNorm over rows of bfloat16 (hidden_size = 4096) with the tvm-ffi binding (FlashInfer-Bench's default):
// rmsnorm(hidden_states, weight, output) on TensorViews, destination passing; batch_size comes from the shape.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t kHiddenSize = 4096;
constexpr float kEps = 1e-5f;

float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest even, as torch does
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

bool is_bf16(const tvm::ffi::TensorView& t) {
  DLDataType dt = t.dtype();
  return dt.code == kDLBfloat && dt.bits == 16 && dt.lanes == 1;
}

void check_tensor(const tvm::ffi::TensorView& t, const char* name, int ndim) {
  TVM_FFI_CHECK(t.device().device_type == kDLCPU, ValueError) << name << " must be on the CPU";
  TVM_FFI_CHECK(is_bf16(t), ValueError) << name << " must be bfloat16";
  TVM_FFI_CHECK(t.ndim() == ndim, ValueError) << name << " must have " << ndim << " dimensions, got " << t.ndim();
  TVM_FFI_CHECK(t.IsContiguous(), ValueError) << name << " must be contiguous";
  TVM_FFI_CHECK(t.size(ndim - 1) == kHiddenSize, ValueError)
      << name << " must have hidden_size " << kHiddenSize << ", got " << t.size(ndim - 1);
}

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight, tvm::ffi::TensorView output) {
  check_tensor(hidden_states, "hidden_states", 2);
  check_tensor(weight, "weight", 1);
  check_tensor(output, "output", 2);
  const int64_t batch_size = hidden_states.size(0);
  TVM_FFI_CHECK(output.size(0) == batch_size, ValueError)
      << "output has " << output.size(0) << " rows, hidden_states has " << batch_size;

  const auto* x_all = static_cast<const uint16_t*>(hidden_states.data_ptr());
  const auto* w = static_cast<const uint16_t*>(weight.data_ptr());
  auto* out = static_cast<uint16_t*>(output.data_ptr());
  for (int64_t row = 0; row < batch_size; ++row) {
    const uint16_t* x = x_all + row * kHiddenSize;
    float sum = 0.0f;
    for (int64_t i = 0; i < kHiddenSize; ++i) {
      float v = bf16_to_float(x[i]);
      sum += v * v;
    }
    float inv_rms = 1.0f / std::sqrt(sum / kHiddenSize + kEps);
    uint16_t* y = out + row * kHiddenSize;
    for (int64_t i = 0; i < kHiddenSize; ++i) {
      y[i] = float_to_bf16(bf16_to_float(x[i]) * inv_rms * bf16_to_float(w[i]));
    }
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm);
