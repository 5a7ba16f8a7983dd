"""Terminal output of ``evoteam bench``: a progress bar while it runs, then a table per workload."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evoteam.gpu_bench.api import CandidateResult, Definition, EvaluationStatus, KernelResources, WorkloadRun


class Reporter:
    """Progress on stderr while a bench runs: a bar on a terminal; elsewhere (a log, a pipe, ``--json``) plain
    lines: each phase, each workload done once the bench has run a few seconds, and a heartbeat naming the
    workload in progress every ``heartbeat_s``, so a long workload never looks like a hang."""

    def __init__(self, enabled: bool, total: int, heartbeat_s: float = 15.0, quiet_s: float = 3.0) -> None:
        self._enabled = enabled
        self._err = Console(file=sys.stderr)
        self._out = Console()
        self._plain = enabled and not self._err.is_terminal
        self._total = total
        self._done = 0
        self._phase = "evaluating"
        self._started = time.monotonic()
        self._heartbeat_s = heartbeat_s
        self._quiet_s = quiet_s
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._err,
            transient=True,
            disable=not enabled or self._plain,
        )
        self._task = self._progress.add_task("evaluating", total=total)

    def __enter__(self) -> Reporter:
        self._progress.start()
        if self._plain:
            self._beat = threading.Thread(target=self._heartbeat, name="bench-heartbeat", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._progress.stop()

    def phase(self, text: str) -> None:
        self._phase = text
        self._progress.update(self._task, description=text)
        self._line(f"{text}")

    def advance(self, n: int, what: str = "") -> None:
        self._done += n
        self._progress.advance(self._task, n)
        if time.monotonic() - self._started > self._quiet_s:
            self._line(f"{self._phase}: {self._done}/{self._total} done{f' ({what})' if what else ''}")

    def workload_done(self, run: WorkloadRun) -> None:
        axes = " ".join(f"{k}={v}" for k, v in run.workload.axes.items()) or run.workload.uuid[:8]
        self.advance(1, f"{axes}: {run.outcome.status.value}")

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._heartbeat_s):
            self._line(f"{self._phase}: workload {self._done + 1}/{self._total} running")

    def _line(self, text: str) -> None:
        if self._plain:
            elapsed = time.monotonic() - self._started
            self._err.print(f"evoteam bench [{elapsed:6.1f} s] {text}", markup=False, highlight=False, soft_wrap=True)

    def show(self, result: CandidateResult, definition: Definition) -> None:
        table = Table(title=f"{result.solution} on {definition.name} vs {result.baseline}")
        columns = ("workload", "status", "latency ms (p20-p80)", "baseline ms", "speedup", "95% CI", "n", "flags")
        for column in columns:
            table.add_column(column, justify="right" if column in ("speedup", "95% CI", "n") else "left")
        for w in result.workloads:
            axes = " ".join(f"{k}={v}" for k, v in w.axes.items()) or w.uuid[:8]
            status = w.status.value if w.status == EvaluationStatus.PASSED else f"[red]{w.status.value}[/red]"
            t, b = w.timing, w.baseline_timing
            latency = f"{t.median_ms:.4f} ({t.p20_ms:.4f}-{t.p80_ms:.4f})" if t else "-"
            table.add_row(
                axes,
                status,
                latency,
                f"{b.median_ms:.4f}" if b else "-",
                f"{w.speedup:.2f}x" if w.speedup is not None else "-",
                f"{w.ci[0]:.2f}-{w.ci[1]:.2f}" if w.ci else "-",
                str(w.pairs if w.pairs is not None else t.n if t else "-"),
                ", ".join(w.flags),
            )
        self._out.print(table)
        for w in result.workloads:
            if w.status != EvaluationStatus.PASSED:
                self._out.print(f"[red]{w.status.value}[/red] {w.uuid}: {w.reason}", markup=True, highlight=False)
        s = result.summary
        env = result.traces[0].evaluation.environment if result.traces and result.traces[0].evaluation else None
        if env is not None:
            libs = " · ".join(f"{k} {v}" for k, v in env.libs.items())
            build = "build cached" if result.build.cached else f"built in {result.build.seconds:.2f} s"
            self._out.print(f"{env.hardware} · {libs} · {build}", markup=False, highlight=False)
        if result.resources:
            self._out.print(resources_table(result.resources))
        for violation in result.violations:
            self._out.print(f"[red]constraint violated[/red]: {violation}", highlight=False)
        if result.status == EvaluationStatus.COMPILE_ERROR:
            self._out.print(result.build.log.strip()[-3000:], markup=False, highlight=False)
        if s.geomean_speedup is not None and s.mean_speedup is not None:
            worst = f"worst {s.worst.speedup:.2f}x" if s.worst and s.worst.speedup is not None else ""
            ci = f" (95% CI {s.geomean_ci[0]:.3f}-{s.geomean_ci[1]:.3f})" if s.geomean_ci else ""
            self._out.print(
                f"[bold]{result.status.value}[/bold]  geomean {s.geomean_speedup:.3f}x{ci} · "
                f"mean {s.mean_speedup:.3f}x · {s.faster}/{s.total} faster · {worst}"
            )
        else:
            self._out.print(f"[bold red]{result.status.value}[/bold red]  {s.passed}/{s.total} workloads passed")
        if s.fast_p:
            self._out.print(
                "fast_p: " + " · ".join(f"{k} {v:.0%}" for k, v in s.fast_p.items()), markup=False, highlight=False
            )


def resources_table(resources: list[KernelResources]) -> Table:
    from evoteam.gpu_bench.api import demangle

    names = demangle([r.name for r in resources])
    table = Table(title="ptxas resources per kernel (bytes)")
    table.add_column("kernel", no_wrap=True)
    for column in ("arch", "regs", "spill st/ld", "smem", "stack", "cmem", "bar"):
        table.add_column(column, justify="left" if column == "arch" else "right")
    for r in resources:
        spills = f"{r.spill_stores}/{r.spill_loads}"
        table.add_row(
            _short(names.get(r.name, r.name)),
            r.arch,
            str(r.registers),
            f"[red]{spills}[/red]" if r.spill_stores or r.spill_loads else spills,
            str(r.shared_bytes),
            str(r.stack_bytes),
            str(r.constant_bytes),
            str(r.barriers),
        )
    return table


def _short(demangled: str) -> str:
    """``void rmsnorm_kernel<true>(const bf16*, ...)`` → ``rmsnorm_kernel<true>``."""
    name = demangled.split("(")[0]
    return name.removeprefix("void ")
