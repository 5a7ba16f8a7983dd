"""Figures of the hardening checks: each ``hardening``-marked test records rows for the table that
``scripts/hardening`` prints (``python tests/hardening.py REPORT`` prints it).

``python tests/hardening.py --markdown REPORT`` prints the rows as a Markdown table (for docs/reliability.md).
``record`` prints the row (visible with ``-s`` or in the failure report) and, when
``EVOTEAM_HARDENING_REPORT`` names a file, appends it there as one JSON line. A row is recorded whether the
check held or not, so the table shows a failing figure too; the test still asserts its own promise.

``needs_sandbox`` skips a test where bubblewrap cannot run, except where ``EVOTEAM_HARDENING_REQUIRED=1``
(CI and ``scripts/hardening``): there the test runs, and fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPORT_ENV = "EVOTEAM_HARDENING_REPORT"
REQUIRED_ENV = "EVOTEAM_HARDENING_REQUIRED"


def record(area: str, check: str, figure: str, ok: bool) -> None:
    """One row: ``area`` (sandbox, disk, faults, resume, git, secrets, lsp), what was checked, its figure, whether
    it held."""
    row = {"area": area, "check": check, "figure": figure, "ok": ok}
    print(f"hardening: {area} | {check} | {figure} | {'ok' if ok else 'FAILED'}")
    target = os.environ.get(REPORT_ENV)
    if target:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


def processes_mentioning(text: str, zombies: bool = True) -> list[int]:
    """Processes (but this one) whose command line mentions ``text``; ``zombies=False`` leaves out the dead
    ones not yet reaped."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and (zombies or state != "Z"):
            found.append(int(entry.name))
    return found


def needs_sandbox() -> pytest.MarkDecorator:
    from evoteam.gpu_bench import sandbox

    found = sandbox.probe()
    required = os.environ.get(REQUIRED_ENV) == "1"
    return pytest.mark.skipif(not found.isolated and not required, reason=f"needs the sandbox: {found.description}")


def print_table(report: Path) -> int:
    """The rows of ``report`` as one table; how many did not hold."""
    from rich.console import Console
    from rich.table import Table

    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()] if report.exists() else []
    table = Table("area", "check", "figure", "held", title="evoteam hardening", show_lines=True)
    for row in rows:
        table.add_row(row["area"], row["check"], row["figure"], "yes" if row["ok"] else "[red]NO[/red]")
    console = Console(width=max(140, Console().width))
    console.print(table)
    failed = sum(not row["ok"] for row in rows)
    console.print(f"{len(rows)} checks, {len(rows) - failed} held, {failed} did not")
    return failed


def markdown(report: Path) -> str:
    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    lines = ["| area | check | figure | held |", "| --- | --- | --- | --- |"]
    for row in rows:
        cells = [row["area"], row["check"], row["figure"], "yes" if row["ok"] else "**no**"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "--markdown":
        print(markdown(Path(sys.argv[2])))
        sys.exit(0)
    sys.exit(1 if print_table(Path(sys.argv[1])) else 0)
