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
    from evoteam.cli.runs import read_run
    from evoteam.supervisor.config import journal_path, run_dir
    from evoteam.supervisor.journal import Journal
    from evoteam.supervisor.report import write_report

    found = read_run(args.run_id)
    if isinstance(found, str):
        return _fail(found)
    root, _ = found
    folder = run_dir(root, args.run_id)
    out = args.out if args.out is not None else folder / "report"
    try:
        page = write_report(Journal(journal_path(root, args.run_id)).events(), out.resolve())
    except OSError as exc:
        return _fail(f"cannot write the report into {out}: {exc.strerror or exc}")
    print(page)
    return 0
