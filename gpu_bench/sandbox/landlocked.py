"""Runs a command whose writes Landlock holds to one folder: a compiler run where no sandbox wraps it.

``python -m evoteam.gpu_bench.sandbox.landlocked FOLDER [--memory BYTES] -- COMMAND...`` restricts itself
(``landlock.py``) to changing files beneath ``FOLDER``, making no symbolic link there, limits its address space
to ``BYTES`` (``RLIMIT_AS``, soft and hard: everything the command starts inherits it), and then becomes
``COMMAND``. ``run_confined`` runs every compiler through it, inside bubblewrap too, for the memory limit.
``run_confined`` uses it where bubblewrap does not wrap a compiler: inside a sandbox already (the worker's
build helper, which alone may write the build cache, so a compiler flag that loads code into the compiler,
``-fplugin`` or ``-B``, must not inherit that right, nor leave a link that steers the helper's own writes
elsewhere), or where no sandbox runs. Where the Linux kernel has no Landlock the command runs as it is.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlock

USAGE = "usage: python -m evoteam.gpu_bench.sandbox.landlocked FOLDER [--memory BYTES] -- COMMAND..."


def command(folder: Path, cmd: Sequence[str], memory: int | None = None) -> list[str]:
    """``cmd`` run with its writes held beneath ``folder`` and, where ``memory`` is given, its address space
    limited to that many bytes."""
    limit = ["--memory", str(memory)] if memory else []
    return [sys.executable, "-m", "evoteam.gpu_bench.sandbox.landlocked", str(folder), *limit, "--", *cmd]


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    memory: int | None = None
    if len(args) > 2 and args[1] == "--memory":
        try:
            memory = int(args[2])
        except ValueError:
            memory = 0
        if memory <= 0:
            print(f"evoteam: --memory takes a number of bytes, not {args[2]!r}", file=sys.stderr)
            return 2
        del args[1:3]
    if len(args) < 3 or args[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    folder, cmd = Path(args[0]), args[2:]
    if memory is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        memory = memory if hard == resource.RLIM_INFINITY else min(memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        landlock.restrict_writes([folder], links=False)  # a link left there could steer a later write elsewhere
    except OSError as exc:
        print(f"evoteam: cannot hold {cmd[0]}'s writes to {folder}: {exc}", file=sys.stderr)
        return 126
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        print(f"evoteam: cannot run {cmd[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached: execvp replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
