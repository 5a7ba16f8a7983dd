"""``evoteam compare``: the single agent, the fixed four-role team and the evolving team on the same kernel,
each under the same token budget and rounds, one run after the other; prints one table.

Exit codes: 0 every run finished, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

MODES = ("single", "fixed", "evolving")


def add_parser(sub: Any) -> None:
    from evoteam.cli.evolve import add_unsafe_flag

    p: argparse.ArgumentParser = sub.add_parser(
        "compare", help="run the single, fixed and evolving teams under the same budget and compare them"
    )
    p.add_argument("kernel", help="a kernel name from evoteam.toml, or a kernel file")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=int, default=200_000, help="hard token budget of each run")
    p.add_argument("--llm", choices=["auto", "anthropic", "claude-code", "offline"], default="auto")
    p.add_argument("--model")
    p.add_argument("--runner", default="local")
    p.add_argument("--evaluations", type=int, default=6, help="offline tuner: evaluations per agent and round")
    p.add_argument("--seed", type=int, default=0)
    add_unsafe_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from evoteam.cli.evolve import sandbox_problem, select_task, start
    from evoteam.supervisor.config import RunConfig, journal_path, new_run_id
    from evoteam.supervisor.git_store import GitStore
    from evoteam.supervisor.journal import Journal
    from evoteam.supervisor.state import fold

    if args.rounds < 1 or args.budget < 0:
        print("evoteam: --rounds must be at least 1 and --budget not negative", file=sys.stderr)
        return 2
    found = sandbox_problem(args.unsafe_no_sandbox) or select_task(args.kernel, args.runner)
    if isinstance(found, str):
        print(f"evoteam: {found}", file=sys.stderr)
        return 2
    config_path, task = found
    rows = []
    for mode in MODES:
        config = RunConfig(
            run=new_run_id(f"{task.name}-{mode}"),
            kernel=task.name,
            config=str(config_path),
            mode=mode,
            rounds=args.rounds,
            budget=args.budget,
            llm=args.llm,
            runner=args.runner,
            model=args.model,
            evaluations_per_agent=args.evaluations,
            seed=args.seed,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
        )
        code = start(config, task, detach=False)
        if code != 0:
            return code
        root = GitStore(task.source, config.run).root
        state = fold(Journal(journal_path(root, config.run)).events())
        best = state.candidates.get(state.best) if state.best else None
        record = best.record if best else None
        rows.append((mode, state, record, config.run))
    table = Table(
        "team", "best geomean", "faster/total", "candidates", "tokens", "run", title=f"{task.name}: same budget"
    )
    for mode, state, record, run_id in rows:
        table.add_row(
            mode,
            f"{state.best_speedup:.3f}x" if state.best_speedup is not None else "none",
            f"{record.faster}/{record.total}" if record else "-",
            str(len(state.candidates)),
            f"{state.spent}/{args.budget}",
            run_id,
        )
    Console().print(table)
    return 0
