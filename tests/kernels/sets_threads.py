"""Correct, but leaves torch single-threaded for whoever runs next."""

import torch


def run(x, y, out):
    torch.set_num_threads(1)
    torch.add(2 * x, y, out=out)
