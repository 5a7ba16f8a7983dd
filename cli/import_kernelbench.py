"""``evoteam import kernelbench``: turns a KernelBench problem file into an evoteam task (see docs/real-tasks.md).

Exit codes: 0 imported, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(kinds: Any) -> None:
    p: argparse.ArgumentParser = kinds.add_parser(
        "kernelbench",
        help="import a KernelBench problem (class Model, get_inputs, get_init_inputs) as a task",
        description="Turn a KernelBench problem file into a task: a definition whose reference is the problem's "
        "Model with seeded weights, one workload, a ModelNew adapter and an evoteam.toml entry.",
    )
    p.add_argument("problem", type=Path, help="the KernelBench problem file (.py)")
    p.add_argument("--out", type=Path, default=Path(), help="task folder holding evoteam.toml (default: here)")
    p.add_argument("--name", help="task and definition name (default: from the file name)")
    p.add_argument(
        "--size-override",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="set a module-level constant (batch_size=8, input_shape=(64,), layer_sizes=[32,16]) before "
        "get_inputs() and get_init_inputs() run",
    )
    p.add_argument(
        "--scale",
        type=float,
        help="multiply every integer constant (at least 8, also inside a tuple or list) that sizes an input or "
        "output by F (a multiple of 8 stays one); a size it cannot reach is noted; --size-override values win",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=42,
        help="torch.manual_seed before get_inputs(), get_init_inputs() and building the models (default 42)",
    )
    p.add_argument("--target", default="cpu", help="cpu (default) or the CUDA architecture of the task")
    p.add_argument(
        "--inputs",
        choices=["trial", "auto", "random", "recorded"],
        default="trial",
        help="trial (default): every tensor is get_inputs()'s under each trial's own seed, as KernelBench draws "
        "them; auto: the evaluator draws afresh each trial (standard normal) the float tensors that get_inputs() "
        "draws like torch.randn, the others are get_inputs()'s values, stored in a safetensors blob; random: every "
        "float tensor is drawn afresh; recorded: every tensor is get_inputs()'s",
    )
    p.add_argument(
        "--max-mb",
        type=float,
        metavar="MB",
        help="refuse a problem whose tensors exceed MB MiB at the chosen sizes, naming a --scale that fits "
        "(default: 1/16 of the memory the task runs in: the GPU's for a CUDA target, else this machine's RAM; "
        "inf: no cap)",
    )
    p.add_argument(
        "--model-new", type=Path, help="a KernelBench ModelNew file to start from (default: the problem's Model)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.api import KernelBenchError, SourceError, import_problem, parse_override, write_task
    from evoteam.gpu_bench.api import KernelBenchImportOptions as ImportOptions

    try:
        if args.scale is not None and args.scale <= 0:
            raise KernelBenchError(f"--scale must be positive, not {args.scale}")
        if args.max_mb is not None and not args.max_mb > 0:
            raise KernelBenchError(f"--max-mb must be positive, not {args.max_mb}")
        overrides = dict(parse_override(text) for text in args.size_override)
        model_new = _read(args.model_new) if args.model_new else None
        options = ImportOptions(
            name=args.name,
            overrides=overrides,
            scale=args.scale,
            seed=args.seed,
            target=args.target,
            inputs=args.inputs,
            model_new=model_new,
            max_mb=args.max_mb,
        )
        problem = import_problem(args.problem, options)
        written = write_task(problem, args.out)
    except (KernelBenchError, SourceError) as exc:
        print(f"evoteam import kernelbench: error: {exc}", file=sys.stderr)
        return 2
    definition = problem.definition
    axes = definition.const_axes()
    shapes = ", ".join(
        f"{n} {definition.shape_of(s, axes) or 'scalar'}"
        for n, s in {**definition.inputs, **definition.outputs}.items()
    )
    print(f"imported {problem.origin} as {problem.name!r}: {shapes}")
    if problem.sizes:
        print("sizes changed: " + ", ".join(f"{n}={v}" for n, v in problem.sizes.items()))
    for note in problem.notes:
        print(f"note: {note}")
    for path in written:
        print(f"  wrote {path}")
    print(f"evaluate the candidate (kernels/{problem.name}/model_new.py) from {args.out}: evoteam bench {problem.name}")
    return 0


def _read(path: Path) -> str:
    from evoteam.gpu_bench.api import KernelBenchError

    try:
        return path.read_text()
    except OSError as exc:
        raise KernelBenchError(f"cannot read {path}: {exc.strerror}") from None
