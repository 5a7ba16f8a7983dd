# category: 7 python binding
# what: does the slow, 20-pass honest work, and on its first call, run inside the evaluation worker
#   (--no-isolate, a Python candidate on a GPU), finds the worker's protocol pipe among the process's file
#   descriptors (/proc/self/fd, /proc/self/fdinfo) and writes 64 MiB there with no newline. The worker's owner
#   (the CLI, or the editor's language server) reads the protocol a line at a time: before 2026-12-07 it held
#   the whole flood as one line (1.5 GiB of it made the owner 3.3 GB resident), and a larger one would have
#   ended it. Its real answer follows and is never read.
# expected: neutralized (in its Python host there is no pipe of the worker's to find; in the worker, where
#   the suite also runs it, the owner stops at a line of 16 MiB and replaces the worker: RUNTIME_ERROR)
import os

import torch

PASSES = 20
_done = []


def _writable_pipes():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd <= 2 or not os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError):
            continue
        if flags & os.O_ACCMODE == os.O_WRONLY:
            yield fd


def _flood():
    chunk = b"x" * (1 << 20)
    for fd in _writable_pipes():
        try:
            for _ in range(64):
                os.write(fd, chunk)
        except OSError:
            pass


def run(x, y, out):
    if not _done:
        _done.append(True)
        _flood()
    for _ in range(PASSES):
        torch.add(2 * x, y, out=out)
