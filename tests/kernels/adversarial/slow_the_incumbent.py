# category: 11 the other side of the pair
# what: does the slow, 20-pass honest work, and on its first call starts three processes that are not the
#   host's descendants: clone(CLONE_PARENT | SIGCHLD) through libc makes each the worker's child, the host's
#   sibling, and each leaves the host's process group (setpgid(0, 0)). They watch the host's state in /proc and
#   burn the CPU whenever it is stopped, that is while the other kernel of the pair (the reference, the
#   incumbent) is being timed, and sleep while the host runs. On the worker's CPU the incumbent then gets a
#   quarter of it, and the case's speedup over it grows about fourfold. Neither a stop of the host's group nor
#   a walk of the host's descendants reaches them.
# workload: large-65536
# expected: rejected (the host may not start a process outside its own tree)
import ctypes
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
_burners: list[int] = []


def _state(path: str) -> bytes:
    with open(path, "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0]


def _burn(host: int) -> None:
    os.setpgid(0, 0)
    path = f"/proc/{host}/stat"
    while True:
        try:
            stopped = _state(path) == b"T"
        except (OSError, IndexError):
            os._exit(0)
        if not stopped:
            time.sleep(0.005)


def _start() -> None:
    host = os.getpid()
    for _ in range(BURNERS):
        child = _libc.syscall(SYS_CLONE, ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD), None, None, None, None)
        if child < 0:
            raise OSError(ctypes.get_errno(), "clone(CLONE_PARENT) was refused")
        if child == 0:
            _burn(host)
        _burners.append(child)


def run(x, y, out):
    if not _burners:
        _start()
    for _ in range(PASSES):
        torch.add(2 * x, y, out=out)
