"""A comparison shown: the table's rows (the terminal's and the page's), the cost-against-speedup plot with each
arm's Pareto front, and the HTML page (``compare.html``, the plot beside it, ``comparison.json``).

The plot's cost is dollars when the runs spent priced tokens, else tokens, else (offline) the agents'
evaluations: whichever budget the runs were held to.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evoteam.supervisor.compare_result import ArmSummary, Comparison, RunResult, TaskComparison
from evoteam.supervisor.compare_stats import pareto_front

COLUMNS = ("arm", "seeds", "speedup [95% CI]", "faster", "of baseline", "failed", "tokens", "cost", "evals", "wall")
"""Speedup: over the start, the geometric mean over seeds; faster: the share of workloads the results beat the
start on; of baseline: the results' speed as a share of the task baseline's; tokens, cost, evals (the agents'
evaluations) and wall: per run."""
PAGE = "compare.html"
PLOT = "cost_speedup.png"
DATA = "comparison.json"
_COLOURS = ("#3b6fb6", "#2a7f3f", "#c0392b", "#7b2d8b", "#e0a030", "#555555")


def row(summary: ArmSummary) -> list[str]:
    """One arm's cells, in ``COLUMNS``' order."""
    s = summary.speedup
    speed = (
        "none passed"
        if s.mean is None
        else f"{s.mean:.3f}x" + (f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci is not None else "")
    )
    return [
        summary.arm,
        str(summary.seeds),
        speed,
        "-" if summary.faster_fraction is None else f"{summary.faster_fraction:.0%}",
        "-" if summary.of_baseline is None else f"{summary.of_baseline:.0%}",
        str(summary.failed),
        f"{summary.tokens:,.0f}",
        "unpriced" if summary.cost_usd is None else f"${summary.cost_usd:.2f}",
        f"{summary.evaluations:.1f}",
        f"{summary.wall_s:.0f}s",
    ]


def control_line(task: TaskComparison) -> str:
    """What the control showed, in words."""
    c = task.control
    if c is None:
        return f"{task.task}: no control (the start failed; results were timed against the task's baseline)"
    if c.speedup is None or c.ci is None:
        return f"{task.task}: the control (the start against itself) did not pass"
    verdict = "ties" if c.ties else "does NOT tie: the machine was too noisy for these figures"
    return f"{task.task}: the start against itself {c.speedup:.3f}x [{c.ci[0]:.3f}, {c.ci[1]:.3f}] {verdict}"


def cost_axis(runs: Sequence[RunResult]) -> tuple[str, list[float]]:
    """The plot's cost label and each run's cost on it."""
    if runs and all(r.cost_usd is not None for r in runs) and any((r.cost_usd or 0) > 0 for r in runs):
        return "cost (USD per run)", [r.cost_usd or 0.0 for r in runs]
    if any(r.tokens > 0 for r in runs):
        return "tokens per run", [float(r.tokens) for r in runs]
    return "agents' evaluations per run", [float(r.evaluations) for r in runs]


def plot(comparison: Comparison, path: Path) -> Path:
    """Each run's result (cost, final speedup; every task's run on its own) and each arm's Pareto front."""
    runs = [r for t in comparison.tasks for r in t.runs if r.final is not None and r.final.speedup is not None]
    label, costs = cost_axis(runs)
    figure = Figure(figsize=(7.5, 4.5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    for k, arm in enumerate(comparison.arms):
        mine = [(c, r.final.speedup) for c, r in zip(costs, runs, strict=True) if r.arm == arm.arm and r.final]
        points = [(c, s) for c, s in mine if s is not None]
        if not points:
            continue
        colour = _COLOURS[k % len(_COLOURS)]
        ax.scatter([p[0] for p in points], [p[1] for p in points], color=colour, label=arm.arm, alpha=0.8)
        front = [points[i] for i in pareto_front(points)]
        ax.scatter([p[0] for p in front], [p[1] for p in front], s=150, facecolors="none", edgecolors=colour)
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color=colour, linewidth=1.2)
    ax.axhline(1.0, color="#999999", linestyle="--", linewidth=1)
    ax.set_xlabel(label)
    ax.set_ylabel("final speedup over the start")
    ax.set_title("each run's result: cost against speedup (circled and joined: each arm's Pareto front)", fontsize=10)
    if runs:
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, "no result passed its final timing", ha="center", va="center", transform=ax.transAxes)
    figure.savefig(path, format="png")
    return path


def write_report(comparison: Comparison, out: Path) -> Path:
    """Writes ``compare.html``, the plot and ``comparison.json`` into ``out``; the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    plot(comparison, out / PLOT)
    (out / DATA).write_text(comparison.model_dump_json(indent=2) + "\n", encoding="utf-8")
    page = out / PAGE
    page.write_text(_page(comparison), encoding="utf-8")
    return page


def _page(comparison: Comparison) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>evoteam compare {escape(comparison.experiment)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}"
        "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}th{background:#f3f3f3}"
        "figure img{max-width:100%;border:1px solid #eee}</style></head><body>",
        f"<h1>evoteam compare: <code>{escape(comparison.experiment)}</code></h1>",
        f"<p>{escape(settings_line(comparison))}</p>",
        "<h2>Over all tasks</h2>" if len(comparison.tasks) > 1 else "<h2>Arms</h2>",
        _table(COLUMNS, [row(a) for a in comparison.arms]),
        f'<figure><img src="{PLOT}" alt="cost against speedup"><figcaption>Each run\'s result: its cost and its '
        "final speedup over the start; circled and joined: each arm's Pareto front.</figcaption></figure>",
    ]
    for task in comparison.tasks:
        parts += [
            f"<h2>Task <code>{escape(task.task)}</code></h2>",
            f"<p>{escape(control_line(task))}</p>",
            _table(COLUMNS, [row(a) for a in task.arms]) if len(comparison.tasks) > 1 else "",
            _table(
                ("arm", "seed", "run", "stop", "best", "own claim", "final [95% CI]", "tokens", "evaluations"),
                [_run_cells(r) for r in task.runs],
            ),
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def settings_line(comparison: Comparison) -> str:
    s = comparison.settings
    return " · ".join(f"{k} {v}" for k, v in s.items() if v not in (None, {}, []))


def _run_cells(r: RunResult) -> list[str]:
    final = r.final
    if final is None:
        timed = "not timed"
    elif final.speedup is None:
        timed = f"failed ({final.status})"
    else:
        timed = f"{final.speedup:.3f}x" + (f" [{final.ci[0]:.3f}, {final.ci[1]:.3f}]" if final.ci else "")
    return [
        r.arm,
        str(r.seed),
        r.run,
        r.stop or "-",
        r.best or "(start)",
        "-" if r.own_speedup is None else f"{r.own_speedup:.3f}x",
        timed,
        f"{r.tokens:,}",
        str(r.evaluations),
    ]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
