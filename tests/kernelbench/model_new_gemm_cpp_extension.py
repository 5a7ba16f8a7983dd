# A KernelBench-style candidate for 76_Gemm_Add_ReLU.py whose bias add and ReLU are a C++ extension built at
# import from a source file with torch.utils.cpp_extension.load (the file is written to a temporary folder).
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SOURCE = """
#include <torch/extension.h>

torch::Tensor add_relu(torch::Tensor x, torch::Tensor bias) {
    return torch::clamp_min(x + bias, 0.0);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_relu", &add_relu); }
"""

_path = Path(tempfile.mkdtemp()) / "add_relu.cpp"
_path.write_text(_SOURCE)
_ext = load(name="kb_add_relu_file", sources=[str(_path)], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return _ext.add_relu(self.gemm(x), self.bias)
