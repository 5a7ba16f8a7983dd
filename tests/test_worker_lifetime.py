"""A worker never outlives the command that started it: ``evoteam bench`` killed by SIGTERM or SIGKILL while
a candidate spins, with the sandbox off (with it on, bubblewrap's --die-with-parent also holds), leaves no
worker running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, REPO, kernel_solution

pytestmark = pytest.mark.integration


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (through /proc/PID/task/*/children)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_worker_dies_with_the_command(tmp_path: Path, how: signal.Signals) -> None:
    solution = tmp_path / "spin.json"
    solution.write_text(kernel_solution("never_returns.cpp").model_dump_json())
    env = {**os.environ, "EVOTEAM_SANDBOX": "off", "EVOTEAM_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "evoteam.cli.main", "bench", "--definition", str(DATA / "scale_add.json")]
    command += ["--workloads", str(DATA / "scale_add.jsonl"), "--solution", str(solution), "--timeout", "120"]
    command += ["--max-time", "0.05", "--flush", "none"]
    cli = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 120
        while not workers and time.monotonic() < deadline and cli.poll() is None:
            time.sleep(0.2)
            workers = [p for p in descendants(cli.pid) if "evoteam.gpu_bench.worker" in cmdline(p)]
        assert workers, "no worker started"
        # the quick baseline runs first (well under a CPU second); then the candidate spins, in the worker's
        # native host (its child): wait for 4 CPU s in the worker and what it started
        family = workers
        while sum(map(cpu_seconds, family)) < 4.0 and time.monotonic() < deadline:
            time.sleep(0.5)
            family = list(dict.fromkeys(family + workers + descendants(workers[0])))
        spinning = sum(map(cpu_seconds, family)) >= 4.0
        assert spinning, "the candidate never spun"
        cli.send_signal(how)
        cli.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(running(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in family if running(p)] == []
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
