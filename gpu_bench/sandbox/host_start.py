"""Starts the Python host (``bindings/python_host_program.py``) confined while it still has one thread.

Landlock holds the thread that restricts itself and the threads it starts later, not those already running,
and importing numpy or torch starts a thread pool (two threads more with two CPUs). Restricted after torch
loaded, the host's pool threads could still write anywhere the sandbox lets it: a candidate that got code
run on one (a function pointer of the pool overwritten through ctypes) had an unrestricted writer. So this
module, whose package loads no numpy or torch, arms the death signal, becomes a child subreaper and
restricts the host's writes to its own folders (``writable_folders``) first, and only then loads the host
program, torch and the candidate. Run as ``python -m evoteam.gpu_bench.sandbox.host_start`` with the host
program's arguments.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlock
from evoteam.gpu_bench.worker import strays

ARGUMENTS = 8
"""SOCK WORKER THREADS DPS KIND FOLDER FILE SYMBOL (see ``python_host_program``)."""


def writable_folders() -> list[Path]:
    """What the host may change: its temporary folder (``TMPDIR``, the worker's for it), the solution's run-time
    build folders (``extension_dirs``; where the worker set none, below the temporary folder) and /dev/shm."""
    temporary = Path(os.environ.get("TMPDIR") or "/tmp")
    for variable, name in (("TORCH_EXTENSIONS_DIR", "torch_extensions"), ("TORCHINDUCTOR_CACHE_DIR", "torchinductor")):
        os.environ.setdefault(variable, str(temporary / name))
    folders = [temporary, Path(os.environ["TORCH_EXTENSIONS_DIR"]), Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])]
    return [*folders, *([Path("/dev/shm")] if Path("/dev/shm").is_dir() else [])]


def main(argv: Sequence[str]) -> int:
    if len(argv) != ARGUMENTS:
        print(f"evoteam's Python host takes {ARGUMENTS} arguments, not {len(argv)}", file=sys.stderr)
        return 2
    if not strays.die_with(int(argv[1])):  # the worker died before the death signal was armed
        return 3
    strays.become_subreaper()
    alone = landlock.threads_now() == 1
    refused = None
    try:
        confined = landlock.restrict_writes(writable_folders()) and alone
    except OSError as exc:
        confined, refused = False, str(exc)
    from evoteam.gpu_bench.bindings import python_host_program  # torch loads here, after the restriction

    return python_host_program.main(argv, confined, refused)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
