"""Linux ``perf stat`` counters of one built CPU kernel on one workload: cycles, instructions, cache and branch
misses where the machine exposes hardware counters, and the software ones (task clock, page faults, context
switches, migrations) everywhere perf runs.

perf runs the same program as the ncu profile (``python -m evoteam.gpu_bench.profile.target REQUEST``) with its
events disabled; the program enables them just around its kernel calls through perf's control fifo, so input
generation and Python's start-up are not counted. It runs through a ``PerfHost`` (sandboxed). Imports no
torch.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from evoteam.gpu_bench.profile.ncu import ProcessResult, ProfileRequest, ProfileUnavailable, run_sandboxed

EVENTS = (
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
    "L1-dcache-load-misses",
    "LLC-load-misses",
    "task-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
)
PERF_ENV = "EVOTEAM_PERF"
"""Names the perf executable explicitly (then PATH is not searched)."""


class PerfReport(BaseModel):
    kernel: str
    workload: str
    axes: dict[str, int]
    calls: int
    command: list[str]
    counters: dict[str, float] = Field(default_factory=dict)
    """Event → its count over the kernel's calls (``task-clock`` in milliseconds), for the events counted."""
    unsupported: list[str] = Field(default_factory=list)
    """Events this machine does not count (a VM without a PMU has no hardware counters)."""
    error: str | None = None
    output: str = ""


class PerfHost:
    """This machine: perf from ``$EVOTEAM_PERF`` or ``$PATH``; commands run in the sandbox (the work folder
    their only writable one)."""

    def find_perf(self) -> Path | None:
        explicit = os.environ.get(PERF_ENV)
        if explicit:
            return Path(explicit) if os.access(explicit, os.X_OK) else None
        found = shutil.which("perf")
        return Path(found) if found else None

    def run(self, command: list[str], timeout_s: float, workdir: Path) -> ProcessResult:
        return run_sandboxed(command, timeout_s, workdir)


class PerfRunner(Protocol):
    def find_perf(self) -> Path | None: ...

    def run(self, command: list[str], timeout_s: float, workdir: Path) -> ProcessResult: ...


def require_perf(host: PerfRunner) -> Path:
    perf = host.find_perf()
    if perf is None:
        raise ProfileUnavailable(f"perf was not found on PATH (Debian: linux-perf; or set {PERF_ENV})")
    return perf


def perf_profile(
    host: PerfRunner, request: ProfileRequest, timeout_s: float = 300.0, python: str = sys.executable
) -> PerfReport:
    """Counts ``EVENTS`` over the request's kernel calls on its workload."""
    perf = require_perf(host)
    with tempfile.TemporaryDirectory(prefix="evoteam-perf-") as tmp:
        work = Path(tmp)
        ctl, ack, out = work / "ctl.fifo", work / "ack.fifo", work / "perf.csv"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        counted = request.model_copy(update={"perf_control": (str(ctl), str(ack))})
        request_path = work / "request.json"
        request_path.write_text(counted.model_dump_json())
        command = [str(perf), "stat", "-x", ",", "-o", str(out), "-e", ",".join(EVENTS), "--delay=-1"]
        command += ["--control", f"fifo:{ctl},{ack}", "--", python, "-m", "evoteam.gpu_bench.profile.target"]
        command.append(str(request_path))
        result = host.run(command, timeout_s, work)
        text = out.read_text(errors="replace") if out.is_file() else ""
    counters, unsupported = parse_perf_csv(text)
    report = PerfReport(
        kernel=request.solution.name,
        workload=request.workload.uuid,
        axes=request.workload.axes,
        calls=request.calls,
        command=command,
        counters=counters,
        unsupported=unsupported,
    )
    if result.returncode is None:
        report.error = f"perf ran past {timeout_s:.0f} s and was killed"
    elif result.returncode != 0 or not counters:
        tail = result.output.strip().splitlines()[-1:] or ["no output"]
        report.error = f"perf stat counted nothing (exit status {result.returncode}): {tail[0]}"
    if report.error is not None:
        report.output = result.output[-4000:]
    return report


def parse_perf_csv(text: str) -> tuple[dict[str, float], list[str]]:
    """``perf stat -x,`` lines (value, unit, event, ...) → (counts by event, events not supported/counted)."""
    counters: dict[str, float] = {}
    unsupported: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0].strip(), fields[2].strip().removesuffix(":u")
        if value.startswith("<"):
            unsupported.append(event)
            continue
        try:
            counters[event] = float(value)
        except ValueError:
            continue
    return counters, unsupported


class FakePerfHost:
    """Writes ``csv`` where the perf command would (``-o``), answers ``returncode``; keeps the commands."""

    def __init__(self, csv: str = "", returncode: int | None = 0, perf: Path | None = Path("/usr/bin/perf")) -> None:
        self.csv, self.returncode, self.perf = csv, returncode, perf
        self.commands: list[list[str]] = []

    def find_perf(self) -> Path | None:
        return self.perf

    def run(self, command: list[str], timeout_s: float, workdir: Path) -> ProcessResult:
        self.commands.append(command)
        Path(command[command.index("-o") + 1]).write_text(self.csv)
        return ProcessResult(self.returncode, "")
