"""The report's PNG plots, drawn with matplotlib's Agg canvas from ``report_data`` (no pyplot, no display).

Each function writes one PNG and returns its path. A plot without data (no round yet, no winner, no tokens)
is still drawn, as a figure that says what is missing, so the report always has the same files.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from evoteam.gpu_bench.api import EvaluationStatus
from evoteam.supervisor.report_data import MARK_KINDS, RoleTokens, RoundPoint, Timeline, Winner

DPI = 110
LABELLED_BARS = 40
"""Up to this many workloads, each bar carries its speedup as a label."""
NARROW_SPAN = 10.0
"""Speedups within this factor of each other (and of 1x) get the finer ticks ``NARROW_TICKS``."""
NARROW_TICKS = (1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0)
KIND_STYLE: dict[str, tuple[str, str]] = {
    "veto": ("X", "#7b2d8b"),
    "submitted": ("o", "#2a7f3f"),
    "withdrawn": ("o", "#b0b0b0"),
    "error": ("x", "#c0392b"),
    "played": ("s", "#3b6fb6"),
    "idle": ("_", "#999999"),
    "pending": ("^", "#e0a030"),
}
"""Marker and colour of each timeline mark kind."""


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def _empty(path: Path, title: str, message: str) -> Path:
    figure = _figure(7, 2.2)
    ax = figure.add_subplot()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="#555555", transform=ax.transAxes)
    ax.set_axis_off()
    return _save(figure, path)


def speedup_plot(series: list[RoundPoint], path: Path) -> Path:
    title = "Best geomean speedup per round"
    if not series:
        return _empty(path, title, "no round has started yet")
    figure = _figure(7, 4)
    ax = figure.add_subplot()
    rounds = [p.round for p in series]
    nan = math.nan
    ax.step(  # from the start (round 0, 1x): one round is a step too, not a lone point
        [0, *rounds],
        [1.0, *(p.best_so_far if p.best_so_far is not None else nan for p in series)],
        where="post",
        marker="o",
        color="#2a7f3f",
        label="best so far",
    )
    ax.scatter(
        rounds,
        [p.round_best if p.round_best is not None else nan for p in series],
        marker="D",
        color="#3b6fb6",
        zorder=3,
        label="round's best",
    )
    ax.axhline(1.0, color="#888888", linestyle="--", linewidth=1, label="the start (1x)")
    if all(p.round_best is None for p in series):
        ax.text(0.5, 0.6, "no passing candidate yet", ha="center", transform=ax.transAxes, color="#c0392b")
    ax.set_xticks([0, *rounds], ["start", *(str(r) for r in rounds)])
    ax.set_xlabel("round")
    ax.set_ylabel("geomean speedup (x)")
    ax.set_title(title)
    ax.legend(loc="best")
    return _save(figure, path)


def workloads_plot(winner: Winner | None, path: Path) -> Path:
    title = "Per-workload speedups of the winner"
    if winner is None:
        return _empty(path, title, "no candidate has passed every workload: no winner")
    if not winner.workloads:
        return _empty(path, title, "the journal holds no per-workload results for the winner")
    workloads = winner.workloads
    figure = _figure(max(6.0, min(24.0, 0.32 * len(workloads) + 2)), 4.5)
    ax = figure.add_subplot()
    xs = list(range(len(workloads)))
    passed = [(x, w) for x, w in zip(xs, workloads, strict=True) if w.speedup is not None and w.speedup > 0]
    failed = [(x, w) for x, w in zip(xs, workloads, strict=True) if (x, w) not in passed]
    colors = ["#2a7f3f" if w.speedup is not None and w.speedup >= 1.0 else "#e0a030" for _, w in passed]
    heights = [(w.speedup or 1.0) - 1.0 for _, w in passed]
    bars = ax.bar([x for x, _ in passed], heights, bottom=1.0, color=colors)  # from 1x: up faster, down slower
    if len(passed) <= LABELLED_BARS:
        ax.bar_label(bars, labels=[f"{w.speedup:.2f}x" for _, w in passed], fontsize=7, padding=2)
    ax.set_yscale("log")
    values = [w.speedup or 1.0 for _, w in passed] + [1.0]
    narrow = max(values) / min(values) < NARROW_SPAN  # a few ticks per decade would leave only "1x"
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=NARROW_TICKS if narrow else (1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}x"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="#888888", linestyle="--", linewidth=1)
    if failed:
        ax.scatter([x for x, _ in failed], [1.0] * len(failed), marker="x", s=60, color="#c0392b", zorder=3)
        for x, w in failed:
            label = "no speedup" if w.status == EvaluationStatus.PASSED else w.status.value
            ax.annotate(label, (x, 1.0), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels([_short(w.name, 24) for w in workloads], rotation=90, fontsize=7)
    ax.set_xlim(-0.6, len(workloads) - 0.4)
    ax.set_ylabel("speedup (log scale)")
    ax.set_title(f"{title}\n{winner.id} ({winner.speedup:.3f}x geomean)", fontsize=10)
    return _save(figure, path)


def timeline_plot(timeline: Timeline, path: Path) -> Path:
    title = "Team timeline"
    if not timeline.rounds:
        return _empty(path, title, "no round has started yet")
    rows = {role: i for i, role in enumerate(reversed(timeline.roles))}
    figure = _figure(max(6.0, 1.6 * len(timeline.rounds) + 3), max(3.8, 1.2 + 0.5 * len(rows)))
    ax = figure.add_subplot()
    for kind in MARK_KINDS:
        marks = [m for m in timeline.marks if m.kind == kind]
        if marks:
            marker, color = KIND_STYLE[kind]
            ax.scatter(
                [m.round for m in marks], [rows[m.role] for m in marks], marker=marker, s=90, color=color, label=kind
            )
    top = len(rows) - 0.5
    for note in timeline.decisions:
        ax.axvline(note.round + 0.5, color="#bbbbbb", linestyle=":", linewidth=1)
        ax.text(note.round + 0.52, -0.45, note.text, rotation=90, va="bottom", ha="left", fontsize=7, color="#444")
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(list(rows))
    ax.set_xticks(timeline.rounds)
    ax.set_xlim(min(timeline.rounds) - 0.5, max(timeline.rounds) + 1.0)
    ax.set_ylim(-0.5, top)
    ax.set_xlabel("round (decisions between rounds)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _save(figure, path)


def tokens_plot(tokens: list[RoleTokens], path: Path) -> Path:
    title = "Tokens per role"
    if sum(t.total for t in tokens) == 0:
        return _empty(path, title, "no model tokens were spent")
    rounds = sorted({r for t in tokens for r in t.by_round})
    figure = _figure(max(6.0, 1.1 * len(tokens) + 2), 4.5)
    ax = figure.add_subplot()
    xs = list(range(len(tokens)))
    bottom = [0.0] * len(tokens)
    for number in rounds:
        heights = [float(t.by_round.get(number, 0)) for t in tokens]
        ax.bar(xs, heights, bottom=bottom, label=f"round {number}" if number else "before round 1")
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    rest = [t.total - b for t, b in zip(tokens, bottom, strict=True)]
    if any(r > 0 for r in rest):
        ax.bar(xs, rest, bottom=bottom, color="#cccccc", label="unattributed")
    ax.set_xticks(xs)
    ax.set_xticklabels([t.role for t in tokens], rotation=30, ha="right")
    ax.set_ylabel("tokens")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(figure, path)


def _short(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
