"""Ends its own worker with SIGKILL, as the kernel's OOM killer would: from outside, the two look alike."""

import os
import signal


def run(x, y, out):
    os.kill(os.getpid(), signal.SIGKILL)
