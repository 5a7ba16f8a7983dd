"""``evoteam runs``, ``show RUN``, ``cancel RUN`` and ``accept RUN``: look at runs and take their winner.

Exit codes: 0 done, 1 accept refused (uncommitted changes, no winner), 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evoteam.supervisor.state import RunState


def add_parser(sub: Any) -> None:
    runs: argparse.ArgumentParser = sub.add_parser("runs", help="list the runs of this repository")
    runs.set_defaults(run=run_runs)
    show: argparse.ArgumentParser = sub.add_parser("show", help="rounds, candidates and decisions of a run")
    show.add_argument("run_id", metavar="RUN")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(run=run_show)
    cancel: argparse.ArgumentParser = sub.add_parser("cancel", help="ask a run to stop (it stops between steps)")
    cancel.add_argument("run_id", metavar="RUN")
    cancel.set_defaults(run=run_cancel)
    accept: argparse.ArgumentParser = sub.add_parser("accept", help="write a run's winning kernel into your files")
    accept.add_argument("run_id", metavar="RUN")
    accept.add_argument("--candidate", help="a candidate id (default: the run's best)")
    accept.add_argument("--force", action="store_true", help="overwrite uncommitted changes of the kernel files")
    accept.set_defaults(run=run_accept)


def _fail(message: str, code: int = 2) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return code


def _root() -> Path | None:
    from evoteam.supervisor.git_store import GitStore, GitStoreError

    try:
        return GitStore(Path.cwd(), "x").root
    except GitStoreError:
        return None


def read_run(run: str) -> tuple[Path, RunState] | str:
    """The repository root and the run's state, or the one line to print instead: not in a repository, no such
    run, or a journal this evoteam cannot read (another format version, not a journal)."""
    from evoteam.supervisor.config import journal_path
    from evoteam.supervisor.journal import Journal, JournalError
    from evoteam.supervisor.state import fold

    root = _root()
    if root is None:
        return f"{Path.cwd()} is not inside a git repository"
    try:
        state = fold(Journal(journal_path(root, run)).events())
    except JournalError as exc:
        return str(exc)
    if state.config is None:
        return f"no run {run!r} here (`evoteam runs` lists them)"
    return root, state


def run_runs(args: argparse.Namespace) -> int:
    from evoteam.supervisor.journal import Journal, JournalError
    from evoteam.supervisor.state import fold

    root = _root()
    if root is None:
        return _fail(f"{Path.cwd()} is not inside a git repository")
    folder = root / ".evoteam" / "runs"
    for path in sorted(folder.glob("*/journal.jsonl")) if folder.is_dir() else []:
        try:
            state = fold(Journal(path).events())
        except JournalError as exc:
            print(f"evoteam: {exc}", file=sys.stderr)  # one unreadable run does not hide the others
            continue
        if state.config is None:
            continue
        best = f"{state.best_speedup:.3f}x" if state.best_speedup is not None else "-"
        print(
            f"{state.config.run}\t{state.config.kernel}\t{state.config.mode}\t"
            f"{len(state.rounds_finished)}/{state.config.rounds} rounds\tbest {best}\t{state.finished or 'unfinished'}"
        )
    return 0


def run_show(args: argparse.Namespace) -> int:
    from rich.console import Console

    from evoteam.cli.runs_view import show

    found = read_run(args.run_id)
    if isinstance(found, str):
        return _fail(found)
    _, state = found
    if args.json:
        print(json.dumps(_as_json(state), indent=2))
    else:
        show(state, Console())
    return 0


def _as_json(state: Any) -> dict[str, Any]:
    return {
        "config": state.config.model_dump(mode="json"),
        "finished": state.finished,
        "finished_error": state.finished_error,
        "best": state.best,
        "best_speedup": state.best_speedup,
        "start": state.start.model_dump(mode="json") if state.start else None,
        "tokens": state.spent,
        "rounds": [r.model_dump(mode="json") for r in state.rounds_finished],
        "candidates": [
            {
                "id": c.id,
                "round": c.round,
                "role": c.role,
                "agent": c.agent,
                "rationale": c.rationale,
                "sha": c.sha,
                "record": c.record.model_dump(mode="json") if c.record else None,
                "speedup_vs_start": c.record.geomean_speedup if c.record else None,
                "ci_vs_start": list(c.record.geomean_ci) if c.record and c.record.geomean_ci else None,
            }
            for c in state.candidates.values()
        ],
        "decisions": [d.model_dump(mode="json", by_alias=True) for d in state.decisions],
    }


def run_cancel(args: argparse.Namespace) -> int:
    from evoteam.supervisor.config import run_dir

    found = read_run(args.run_id)
    if isinstance(found, str):
        return _fail(found)
    root, state = found
    if state.finished is not None:
        print(f"run {args.run_id} already finished ({state.finished})")
        return 0
    (run_dir(root, args.run_id) / "cancel").write_text("cancel requested\n")
    print(f"run {args.run_id}: cancel requested; it stops before its next step")
    return 0


def run_accept(args: argparse.Namespace) -> int:
    from evoteam.supervisor.git_store import GitStore
    from evoteam.supervisor.round_commit import significant
    from evoteam.supervisor.services import kernel_paths
    from evoteam.supervisor.setup import SetupError, load_task

    found = read_run(args.run_id)
    if isinstance(found, str):
        return _fail(found)
    root, state = found
    assert state.config is not None  # read_run returns only runs that started
    chosen = args.candidate or state.best
    if chosen is None:
        return _fail(
            f"run {args.run_id}: no candidate is significantly faster than the start (no improvement over the start); "
            "`evoteam show` lists them, `--candidate ID` accepts one anyway",
            1,
        )
    candidate = state.candidates.get(chosen)
    if candidate is None or candidate.sha is None:
        return _fail(
            f"run {args.run_id} has no committed candidate {chosen!r}; `evoteam show {args.run_id}` lists them"
        )
    if candidate.record is None or not significant(candidate.record, state.config.min_effect):
        claimed = candidate.record.speed() if candidate.record else "-"
        print(
            f"evoteam accept: warning: {chosen} is not significantly faster than the start "
            f"({claimed} over the start); accepting it because you named it",
            file=sys.stderr,
        )
    try:
        task = load_task(state.config, root)
    except (SetupError, ValueError) as exc:
        return _fail(str(exc))
    git = GitStore(root, args.run_id)
    paths = kernel_paths(git, task)
    dirty = [p for p in paths if _dirty(root, p)]
    if dirty and not args.force:
        return _fail(f"{', '.join(dirty)} has uncommitted changes; commit or stash them, or pass --force", 1)
    for path in paths:
        (root / path).write_bytes(git.read(candidate.sha, path))
    speed = (
        f" ({candidate.record.geomean_speedup:.3f}x)" if candidate.record and candidate.record.geomean_speedup else ""
    )
    print(f"accepted {chosen}{speed} into {', '.join(paths)}")
    return 0


def _dirty(root: Path, path: str) -> bool:
    done = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path], cwd=root, capture_output=True)
    return done.returncode != 0
