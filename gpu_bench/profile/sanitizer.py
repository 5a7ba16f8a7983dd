"""compute-sanitizer on one built CUDA kernel and one workload: memcheck (out-of-bounds and misaligned accesses),
racecheck (shared-memory races), synccheck (barrier misuse) or initcheck (reads of uninitialized global memory).

It runs the same program as the ncu profile (``python -m evoteam.gpu_bench.profile.target REQUEST``), through
a ``SanitizerHost`` (``LocalSanitizerHost`` here: sandboxed, holding the GPU lock; ``FakeSanitizerHost`` for
tests), and reads the tool's ``=========`` report into typed findings. Imports no torch.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from evoteam.gpu_bench.profile.ncu import CUDA_ROOTS, LocalHost, ProcessResult, ProfileRequest, ProfileUnavailable

SanitizerTool = Literal["memcheck", "racecheck", "synccheck", "initcheck"]
SANITIZER_ENV = "EVOTEAM_COMPUTE_SANITIZER"
"""Names the compute-sanitizer executable explicitly (then PATH and the CUDA folders are not searched)."""
MAX_FINDINGS = 20
_PREFIX = "========= "
_SUMMARY = re.compile(r"^=+\s*(?:ERROR|RACECHECK) SUMMARY:\s*(\d+) (?:error|hazard)", re.IGNORECASE)
_AT = re.compile(r"^\s*at (?P<where>.+?)(?: in (?P<file>[^:\s]+):(?P<line>\d+))?$")


class Finding(BaseModel):
    """One error the sanitizer reported: its first line, where (function, file, line when known), the rest."""

    message: str
    where: str = ""
    file: str = ""
    line: int = 0
    details: list[str] = Field(default_factory=list)


class SanitizerReport(BaseModel):
    tool: SanitizerTool
    kernel: str
    workload: str
    axes: dict[str, int]
    command: list[str]
    errors: int | None = None
    """The tool's own count (its SUMMARY line); None when it printed none (it did not finish)."""
    findings: list[Finding] = Field(default_factory=list)
    """The first ``MAX_FINDINGS`` errors."""
    error: str | None = None
    """Why the check did not run to its end (a crash before the summary, a time-out)."""
    output: str = ""


class SanitizerHost(Protocol):
    def find_sanitizer(self) -> Path | None: ...

    def gpu_problem(self) -> str | None: ...

    def run(self, command: list[str], timeout_s: float, workdir: Path | None = None) -> ProcessResult: ...


def find_sanitizer(path: str | None = None) -> Path | None:
    """compute-sanitizer on ``path`` (default ``$PATH``), else in ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``."""
    found = shutil.which("compute-sanitizer", path=path)
    if found:
        return Path(found)
    roots = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    for root in [*roots, *CUDA_ROOTS]:
        candidate = root / "bin" / "compute-sanitizer"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class LocalSanitizerHost(LocalHost):
    """This machine: compute-sanitizer from ``$EVOTEAM_COMPUTE_SANITIZER``, ``$PATH`` or the CUDA folders; runs
    as ncu does (sandboxed, holding the GPU's timing lock)."""

    def find_sanitizer(self) -> Path | None:
        explicit = os.environ.get(SANITIZER_ENV)
        if explicit:
            return Path(explicit) if os.access(explicit, os.X_OK) else None
        return find_sanitizer()


@dataclass
class FakeSanitizerHost:
    """Answers every run with ``output`` and ``returncode``; keeps the commands."""

    sanitizer: Path | None = Path("/opt/cuda/bin/compute-sanitizer")
    problem: str | None = None
    output: str = ""
    returncode: int | None = 0
    commands: list[list[str]] = field(default_factory=list)

    def find_sanitizer(self) -> Path | None:
        return self.sanitizer

    def gpu_problem(self) -> str | None:
        return self.problem

    def run(self, command: list[str], timeout_s: float, workdir: Path | None = None) -> ProcessResult:
        self.commands.append(command)
        return ProcessResult(self.returncode, self.output)


def require_sanitizer(host: SanitizerHost) -> Path:
    tool = host.find_sanitizer()
    if tool is None:
        raise ProfileUnavailable(
            "compute-sanitizer was not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin "
            f"(or set {SANITIZER_ENV})"
        )
    problem = host.gpu_problem()
    if problem is not None:
        raise ProfileUnavailable(f"compute-sanitizer needs a CUDA GPU: {problem}")
    return tool


def sanitize_workload(
    host: SanitizerHost,
    request: ProfileRequest,
    tool: SanitizerTool = "memcheck",
    timeout_s: float = 600.0,
    python: str = sys.executable,
) -> SanitizerReport:
    """Runs ``tool`` over the request's kernel on its workload; the report holds the findings."""
    sanitizer = require_sanitizer(host)
    with tempfile.TemporaryDirectory(prefix="evoteam-sanitize-") as tmp:
        request_path = Path(tmp) / "request.json"
        request_path.write_text(request.model_dump_json())
        command = [str(sanitizer), "--tool", tool, "--print-limit", str(MAX_FINDINGS), "--error-exitcode", "99"]
        command += ["--target-processes", "all", python, "-m", "evoteam.gpu_bench.profile.target", str(request_path)]
        result = host.run(command, timeout_s, Path(tmp))
    errors, findings = parse_report(result.output)
    report = SanitizerReport(
        tool=tool,
        kernel=request.solution.name,
        workload=request.workload.uuid,
        axes=request.workload.axes,
        command=command,
        errors=errors,
        findings=findings,
    )
    if result.returncode is None:
        report.error = f"compute-sanitizer ran past {timeout_s:.0f} s and was killed"
    elif errors is None:
        report.error = f"compute-sanitizer printed no summary (exit status {result.returncode})"
    if report.error is not None:
        report.output = result.output[-4000:]
    return report


def parse_report(text: str) -> tuple[int | None, list[Finding]]:
    """(the SUMMARY count or None, the findings): a finding starts at a ``=========`` line that is not
    indented further, its indented lines follow (the first ``at ...`` line gives where it happened)."""
    count: int | None = None
    findings: list[Finding] = []
    current: Finding | None = None
    for raw in text.splitlines():
        summary = _SUMMARY.match(raw)
        if summary is not None:
            count = int(summary.group(1))
            current = None
            continue
        if not raw.startswith(_PREFIX):
            continue
        body = raw[len(_PREFIX) :]
        if not body.strip() or body.startswith(("COMPUTE-SANITIZER", "Program hit", "Saved host backtrace")):
            current = None if not body.strip() else current
            continue
        if not body.startswith(" "):
            current = Finding(message=body.strip())
            findings.append(current)
            continue
        if current is None:
            continue
        at = _AT.match(body)
        if at is not None and not current.where:
            current.where = at.group("where").strip()
            current.file = at.group("file") or ""
            current.line = int(at.group("line") or 0)
        elif len(current.details) < 6:
            current.details.append(body.strip())
    return count, findings[:MAX_FINDINGS]


def render(report: SanitizerReport) -> str:
    """A few lines for a person or an agent."""
    head = f"compute-sanitizer --tool {report.tool} on {report.workload} {report.axes}: "
    if report.error is not None:
        return head + f"did not finish: {report.error}\n{report.output[-1500:]}".rstrip()
    lines = [head + (f"{report.errors} error(s)" if report.errors else "no errors")]
    for finding in report.findings:
        where = f" at {report_place(finding)}" if finding.where else ""
        lines.append(f"- {finding.message}{where}")
        lines += [f"    {d}" for d in finding.details[:3]]
    return "\n".join(lines)


def report_place(finding: Finding) -> str:
    return f"{finding.where} ({finding.file}:{finding.line})" if finding.file else finding.where
