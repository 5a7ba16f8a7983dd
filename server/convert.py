"""The one place that turns evoteam's results into what the editor shows: labels, ranges, run summaries."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from evoteam.server.messages import RunSummary
from evoteam.server.run_index import RunEntry
from evoteam.supervisor.records import CandidateRecord


def result_label(record: CandidateRecord) -> str:
    """``1.34x geomean · 36/47 faster · round 5 · Optimizer`` (the status instead of the speedup if it failed)."""
    head = (
        f"{record.geomean_speedup:.2f}x geomean"
        if record.geomean_speedup is not None
        else record.status.value + (" (vetoed)" if record.vetoed else "")
    )
    return f"{head} · {record.faster}/{record.total} faster · round {record.round} · {record.role}"


def over_start(record: CandidateRecord) -> str:
    """``1.23x [1.19, 1.27] over the start``: the geomean speedup and its 95% interval (the last measurement:
    the re-timing for a best)."""
    speed = f"{record.geomean_speedup or 0.0:.2f}x"
    if record.geomean_ci is not None:
        speed += f" [{record.geomean_ci[0]:.2f}, {record.geomean_ci[1]:.2f}]"
    return f"{speed} over the start"


NO_IMPROVEMENT = "no improvement over the start"
"""What the editor says of a kernel whose finished runs have no best (none significantly faster)."""


def run_summary(entry: RunEntry) -> RunSummary:
    """The ``evoteam/runUpdated`` params and the ``evoteam.runs`` items."""
    state, config = entry.state, entry.state.config
    assert config is not None
    team = state.team
    return RunSummary(
        run=entry.run,
        kernel=config.kernel,
        mode=config.mode,
        llm=config.llm,
        live=entry.live,
        finished=state.finished,
        error=state.finished_error,
        round=max(state.rounds_started, default=0),
        rounds=config.rounds,
        rounds_finished=len(state.rounds_finished),
        team=list(team.roles) if team else [],
        protocol=team.protocol if team else None,
        best=state.best,
        best_speedup=state.best_speedup,
        tokens=state.spent,
        budget=config.budget,
        candidates=len(state.candidates),
    )


def whole_document(text: str) -> lsp.Range:
    """The range that covers all of ``text`` (for a WorkspaceEdit that replaces a file)."""
    lines = text.split("\n")
    return lsp.Range(lsp.Position(0, 0), lsp.Position(len(lines) - 1, len(lines[-1])))


def entry_line(text: str, entry: str) -> int:
    """The 0-based line that defines ``entry`` (``extern "C" int entry(``, ``def entry(``, ``__global__ ...
    entry(``); the first line when it is not found."""
    pattern = re.compile(rf"^(?!\s*(//|#(?!\s*define)|\*)).*\b{re.escape(entry)}\s*\(")
    for number, line in enumerate(text.splitlines()):
        if pattern.match(line):
            return number
    return 0
