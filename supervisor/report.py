"""``write_report``: a run's report folder (``report.html`` and its PNG plots beside it) from the run's journal.

The data comes from ``report_data``, the plots from ``report_plots``, the page from ``report_html``. A live
run, or one without a passing candidate, gets a report that says so.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.supervisor.events import Event
from evoteam.supervisor.report_data import report_data
from evoteam.supervisor.report_html import render
from evoteam.supervisor.report_plots import speedup_plot, timeline_plot, tokens_plot, workloads_plot

PAGE = "report.html"


def write_report(events: list[Event], out: Path) -> Path:
    """Writes the report of the run whose journal holds ``events`` into ``out``; returns the page's path."""
    state, data = report_data(events)
    out.mkdir(parents=True, exist_ok=True)
    written = {
        "speedup": speedup_plot(data.series, out / "speedup.png"),
        "workloads": workloads_plot(data.winner, out / "workloads.png"),
        "timeline": timeline_plot(data.timeline, out / "timeline.png"),
        "tokens": tokens_plot(data.tokens, out / "tokens.png"),
    }
    page = out / PAGE
    page.write_text(render(state, data, {key: path.name for key, path in written.items()}), encoding="utf-8")
    return page
