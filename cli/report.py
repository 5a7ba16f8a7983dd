"""``evoteam report RUN [--out DIR]``: write a run's HTML report with its PNG plots and print the page's path.

Exit codes: 0 written, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "report", help="write a run's HTML report with plots", description="Write a run's HTML report with plots."
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--out", type=Path, help="folder of the report (default: .evoteam/runs/RUN/report/)")
    p.set_defaults(run=run_report)


def _fail(message: str) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return 2


def run_report(args: argparse.Namespace) -> int:
    from evoteam.cli.runs import run_state
    from evoteam.supervisor.journal import Journal
    from evoteam.supervisor.report import write_report
    from evoteam.supervisor.state import run_dir

    root, state = run_state(args.run_id)
    if state is None:
        return _fail(f"no run {args.run_id!r} here (`evoteam runs` lists them)")
    folder = run_dir(root, args.run_id)
    out = args.out if args.out is not None else folder / "report"
    try:
        page = write_report(Journal(folder / "journal.jsonl").events(), out.resolve())
    except OSError as exc:
        return _fail(f"cannot write the report into {out}: {exc.strerror or exc}")
    print(page)
    return 0
