"""Figures of the hardening checks: each ``hardening``-marked test records one row for the table that
``scripts/hardening`` prints.

``record`` prints the row (visible with ``-s`` or in the failure report) and, when
``EVOTEAM_HARDENING_REPORT`` names a file, appends it there as one JSON line. A row is recorded whether the
check passed or not, so the table shows a failing figure too; the test still asserts its own promise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPORT_ENV = "EVOTEAM_HARDENING_REPORT"


def record(area: str, check: str, figure: str, ok: bool) -> None:
    """One row: ``area`` (sandbox, faults, resume, git, secrets, lsp), what was checked, its figure, whether
    it held."""
    row = {"area": area, "check": check, "figure": figure, "ok": ok}
    print(f"hardening: {area} | {check} | {figure} | {'ok' if ok else 'FAILED'}")
    target = os.environ.get(REPORT_ENV)
    if target:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
