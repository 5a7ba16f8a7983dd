"""Runs a command whose writes Landlock holds to one folder: a compiler run where no sandbox wraps it.

``python -m evoteam.gpu_bench.sandbox.landlocked FOLDER -- COMMAND...`` restricts itself (``landlock.py``) to
changing files beneath ``FOLDER``, making no symbolic link there, and then becomes ``COMMAND``.
``run_confined`` uses it where bubblewrap does not wrap a compiler: inside a sandbox already (the worker's
build helper, which alone may write the build cache, so a compiler flag that loads code into the compiler,
``-fplugin`` or ``-B``, must not inherit that right, nor leave a link that steers the helper's own writes
elsewhere), or where no sandbox runs. Where the Linux kernel has no Landlock the command runs as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlock


def command(folder: Path, cmd: Sequence[str]) -> list[str]:
    """``cmd`` run with its writes held beneath ``folder``."""
    return [sys.executable, "-m", "evoteam.gpu_bench.sandbox.landlocked", str(folder), "--", *cmd]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m evoteam.gpu_bench.sandbox.landlocked FOLDER -- COMMAND...", file=sys.stderr)
        return 2
    folder, cmd = Path(argv[0]), list(argv[2:])
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
