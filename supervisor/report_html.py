"""The report's one HTML page: summary, notes, the winner, the plots (PNG files beside the page) and the tables.

Every piece of text from the journal goes through ``html.escape``; the page has its style inline and loads
nothing. This module must not import matplotlib.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape

from evoteam.supervisor.decision import describe
from evoteam.supervisor.report_data import ReportData, Timeline, Winner
from evoteam.supervisor.state import RunState

PLOTS: tuple[tuple[str, str], ...] = (
    ("speedup", "Best geomean speedup over the start per round (and each round's best), with the start at 1x"),
    ("workloads", "Per-workload speedups of the winner, sorted (log scale; failed workloads marked)"),
    ("timeline", "Team timeline: where each role played, and the supervisor's decisions between rounds"),
    ("tokens", "Tokens per role, stacked by round"),
)
"""The plot keys (``report.py`` names the files) and their captions."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { background: #fff6df; border-left: 4px solid #e0a030; padding: 0.4em 0.8em; margin: 0.3em 0; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
code { font-size: 0.95em; }
"""


def render(state: RunState, data: ReportData, images: Mapping[str, str]) -> str:
    """The page; ``images`` maps each plot key of ``PLOTS`` to its file name beside the page."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>evoteam report {escape(data.run)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>evoteam report: <code>{escape(data.run)}</code></h1>",
        f"<p>{_summary(data)}</p>",
        *(f'<div class="note">{escape(n)}</div>' for n in data.notes),
        _winner(data.winner),
        "<h2>Plots</h2>",
        *(_figure(images[key], caption) for key, caption in PLOTS if key in images),
        "<h2>Rounds</h2>",
        _rounds(state),
        "<h2>Team timeline</h2>",
        _timeline(data.timeline),
        "<h2>Candidates</h2>",
        _candidates(state),
        "<h2>Decisions</h2>",
        _decisions(state),
        "<h2>Tokens per role</h2>",
        _tokens(data),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _summary(data: ReportData) -> str:
    best = (
        f"{data.winner.speedup:.3f}x over the start ({escape(data.winner.id)})"
        if data.winner is not None
        else "none: no candidate is significantly faster than the start"
    )
    status = f"finished ({escape(data.finished)})" if data.finished else "not finished"
    return (
        f"kernel <code>{escape(data.kernel)}</code> · team {escape(data.mode)} · llm {escape(data.llm)} · "
        f"{data.rounds_finished}/{data.rounds_planned} rounds · {status} · best {best} · "
        f"tokens {data.spent:,}/{data.budget:,}"
    )


def _winner(winner: Winner | None) -> str:
    if winner is None:
        return "<h2>Winner</h2><p>No winner: no candidate has passed every workload.</p>"
    sha = f" · commit <code>{escape(winner.sha[:12])}</code>" if winner.sha else ""
    head = (
        f"<h2>Winner: <code>{escape(winner.id)}</code></h2>"
        f"<p>{winner.speedup:.3f}x geomean · {escape(winner.role)} ({escape(winner.agent)}) · round {winner.round}"
        f"{sha}</p><p>Rationale: {escape(winner.rationale)}</p>"
    )
    if not winner.workloads:
        return head + "<p>The journal holds no per-workload results for this candidate.</p>"
    rows = [
        [
            escape(w.name),
            escape(w.status.value),
            escape(w.speed()),
            escape(", ".join(w.flags)),
            _num(w.latency_ms, "{:.4g}"),
            _num(w.reference_latency_ms, "{:.4g}"),
            escape(w.reason),
        ]
        for w in winner.workloads
    ]
    columns = ["workload", "status", "speedup [95% interval]", "flags", "latency ms", "baseline ms"]
    return head + _table([*columns, "reason"], rows)


def _figure(name: str, caption: str) -> str:
    image = f'<img src="{escape(name)}" alt="{escape(caption)}">'
    return f"<figure>{image}<figcaption>{escape(caption)}</figcaption></figure>"


def _rounds(state: RunState) -> str:
    rows = [
        [
            str(r.round),
            escape(", ".join(r.roles)),
            escape(r.protocol),
            str(len(r.candidates)),
            _num(r.best(), "{:.3f}x"),
            f"{r.tokens:,}",
            "yes" if r.profiled else "no",
            "yes" if r.knowledge_read else "no",
        ]
        for r in state.rounds_finished
    ]
    done = {r.round for r in state.rounds_finished}
    for number in sorted(set(state.rounds_started) - done):
        count = str(len(state.round_candidates(number)))
        rows.append([str(number), "(in progress or stopped)", "", count, "", "", "", ""])
    if not rows:
        return "<p>No round has started.</p>"
    headers = ["round", "team", "protocol", "candidates", "round's best", "tokens", "profiled", "knowledge read"]
    return _table(headers, rows)


def _timeline(timeline: Timeline) -> str:
    if not timeline.rounds:
        return "<p>No round has started.</p>"
    kinds = {(m.round, m.role): m for m in timeline.marks}
    rows = []
    for role in timeline.roles:
        cells = [escape(role)]
        for number in timeline.rounds:
            mark = kinds.get((number, role))
            count = f" ({mark.submissions})" if mark is not None and mark.submissions else ""
            cells.append(escape(mark.kind + count) if mark is not None else "")
        rows.append(cells)
    return _table(["role", *(f"round {r}" for r in timeline.rounds)], rows)


def _candidates(state: RunState) -> str:
    rows = []
    for c in sorted(state.candidates.values(), key=lambda c: (c.round, c.id)):
        r = c.record
        status = (r.status.value + (" (vetoed)" if r.vetoed else "")) if r is not None else "not evaluated"
        problems = [*(r.violations if r else []), *(f"dropped {d}" for d in (r.dropped_constructs if r else []))]
        if r is not None and r.known_failure:
            problems.append(f"repeats known failure {r.known_failure}")
        rows.append(
            [
                str(c.round),
                f"<code>{escape(c.id)}</code>" + (" ★" if c.id == state.best else ""),
                escape(c.role),
                escape(c.agent),
                escape(status),
                _num(r.geomean_speedup if r else None, "{:.3f}x"),
                f"{r.faster}/{r.total}" if r else "",
                f"<code>{escape(c.sha[:10])}</code>" if c.sha else "",
                escape(c.rationale),
                escape("; ".join(problems)),
            ]
        )
    if not rows:
        return "<p>No candidate has been submitted.</p>"
    headers = ["round", "candidate", "role", "agent", "status", "speedup", "faster", "commit", "rationale", "issues"]
    return _table(headers, rows)


def _decisions(state: RunState) -> str:
    rows = [
        [
            str(d.round),
            escape(d.source),
            "<br>".join(f"<b>{escape(s.name)}</b>: {escape(s.summary)}" for s in d.signals) or "none",
            escape("; ".join(describe(a) for a in d.actions) or "team unchanged"),
            escape(d.rationale),
        ]
        for d in state.decisions
    ]
    if not rows:
        return "<p>No decision has been made yet.</p>"
    return _table(["after round", "by", "signals", "changes", "rationale"], rows)


def _tokens(data: ReportData) -> str:
    rows = [
        [
            escape(t.role),
            str(t.agents),
            f"{t.input_tokens:,}",
            f"{t.output_tokens:,}",
            f"{t.cache_tokens:,}",
            f"{t.total:,}",
            escape(", ".join(f"round {r}: {n:,}" for r, n in t.by_round.items())),
        ]
        for t in data.tokens
    ]
    if not rows:
        return "<p>No role has spent tokens.</p>"
    return _table(["role", "agents", "input", "output", "cache", "total", "by round"], rows)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of cells that are already HTML (escaped by the caller)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(content: str) -> str:
    numeric = content[:1].isdigit() and " " not in content.strip()
    return f'<td class="num">{content}</td>' if numeric else f"<td>{content}</td>"


def _num(value: float | None, fmt: str) -> str:
    return fmt.format(value) if value is not None else "-"
