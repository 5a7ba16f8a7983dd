# category: 3 deferred work
# what: starts, on every call, a process that is not the host's descendant: clone(CLONE_PARENT | SIGCHLD)
#   through libc makes it the worker's child, the host's sibling. The child leaves the host's process group
#   (setpgid(0, 0)), says so through a pipe, then computes the outputs into the shared buffer (its slow,
#   20-pass honest work) and exits, while the host returns as soon as the child has left the group. Neither a
#   stop of the host's group nor a walk of the host's descendants reaches it.
# workload: small-1000 (like the other deferrals: little work, done before the harness looks)
# expected: rejected (the host may not start a process outside its own tree)
import ctypes
import os
import signal

import torch

PASSES = 20
CLONE_PARENT = 0x00008000
SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def run(x, y, out):
    read, write = os.pipe()
    child = _libc.syscall(SYS_CLONE, ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD), None, None, None, None)
    if child < 0:
        os.close(read)
        os.close(write)
        raise OSError(ctypes.get_errno(), "clone(CLONE_PARENT) was refused")
    if child == 0:
        os.setpgid(0, 0)
        os.write(write, b"x")
        for _ in range(PASSES):
            torch.add(2 * x, y, out=out)
        os._exit(0)
    os.read(read, 1)
    os.close(read)
    os.close(write)
