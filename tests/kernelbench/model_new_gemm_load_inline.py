# A KernelBench-style candidate for 76_Gemm_Add_ReLU.py whose bias add and ReLU are a C++ extension built at
# import with torch.utils.cpp_extension.load_inline, as KernelBench candidates build their kernels.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = """
#include <torch/extension.h>

torch::Tensor add_relu(torch::Tensor x, torch::Tensor bias) {
    auto out = torch::empty_like(x);
    auto xa = x.contiguous();
    const float* px = xa.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* po = out.data_ptr<float>();
    int64_t rows = x.size(0), cols = x.size(1);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            float v = px[i * cols + j] + pb[j];
            po[i * cols + j] = v > 0.f ? v : 0.f;
        }
    return out;
}
"""

_ext = load_inline(name="kb_add_relu", cpp_sources=[_SOURCE], functions=["add_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return _ext.add_relu(self.gemm(x), self.bias)
