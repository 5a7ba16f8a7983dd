"""Correct; prints how many threads torch has when it runs, and the OpenMP wait policy it runs under."""

import os

import torch


def run(x, y, out):
    print(f"threads={torch.get_num_threads()} wait={os.environ.get('OMP_WAIT_POLICY')}")
    torch.add(2 * x, y, out=out)
