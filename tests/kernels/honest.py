"""A correct destination-passing Python solution."""

import torch


def run(x, y, out):
    torch.add(2 * x, y, out=out)
