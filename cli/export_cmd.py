"""``evoteam export RUN --flashinfer DIR``: a run's winner as a FlashInfer-Bench solution with its traces.

The traces are measured now, on this machine (the run's runner): the winner is evaluated once more on every
workload of its task, so the exported traces are complete FlashInfer-Bench traces, environment included.

Exit codes: 0 written, 1 the run has no candidate to export or the solution cannot be expressed in
FlashInfer-Bench's format, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="write a run's winner (or a candidate) as a FlashInfer-Bench solution with its traces",
        description="Evaluate a run's winner once more and write it, with its traces, in FlashInfer-Bench's layout "
        "(definitions/, solutions/, workloads/, traces/ and the blobs the workloads read).",
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--flashinfer", type=Path, required=True, metavar="DIR", help="dataset folder to write into")
    p.add_argument("--candidate", help="a candidate id (default: the run's best)")
    p.set_defaults(run=run_export)


def _fail(message: str, code: int = 2) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return code


def run_export(args: argparse.Namespace) -> int:
    from evoteam.cli.runs import read_run
    from evoteam.gpu_bench.api import (
        BenchInputError,
        Evaluator,
        ExportError,
        Solution,
        TaskError,
        export_flashinfer,
        make_runner,
        to_flashinfer_solution,
    )
    from evoteam.roles.tools.evaluation import TaskEvaluations
    from evoteam.supervisor.setup import SetupError, load_task

    found = read_run(args.run_id)
    if isinstance(found, str):
        return _fail(found)
    root, state = found
    assert state.config is not None  # read_run returns only runs that started
    chosen = args.candidate or state.best
    if chosen is None:
        return _fail(f"run {args.run_id} has no passing candidate to export (give one with --candidate)", 1)
    if chosen not in state.candidates:
        return _fail(f"run {args.run_id} has no candidate {chosen!r} (`evoteam show {args.run_id}` lists them)")
    solution = Solution.model_validate(state.candidates[chosen].solution)
    try:
        task = load_task(state.config, root)
        definition = task.load_definition()
        to_flashinfer_solution(solution, definition)  # refuse before spending time on an evaluation
    except (SetupError, TaskError) as exc:
        return _fail(str(exc))
    except ExportError as exc:
        return _fail(str(exc), 1)
    print(f"evaluating {chosen} on {task.name}'s workloads for its traces...", file=sys.stderr)
    runner = make_runner(state.config.runner, gpu=None if task.target == "cpu" else 0)
    try:
        result = TaskEvaluations(Evaluator(runner), task).evaluate(solution)
        written = export_flashinfer(solution, definition, result.traces, args.flashinfer, task.blob_root())
    except BenchInputError as exc:
        return _fail(str(exc))
    except ExportError as exc:
        return _fail(str(exc), 1)
    finally:
        runner.close()
    print(
        f"{chosen}: {result.status.value}, {result.summary.faster}/{result.summary.total} workloads faster; "
        f"wrote {len(written)} files under {args.flashinfer}"
    )
    return 0
