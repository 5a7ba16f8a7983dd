# category: 3 deferred work
# what: forks on every call; the child leaves the host's process group for one of its own (setpgid(0, 0), as
#   ninja runs each command), says so through a pipe, then computes the outputs into the shared buffer (its
#   slow, 20-pass honest work) and exits, while the parent returns as soon as the child has left the group. A
#   stop of the host's group alone does not reach the child: before the worker stopped the host's processes
#   one by one (2026-12-07), its first calls passed, the child done before the harness looked, and it was
#   refused only when a later call's check came first.
# workload: small-1000 (like the other deferrals: little work, done before the harness looks)
# expected: rejected or neutralized (the child is stopped with the host, one by one, outside its group: its
#   work is frozen unfinished, or measured with the call)
import os

import torch

PASSES = 20
_children: list[int] = []


def run(x, y, out):
    for child in list(_children):  # reap the children of earlier calls
        if os.waitpid(child, os.WNOHANG)[0]:
            _children.remove(child)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        os.write(write, b"x")
        for _ in range(PASSES):
            torch.add(2 * x, y, out=out)
        os._exit(0)
    _children.append(child)
    os.read(read, 1)
    os.close(read)
    os.close(write)
