# category: 11 the other side of the pair
# what: does the slow, 20-pass honest work, and on its first call starts three processes that are not its
#   process's descendants: clone(CLONE_PARENT | SIGCHLD) through libc makes each a sibling of the process it
#   runs in. They share a flag with the case (a shared anonymous mapping), which says whether a call of the
#   case is running: they burn the CPU whenever none is, that is while the other kernel of the pair (the
#   reference, the incumbent) is timed, and sleep while the case runs. In the worker's process (a Python
#   candidate on a GPU, anything with --no-isolate) they escaped the worker's kill of what a candidate leaves,
#   which walks its descendants, and outlived the request.
# workload: large-65536
# expected: rejected (no process may start one outside its own tree)
import ctypes
import mmap
import os
import signal
import time

import torch

PASSES = 20
BURNERS = 3
CLONE_PARENT = 0x00008000
SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_flag = mmap.mmap(-1, mmap.PAGESIZE)  # shared with the burners
_burners: list[int] = []


def _burn(owner: int) -> None:
    os.setpgid(0, 0)
    alive = f"/proc/{owner}"
    while os.path.exists(alive):
        end = time.perf_counter() + 0.002
        while _flag[0] == 0 and time.perf_counter() < end:
            pass
        if _flag[0]:
            time.sleep(0.0005)
    os._exit(0)


def _start() -> None:
    owner = os.getpid()
    for _ in range(BURNERS):
        child = _libc.syscall(SYS_CLONE, ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD), None, None, None, None)
        if child < 0:
            raise OSError(ctypes.get_errno(), "clone(CLONE_PARENT) was refused")
        if child == 0:
            _burn(owner)
        _burners.append(child)


def run(x, y, out):
    _flag[0] = 1
    if not _burners:
        _start()
    for _ in range(PASSES):
        torch.add(2 * x, y, out=out)
    _flag[0] = 0
