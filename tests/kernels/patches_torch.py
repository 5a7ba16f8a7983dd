"""Wrong on purpose, and hides it: replaces torch's multiply so the reference is wrong in the same way."""

import torch

_real_mul = torch.Tensor.__rmul__


def _fake_rmul(self, other):
    return self * 0 + 1 if isinstance(other, int) and other == 2 else _real_mul(self, other)


torch.Tensor.__rmul__ = _fake_rmul


def run(x, y, out):
    torch.add(torch.ones_like(x), y, out=out)
