"""A correct Python solution that declares a dataclass (which looks its module up by name while it is made)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Coefficients:
    scale: float = 2.0


def run(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    torch.add(Coefficients().scale * x, y, out=out)
