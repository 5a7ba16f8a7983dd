"""``evoteam compare``: team modes (arms) on the same kernel or kernels as a controlled experiment. Each arm runs
once per seed, the arms interleaved, every run under the same budget (tokens with a model; the agents'
evaluations offline) and with its own knowledge store; at the end every run's result is timed again against
the start in one session. Prints the table (or ``--json``) and writes an HTML report with the cost-against-
speedup plot under ``.evoteam/compare/<experiment>/``.

Exit codes: 0 every run finished and was timed, 2 bad input or a run that could not run (one error line).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EVALUATIONS_PER_ROUND = 8
"""Offline, without ``--evaluation-budget``: this many agents' evaluations per round of each run."""


def add_parser(sub: Any) -> None:
    from evoteam.cli.evolve import add_unsafe_flag

    p: argparse.ArgumentParser = sub.add_parser(
        "compare",
        help="compare team modes on a kernel as an experiment: seeds, one budget, confidence intervals, cost",
        description="Compare team modes (arms) under the same budget: each arm runs once per seed, interleaved, "
        "each run with its own knowledge store; every run's result is then timed against the start in one "
        "session, and each arm gets its mean speedup with a 95%% interval, tokens, cost and wall time.",
    )
    p.add_argument("kernel", nargs="?", help="a kernel name from evoteam.toml, or a kernel file")
    p.add_argument(
        "--tasks",
        help="several kernels of evoteam.toml instead of one: comma-separated names or patterns (rmsnorm_*), "
        "or 'all'; reports each task and all of them together",
    )
    p.add_argument("--arms", default="single,fixed,evolving", help="team modes to compare (default: all three)")
    p.add_argument("--seeds", type=int, default=1, help="runs per arm (default 1; 3 or more for an interval)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=int, default=200_000, help="hard token budget of each run")
    p.add_argument(
        "--evaluation-budget",
        type=int,
        help=f"the agents' evaluations of each run (default offline: {EVALUATIONS_PER_ROUND} per round; "
        "with a model: no limit)",
    )
    p.add_argument(
        "--knowledge",
        choices=["empty", "snapshot"],
        default="empty",
        help="each run's own knowledge store starts empty, or as a copy of the kernel's store taken when the "
        "comparison starts (default empty)",
    )
    p.add_argument("--llm", choices=["auto", "anthropic", "openai", "claude-code", "offline"], default="auto")
    p.add_argument("--model")
    p.add_argument("--runner", default="local")
    p.add_argument("--max-turns", type=int, default=200, help="model turns per agent and round at most (default 200)")
    p.add_argument("--prices", type=Path, help="a JSON or TOML price table (USD per million tokens) over ours")
    p.add_argument(
        "--max-tokens", type=int, default=4096, help="the longest reply of a model-backed agent (default 4096)"
    )
    p.add_argument("--seed", type=int, default=0, help="the first run's seed")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON instead of the table")
    add_unsafe_flag(p)
    p.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from evoteam.cli.evolve import sandbox_problem
    from evoteam.roles.backends.choose import BackendError, choose_backend
    from evoteam.roles.budget import PricesError, load_prices
    from evoteam.supervisor.compare_plan import PlanError, Settings, experiment_id, parse_arms
    from evoteam.supervisor.compare_report import write_report
    from evoteam.supervisor.compare_run import ExperimentError, run_experiment
    from evoteam.supervisor.config import state_dir
    from evoteam.supervisor.git_store import GitStore, GitStoreError

    if args.rounds < 1 or args.budget < 0:
        return _fail("--rounds must be at least 1 and --budget not negative")
    if args.evaluation_budget is not None and args.evaluation_budget < 1:
        return _fail("--evaluation-budget must be at least 1")
    if args.max_turns < 1 or args.max_tokens < 1:
        return _fail("--max-turns and --max-tokens must be at least 1")
    if (args.kernel is None) == (args.tasks is None):
        return _fail("name one kernel, or several with --tasks (not both)")
    try:
        arms = parse_arms(args.arms)
        if args.seeds < 1:
            raise PlanError(f"--seeds must be at least 1, got {args.seeds}")
        backend = choose_backend(args.llm, os.environ)
        prices = load_prices(args.prices) if args.prices is not None else {}
    except (PlanError, BackendError, PricesError) as exc:
        return _fail(str(exc))
    problem = sandbox_problem(args.unsafe_no_sandbox)
    if problem is not None:
        return _fail(problem)
    found = _tasks(args.kernel, args.tasks, args.runner)
    if isinstance(found, str):
        return _fail(found)
    config_path, tasks = found
    if backend == "offline":
        from evoteam.roles.offline.knobs import nothing_to_tune

        idle = [why for why in (nothing_to_tune(t) for t in tasks) if why is not None]
        if idle:
            return _fail(idle[0])
    evaluations = args.evaluation_budget
    if evaluations is None and backend == "offline":
        evaluations = EVALUATIONS_PER_ROUND * args.rounds
    settings = Settings(
        rounds=args.rounds,
        budget=args.budget,
        evaluation_budget=evaluations,
        llm=args.llm,
        model=args.model,
        runner=args.runner,
        seed=args.seed,
        knowledge=args.knowledge,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        prices=prices,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    try:
        root = GitStore(tasks[0].source, "compare").root
    except GitStoreError as exc:
        return _fail(str(exc))
    experiment = experiment_id()
    sessions = _sessions(args.runner)
    try:
        comparison = run_experiment(
            root, experiment, config_path, tasks, arms, args.seeds, settings, _start, sessions, _announce
        )
    except ExperimentError as exc:
        return _fail(str(exc))
    out = state_dir(root) / "compare" / experiment
    comparison = comparison.model_copy(update={"report": str(out)})
    page = write_report(comparison, out)
    if args.json:
        print(comparison.model_dump_json(indent=2))
    else:
        _print(comparison, page)
    return 0


def _tasks(kernel: str | None, names: str | None, runner: str) -> tuple[Path, list[Any]] | str:
    """The evoteam.toml and the tasks to compare on, or the error to print."""
    from evoteam.cli.evolve import select_task
    from evoteam.gpu_bench.api import TaskError, find_config, load_tasks
    from evoteam.supervisor.setup import SetupError, check_runnable

    if kernel is not None:
        found = select_task(kernel, runner)
        return found if isinstance(found, str) else (found[0], [found[1]])
    config_path = find_config(Path.cwd().resolve())
    if config_path is None:
        return f"no evoteam.toml in {Path.cwd()} or above; `evoteam import` or write one"
    try:
        every = load_tasks(config_path)
    except TaskError as exc:
        return str(exc)
    patterns = [p.strip() for p in (names or "").split(",") if p.strip()]
    if not patterns:
        return "--tasks names no kernel; give names or patterns, comma-separated, or 'all'"
    chosen = []
    for pattern in patterns:
        matched = [t for t in every if pattern == "all" or fnmatch.fnmatchcase(t.name, pattern)]
        if not matched:
            known = ", ".join(t.name for t in every)
            return f"--tasks: no kernel matches {pattern!r} in {config_path}; kernels: {known}"
        chosen += [t for t in matched if t not in chosen]
    try:
        for task in chosen:
            check_runnable(task, runner)
    except SetupError as exc:
        return str(exc)
    return config_path, chosen


def _start(config: Any, task: Any) -> int:
    from evoteam.cli.evolve import start

    return start(config, task, detach=False)


def _sessions(where: str) -> Callable[[Any], contextlib.AbstractContextManager[Any]]:
    """Closing sessions on the comparison's runner: one evaluator (one warm worker) per task."""

    @contextlib.contextmanager
    def session(task: Any) -> Iterator[Any]:
        from evoteam.gpu_bench.api import EvalConfig, Evaluator, make_runner
        from evoteam.roles.tools.evaluation import TaskEvaluations

        runner = make_runner(where, gpu=None if task.target == "cpu" else 0)
        try:
            config = EvalConfig(**task.tolerance.model_dump())
            yield TaskEvaluations(Evaluator(runner), task, config)
        finally:
            runner.close()

    return session


def _announce(line: str) -> None:
    print(f"compare: {line}", file=sys.stderr, flush=True)


def _print(comparison: Any, page: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from evoteam.supervisor.compare_report import COLUMNS, control_line, row

    console = Console(width=None if sys.stdout.isatty() else 132)
    for task in comparison.tasks if len(comparison.tasks) > 1 else []:
        table = Table(*COLUMNS, title=f"{task.task}: same budget")
        for summary in task.arms:
            table.add_row(*row(summary))
        console.print(table)
    title = "all tasks" if len(comparison.tasks) > 1 else comparison.tasks[0].task
    table = Table(*COLUMNS, title=f"{title}: same budget, {comparison.settings['seeds']} seed(s) per arm")
    for summary in comparison.arms:
        table.add_row(*row(summary))
    console.print(table)
    for task in comparison.tasks:
        console.print(control_line(task), highlight=False)
    console.print(f"report: {page}", highlight=False)
