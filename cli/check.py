"""``evoteam check FILE``: compile only, then print diagnostics, ptxas resources and constraint violations.

Exit codes: 0 it compiles and meets its constraints, 1 compile errors or violated constraints, 2 bad input.
No GPU needed; no torch imported, so the answer comes in the time nvcc takes plus little.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="compile a kernel file and report diagnostics and resources (no GPU needed)",
        description="Compile a .cu or .cpp file (as its evoteam.toml task when it is one) and report structured "
        "diagnostics, ptxas resources per kernel and constraint violations.",
    )
    p.add_argument("file", type=Path, help="a .cu or .cpp source file")
    p.add_argument("--arch", help="CUDA architecture to compile for (default: the task's target, else sm_90a)")
    p.add_argument("--flag", action="append", dest="flags", help="a compiler flag (repeat; replaces the defaults)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.api import Severity, TaskError, check_file

    try:
        result = check_file(args.file, arch=args.arch, flags=args.flags)
    except TaskError as exc:
        print(f"evoteam check: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evoteam check: interrupted", file=sys.stderr)
        return 130
    failed = not result.ok or bool(result.violations)
    if args.json:
        print(result.model_dump_json())
        return 1 if failed else 0
    from rich.console import Console

    from evoteam.cli.render import resources_table

    out = Console(highlight=False)
    for d in result.diagnostics:
        where = f"{d.file}:{d.line}" + (f":{d.column}" if d.column else "")
        code = f" [{d.code}]" if d.code else ""
        colour = {"error": "red", "warning": "yellow"}.get(d.severity.value, "cyan")
        out.print(f"{where}: [{colour}]{d.severity.value}[/{colour}]: {d.message}{code}", markup=True)
        for r in d.related:
            out.print(f"    {r.file}:{r.line}: {r.message}", markup=False)
    if not result.ok and not any(d.severity == Severity.ERROR for d in result.diagnostics):
        out.print(result.log.strip()[-3000:], markup=False)  # a failure the parser did not recognise
    if result.resources:
        out.print(resources_table(result.resources))
    for violation in result.violations:
        out.print(f"[red]constraint violated[/red]: {violation}")
    for note in result.notes:
        out.print(f"note: {note}", markup=False)
    errors = sum(1 for d in result.diagnostics if d.severity == Severity.ERROR)
    warnings = sum(1 for d in result.diagnostics if d.severity == Severity.WARNING)
    verdict = "[red]failed[/red]" if failed else "[green]ok[/green]"
    timing = "cached" if result.cached else f"{result.seconds:.2f} s"
    out.print(f"{verdict} · {errors} error(s) · {warnings} warning(s) · {result.arch or 'cpu'} · {timing}")
    return 1 if failed else 0
