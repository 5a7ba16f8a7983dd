"""``evoteam import flashinfer``: FlashInfer Trace definitions as evoteam tasks (with synthesized inputs).

Exit codes: 0 every selected definition was imported, 1 some were skipped (each with its reason),
2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "flashinfer",
        help="import FlashInfer Trace definitions and workloads as evoteam tasks",
        description="Write an evoteam task (definition, workloads, starting kernel, [[kernel]] entry) for each "
        "selected definition of a FlashInfer Trace dataset. Inputs whose safetensors blobs are missing, and "
        "the workloads of definitions that have none, are synthesized and marked 'synthetic-' in their uuid.",
    )
    p.add_argument(
        "dataset",
        type=Path,
        nargs="?",
        metavar="DATASET_DIR",
        help="folder with definitions/ (and workloads/); default $FIB_DATASET_PATH, else flashinfer-bench's default",
    )
    p.add_argument(
        "--definition",
        action="append",
        default=[],
        metavar="NAME",
        help="a definition name or shell pattern (repeatable; default: all, or the --solution's)",
    )
    p.add_argument("--out", type=Path, default=Path(), help="task folder holding evoteam.toml (default: .)")
    p.add_argument("--max-workloads", type=int, metavar="N", help="at most N workloads per definition")
    p.add_argument(
        "--max-mb",
        type=float,
        metavar="MB",
        help="leave out workloads whose tensors exceed MB MiB in all (e.g. 16 for references that run on a CPU "
        "in seconds; inf: no cap); a definition left with none gets small generated ones (default: 1/16 of the "
        "memory the task runs in: the GPU's for a CUDA target, else this machine's RAM)",
    )
    p.add_argument("--generate", type=int, default=3, metavar="N", help="workloads generated where none fit (3)")
    p.add_argument("--solution", type=Path, metavar="FILE", help="a FlashInfer-Bench Solution JSON as starting kernel")
    p.add_argument("--target", help="cpu (default for references) or a CUDA architecture such as sm_90a")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from evoteam.gpu_bench.api import (
        FlashInferImportError,
        TaskError,
        dataset_path,
        import_flashinfer,
        load_solution,
    )
    from evoteam.gpu_bench.api import FlashInferImportOptions as ImportOptions

    try:
        solution = load_solution(args.solution) if args.solution else None
        options = ImportOptions(
            definitions=args.definition,
            max_workloads=args.max_workloads,
            max_mb=args.max_mb,
            generate=args.generate,
            target=args.target,
            solution=solution,
        )
        report = import_flashinfer(dataset_path(args.dataset), args.out, options)
    except ValidationError as exc:
        err = exc.errors()[0]
        print(
            f"evoteam import flashinfer: error: --{str(err['loc'][0]).replace('_', '-')}: {err['msg']}", file=sys.stderr
        )
        return 2
    except (TaskError, FlashInferImportError) as exc:
        print(f"evoteam import flashinfer: error: {exc}", file=sys.stderr)
        return 2
    if report.cap is not None:
        print(f"size cap: {report.cap.mb:g} MiB of tensors per workload ({report.cap.why})")
    for kernel in report.imported:
        where = "generated" if kernel.dataset_workloads == 0 else "from the dataset"
        count, synthetic = kernel.workload_count, kernel.synthetic_workloads
        print(f"imported {kernel.name}: {count} workloads {where}, {synthetic} synthetic")
        for note in kernel.dropped:
            print(f"  left out: {note}")
    for skipped in report.skipped:
        print(f"skipped {skipped.name}: {skipped.reason}", file=sys.stderr)
    if report.imported:
        print(f"wrote {len(report.imported)} kernels to {report.config}")
    return 1 if report.skipped else 0
