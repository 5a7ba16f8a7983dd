"""Asks for 16 TiB of scratch memory: the allocation fails (the worker's address-space limit or the machine)."""

import torch


def run(x, y, out):
    scratch = torch.empty(1 << 42, dtype=torch.float32)
    torch.add(2 * x, y, out=out)
    del scratch
