"""Correct; prints how many threads torch has when it runs."""

import torch


def run(x, y, out):
    print(f"threads={torch.get_num_threads()}")
    torch.add(2 * x, y, out=out)
