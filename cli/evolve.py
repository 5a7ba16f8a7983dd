"""``evoteam evolve`` and ``evoteam resume``: run (or continue) a team of agents on a kernel, round by round.

Exit codes: 0 the run finished (rounds, budget, target, cancel), 2 bad input, the run cannot start, or it stopped
on a model error no retry can fix (a refused key, a model that does not exist): one error line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "evolve", help="evolve a kernel with a team of agents", description="Evolve a kernel with a team of agents."
    )
    p.add_argument("kernel", help="a kernel name from evoteam.toml, or the path of a kernel file that is a task")
    p.add_argument("--rounds", type=int, default=3, help="rounds at most (default 3)")
    p.add_argument("--budget", type=int, default=200_000, help="hard token budget of the whole run (default 200000)")
    p.add_argument("--team", choices=["single", "fixed", "evolving"], default="evolving", help="team mode")
    p.add_argument(
        "--llm",
        choices=["auto", "anthropic", "openai", "claude-code", "offline"],
        default="auto",
        help="agent backend (auto: Claude when ANTHROPIC_API_KEY is set, else the offline team; openai: any "
        "OpenAI-compatible server, OPENAI_API_KEY and OPENAI_BASE_URL)",
    )
    p.add_argument("--model", help="model of the agents and the supervisor (default: the backend's)")
    p.add_argument("--runner", default="local", help="local | ssh://HOST | ray | ray://ADDRESS")
    p.add_argument("--target-speedup", type=float, help="stop when the best geomean speedup reaches this")
    p.add_argument("--evaluations", type=int, default=6, help="offline tuner: evaluations per agent and round")
    p.add_argument(
        "--evaluation-budget",
        type=int,
        help="the agents' evaluations of the whole run at most, shared out like tokens (default: no limit)",
    )
    p.add_argument("--prices", type=Path, help="a JSON or TOML price table (USD per million tokens) over ours")
    p.add_argument(
        "--max-tokens", type=int, default=4096, help="the longest reply of a model-backed agent (default 4096)"
    )
    p.add_argument("--max-turns", type=int, help="model turns per agent and round at most (default: the backend's, 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--detach", action="store_true", help="start the run in the background and print its id")
    add_unsafe_flag(p)
    p.set_defaults(run=run_evolve)
    r: argparse.ArgumentParser = sub.add_parser("resume", help="continue a run that was stopped or killed")
    r.add_argument("run_id", metavar="RUN")
    r.set_defaults(run=run_resume)


def add_unsafe_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run agent-generated code even where no sandbox (bubblewrap) is possible: it can then read your "
        "files and use the network",
    )


def sandbox_problem(unsafe_no_sandbox: bool) -> str | None:
    """Why agents cannot run here (no sandbox and no ``--unsafe-no-sandbox``), or None; warns when unsafe."""
    from evoteam.gpu_bench.api import SandboxUnavailable, agent_sandbox

    try:
        chosen = agent_sandbox(unsafe_no_sandbox)
    except SandboxUnavailable as exc:
        return str(exc)
    if not chosen.isolated:
        print("evoteam: warning: agent-generated code runs WITHOUT a sandbox (--unsafe-no-sandbox)", file=sys.stderr)
    return None


def _fail(message: str) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return 2


def run_evolve(args: argparse.Namespace) -> int:
    from evoteam.roles.backends.choose import choose_backend
    from evoteam.roles.budget import PricesError, load_prices
    from evoteam.roles.offline.knobs import nothing_to_tune
    from evoteam.supervisor.config import RunConfig, new_run_id

    if args.rounds < 1 or args.budget < 0:
        return _fail("--rounds must be at least 1 and --budget not negative")
    if args.evaluation_budget is not None and args.evaluation_budget < 1:
        return _fail("--evaluation-budget must be at least 1")
    if args.max_turns is not None and args.max_turns < 1:
        return _fail("--max-turns must be at least 1")
    if args.max_tokens < 1:
        return _fail("--max-tokens must be at least 1")
    try:
        prices = load_prices(args.prices) if args.prices is not None else {}
    except PricesError as exc:
        return _fail(str(exc))
    problem = sandbox_problem(args.unsafe_no_sandbox)
    if problem is not None:
        return _fail(problem)
    found = select_task(args.kernel, args.runner)
    if isinstance(found, str):
        return _fail(found)
    config_path, task = found
    if choose_backend(args.llm, os.environ) == "offline":
        idle = nothing_to_tune(task)
        if idle is not None:
            return _fail(idle)
    config = RunConfig(
        run=new_run_id(task.name),
        kernel=task.name,
        config=str(config_path),
        mode=args.team,
        rounds=args.rounds,
        budget=args.budget,
        llm=args.llm,
        runner=args.runner,
        model=args.model or task.model,
        target_speedup=args.target_speedup,
        evaluations_per_agent=args.evaluations,
        evaluation_budget=args.evaluation_budget,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        prices=prices,
        seed=args.seed,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    return start(config, task, args.detach)


def select_task(kernel: str, runner: str) -> tuple[Path, Any] | str:
    """The evoteam.toml and task named by ``kernel`` (a name or a kernel file), or the error to print."""
    from evoteam.gpu_bench.api import TaskError, find_config, load_tasks
    from evoteam.supervisor.setup import SetupError, check_runnable

    target = Path(kernel)
    config_path = find_config((target.parent if target.is_file() else Path.cwd()).resolve())
    if config_path is None:
        return f"no evoteam.toml in {Path.cwd()} or above; `evoteam import` or write one"
    try:
        tasks = load_tasks(config_path)
    except TaskError as exc:
        return str(exc)
    if target.is_file():
        matches = [t for t in tasks if t.source.resolve() == target.resolve()]
        if not matches:
            return f"{target} is not the source of any kernel in {config_path}"
        task = matches[0]
    else:
        named = [t for t in tasks if t.name == kernel]
        if not named:
            return f"no kernel named {kernel!r} in {config_path}; kernels: {', '.join(t.name for t in tasks)}"
        task = named[0]
    try:
        check_runnable(task, runner)
    except SetupError as exc:
        return str(exc)
    return config_path, task


def start(config: Any, task: Any, detach: bool) -> int:
    from evoteam.supervisor.config import run_dir, state_dir
    from evoteam.supervisor.git_store import GitStore, GitStoreError
    from evoteam.supervisor.lock import KernelLock, RunLocked
    from evoteam.supervisor.loop import start_run

    try:
        root = GitStore(task.source, config.run).root
        with KernelLock(state_dir(root), task.name, config.run):  # refuse early, before anything is written
            pass
        start_run(root, task, config)
    except (GitStoreError, RunLocked) as exc:
        return _fail(str(exc))
    if detach:
        log = run_dir(root, config.run) / "run.log"
        with log.open("ab") as out:
            subprocess.Popen(
                [sys.executable, "-m", "evoteam.cli.main", "resume", config.run],
                cwd=root,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        print(config.run)
        return 0
    return _resume(root, config.run)


def run_resume(args: argparse.Namespace) -> int:
    from evoteam.supervisor.git_store import GitStore, GitStoreError

    try:
        root = GitStore(Path.cwd(), "x").root
    except GitStoreError as exc:
        return _fail(str(exc))
    return _resume(root, args.run_id)


def _resume(root: Path, run: str) -> int:
    from evoteam.cli.runs_view import Progress
    from evoteam.gpu_bench.api import TaskError
    from evoteam.roles.backends.choose import BackendError
    from evoteam.supervisor.config import journal_path
    from evoteam.supervisor.journal import Journal, JournalError
    from evoteam.supervisor.lock import RunLocked
    from evoteam.supervisor.loop import Supervisor
    from evoteam.supervisor.setup import SetupError, load_task, make_services
    from evoteam.supervisor.state import fold

    try:
        state = fold(Journal(journal_path(root, run)).events())
    except JournalError as exc:
        return _fail(str(exc))
    if state.config is None:
        return _fail(f"no run {run!r} in {root / '.evoteam' / 'runs'} (`evoteam runs` lists them)")
    problem = sandbox_problem(state.config.unsafe_no_sandbox)
    if problem is not None:
        return _fail(problem)
    try:
        task = load_task(state.config, root)
        services, runner = make_services(task, state.config, os.environ)
    except (SetupError, TaskError, BackendError) as exc:
        return _fail(str(exc))
    progress = Progress(state.config)
    services.reporter = progress
    try:
        with progress:
            final = Supervisor(root, run, services).run()
    except (RunLocked, JournalError) as exc:
        return _fail(str(exc))
    finally:
        runner.close()
    progress.done(final)
    if final.finished == "error":  # a model error no retry can fix: the run stopped at once
        return _fail(f"run {run} stopped: {final.finished_error}")
    return 0
