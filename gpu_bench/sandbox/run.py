"""Running a compiler on candidate sources inside the sandbox: it may write only its build folder (so an
``#include`` of a secret finds nothing, and nothing lands outside), with a cleared environment and no network.
Where no sandbox wraps it (inside one already, as the worker's build helper is, or none at all), Landlock
holds its writes to that folder (``landlocked.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlocked
from evoteam.gpu_bench.sandbox.choose import current


def run_confined(cmd: list[str], work: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of ``cmd`` in ``work``, confined; raises what ``subprocess.run`` raises."""
    scratch = work / ".evoteam-tmp"
    argv, env = current().wrap(cmd, writable=[work], tmpdir=scratch, env=os.environ)
    if argv == cmd:  # not wrapped: its writes held by Landlock, its temporary files in the build folder
        scratch.mkdir(parents=True, exist_ok=True)
        argv, env = landlocked.command(work, cmd), {**env, "TMPDIR": str(scratch)}
    try:
        return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
