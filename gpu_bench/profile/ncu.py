"""Nsight Compute profiles of one built kernel on one workload: the ncu command, its raw CSV, typed results.

ncu, the GPU and processes sit behind ``ProfileHost`` (``LocalHost`` here, ``FakeHost`` for tests); the
program ncu runs is ``profile_target``. Imports nothing of evoteam outside ``gpu_bench`` and never torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from evoteam.gpu_bench.profile.ncu_csv import KernelProfile, parse_raw_csv
from evoteam.gpu_bench.schema import Definition, Solution, Workload

DEFAULT_SECTIONS = ("SpeedOfLight", "Occupancy", "MemoryWorkloadAnalysis")
CUDA_ROOTS = (Path("/usr/local/cuda"),)
NCU_ENV = "EVOTEAM_NCU"
"""Names the ncu executable explicitly (then PATH and the CUDA folders are not searched)."""


class ProfileReport(BaseModel):
    kernel: str
    """The task (or solution) that was profiled."""
    workload: str
    axes: dict[str, int]
    sections: list[str]
    command: list[str]
    kernels: list[KernelProfile]
    messages: list[str] = Field(default_factory=list)
    """ncu's own ``==PROF==`` / ``==WARNING==`` / ``==ERROR==`` lines."""
    error: str | None = None
    """Why nothing was profiled (None when ``kernels`` holds the results)."""
    output: str = ""
    """What the profiled program printed (its tail), kept when the profile failed."""


class ProfileRequest(BaseModel):
    """What ``profile_target`` reads: the built kernel and the one workload to run."""

    solution: Solution
    artifact: str
    definition: Definition
    workload: Workload
    blob_root: str | None = None
    calls: int = Field(default=3, ge=1)
    seed: int = 0
    device: Literal["cuda", "cpu"] = "cuda"
    """Where the inputs are made (a CPU kernel's on the host)."""
    perf_control: tuple[str, str] | None = None
    """perf's control and acknowledgement fifos: the program enables the counters just around its kernel calls."""


class ProfileUnavailable(RuntimeError):
    """This machine cannot profile (no ncu, no GPU); the message is one line for the user."""


# ---- running ncu -------------------------------------------------------------------------------------------------


@dataclass
class ProcessResult:
    returncode: int | None
    """None when the process ran past its time limit and was killed."""
    output: str
    """stdout and stderr together."""


class ProfileHost(Protocol):
    def find_ncu(self) -> Path | None: ...

    def gpu_problem(self) -> str | None:
        """Why no CUDA GPU can be used here, or None when one can."""
        ...

    def run(self, command: list[str], timeout_s: float, workdir: Path | None = None) -> ProcessResult:
        """Runs ``command`` (which runs the candidate) confined to ``workdir``, its only writable folder."""
        ...


def find_ncu(path: str | None = None, cuda_roots: Sequence[Path] = CUDA_ROOTS) -> Path | None:
    """ncu on ``path`` (default: ``$PATH``), else in ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``."""
    found = shutil.which("ncu", path=path)
    if found:
        return Path(found)
    roots = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    for root in [*roots, *cuda_roots]:
        candidate = root / "bin" / "ncu"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class LocalHost:
    """This machine: ncu from ``$EVOTEAM_NCU``, ``$PATH`` or the CUDA folders; the GPU as torch sees it."""

    def find_ncu(self) -> Path | None:
        explicit = os.environ.get(NCU_ENV)
        if explicit:
            return Path(explicit) if os.access(explicit, os.X_OK) else None
        return find_ncu()

    def gpu_problem(self) -> str | None:
        try:
            import torch
        except ImportError:
            return "torch is not installed"
        if not torch.cuda.is_available():
            return f"no CUDA GPU is visible (torch {torch.__version__}: torch.cuda.is_available() is false)"
        return None

    def run(self, command: list[str], timeout_s: float, workdir: Path | None = None) -> ProcessResult:
        """Runs ncu in the sandbox, holding the GPU's timing lock, so no evaluator worker times on it meanwhile."""
        from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, device_key, gpu_lock

        if workdir is None:
            with tempfile.TemporaryDirectory(prefix="evoteam-profile-") as tmp:
                return self.run(command, timeout_s, Path(tmp))
        try:
            with gpu_lock(device_key(0), wait_s=timeout_s):
                return run_sandboxed(command, timeout_s, workdir)
        except GpuLockTimeout as exc:
            return ProcessResult(None, str(exc))


def run_sandboxed(command: list[str], timeout_s: float, workdir: Path) -> ProcessResult:
    """``command`` in this process's sandbox, ``workdir`` its only writable folder; a time-out is a ``None``
    return code with what it printed, a command that cannot start is 127."""
    from evoteam.gpu_bench import sandbox

    argv, env = sandbox.current().wrap(command, writable=[workdir], tmpdir=workdir / "tmp", env=os.environ)
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        return ProcessResult(None, out.decode(errors="replace") if isinstance(out, bytes) else out)
    except OSError as exc:
        return ProcessResult(127, f"cannot run {command[0]}: {exc}")
    return ProcessResult(proc.returncode, proc.stdout + proc.stderr)


@dataclass
class FakeHost:
    """A host that answers from memory: writes ``csv`` into the ``--log-file`` of each command it is given."""

    ncu: Path | None = Path("/opt/nsight/ncu")
    problem: str | None = None
    csv: str = ""
    returncode: int | None = 0
    output: str = ""
    commands: list[list[str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    """The request file each command named, read while it existed."""

    def find_ncu(self) -> Path | None:
        return self.ncu

    def gpu_problem(self) -> str | None:
        return self.problem

    def run(self, command: list[str], timeout_s: float, workdir: Path | None = None) -> ProcessResult:
        self.commands.append(command)
        self.requests.append(Path(command[-1]).read_text() if Path(command[-1]).is_file() else "")
        if "--log-file" in command:
            Path(command[command.index("--log-file") + 1]).write_text(self.csv)
        return ProcessResult(self.returncode, self.output)


def require_profiler(host: ProfileHost) -> Path:
    """ncu's path, or ``ProfileUnavailable`` saying what is missing."""
    ncu = host.find_ncu()
    if ncu is None:
        explicit = os.environ.get(NCU_ENV)
        if explicit:
            raise ProfileUnavailable(f"Nsight Compute (ncu) is not available: {NCU_ENV}={explicit} is not executable")
        raise ProfileUnavailable("Nsight Compute (ncu) was not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin")
    problem = host.gpu_problem()
    if problem is not None:
        raise ProfileUnavailable(f"profiling needs a CUDA GPU: {problem}")
    return ncu


def ncu_command(
    ncu: Path,
    request: Path,
    log_file: Path,
    kernel_regex: str,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    count: int = 1,
    python: str = sys.executable,
) -> list[str]:
    """ncu on ``python -m evoteam.gpu_bench.profile.target REQUEST``; the CSV goes to ``log_file`` so that
    what the kernel prints cannot mix with it."""
    command = [str(ncu)]
    for section in sections:
        command += ["--section", section]
    command += ["--csv", "--page", "raw", "--print-units", "base", "--target-processes", "all"]
    command += ["-k", f"regex:{kernel_regex}", "-c", str(count), "--log-file", str(log_file)]
    return [*command, python, "-m", "evoteam.gpu_bench.profile.target", str(request)]


def profile_workload(
    host: ProfileHost,
    request: ProfileRequest,
    *,
    kernel_regex: str | None = None,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    count: int = 1,
    timeout_s: float = 300.0,
) -> ProfileReport:
    """Profiles the request's kernel under ncu; a profile that yields no kernel is a report with ``error``."""
    ncu = require_profiler(host)
    regex = kernel_regex or request.solution.spec.entry_symbol
    with tempfile.TemporaryDirectory(prefix="evoteam-profile-") as tmp:
        request_path, log_file = Path(tmp) / "request.json", Path(tmp) / "ncu.csv"
        request_path.write_text(request.model_dump_json())
        command = ncu_command(ncu, request_path, log_file, regex, sections, count)
        result = host.run(command, timeout_s, Path(tmp))
        text = log_file.read_text(errors="replace") if log_file.is_file() else ""
    kernels, messages = parse_raw_csv(text)
    report = ProfileReport(
        kernel=request.solution.name,
        workload=request.workload.uuid,
        axes=request.workload.axes,
        sections=list(sections),
        command=command,
        kernels=kernels,
        messages=messages,
    )
    if not kernels:
        report.error = _why_empty(result, messages, regex, timeout_s)
        report.output = result.output[-4000:]
    return report


def _why_empty(result: ProcessResult, messages: list[str], regex: str, timeout_s: float) -> str:
    if result.returncode is None:
        return f"ncu ran past {timeout_s:.0f} s and was killed"
    errors = [m for m in messages if m.startswith("==ERROR==")]
    if errors:
        return "; ".join(errors)
    if result.returncode != 0:
        tail = result.output.strip().splitlines()[-1:] or ["no output"]
        return f"the profiled program failed (exit status {result.returncode}): {tail[0]}"
    return (
        f"ncu profiled no kernel whose name matches regex:{regex} (if the entry point launches kernels with "
        "other names, pass --kernel-regex)"
    )
