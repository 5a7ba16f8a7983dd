# A KernelBench-style candidate for 76_Gemm_Add_ReLU.py: the same parameters created in the same order (so the
# seeded init gives the same weights), one fused addmm and an in-place clamp instead of three ops.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.gemm.weight.t()).clamp_min_(0.0)
