"""Hover on a task's kernel entry point: the best candidate's per-workload table (status, speedup, latency
against the baseline) in Markdown, and the latest supervisor decision of the kernel's latest run with its
rationale and the signals it answered. Answered from the run index (memory) only."""

from __future__ import annotations

from lsprotocol import types as lsp

from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import result_label
from evoteam.server.features.lenses import EntryPoint, entry_point
from evoteam.server.run_index import RunEntry
from evoteam.supervisor.decision import SupervisorDecision, describe
from evoteam.supervisor.records import WorkloadOutcome


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _ms(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "–"


def workload_table(workloads: list[WorkloadOutcome]) -> list[str]:
    if not workloads:
        return ["_No per-workload outcomes were recorded for this candidate._"]
    rows = [
        "| workload | status | speedup [95% interval] | latency ms | baseline ms |",
        "|---|---|---:|---:|---:|",
    ]
    for w in workloads:
        status = w.status.value + (f" ({_cell(w.reason)})" if w.reason else "")
        flags = f" ({', '.join(w.flags)})" if w.flags else ""
        rows.append(
            f"| `{_cell(w.name)}` | {status} | {w.speed()}{flags} | {_ms(w.latency_ms)} | "
            f"{_ms(w.reference_latency_ms)} |"
        )
    return rows


def decision_lines(entry: RunEntry, decision: SupervisorDecision | None) -> list[str]:
    if decision is None:
        return [f"_No supervisor decision yet in run `{entry.run}`._"]
    changes = "; ".join(describe(a) for a in decision.actions) or "team unchanged"
    lines = [
        f"**Supervisor after round {decision.round}** ({decision.source}, run `{entry.run}`): {decision.rationale}",
        "",
        f"Changes: {changes}",
    ]
    for signal in decision.signals:
        numbers = ", ".join(f"{k}={v:g}" for k, v in signal.numbers.items())
        lines.append(f"- signal `{signal.name}`: {signal.summary}" + (f" ({numbers})" if numbers else ""))
    return lines


def hover_text(ls: EvoteamServer, point: EntryPoint) -> str | None:
    entries = ls.index.for_kernel(point.task.name)
    if not entries:
        return None
    parts = [f"### evoteam · {point.task.name}", ""]
    best = ls.index.best_for(point.task.name)
    if best is not None and best[1].record is not None:
        entry, candidate = best
        parts += [f"**Best**: {result_label(best[1].record)} (run `{entry.run}`, candidate `{candidate.id}`)", ""]
        parts += workload_table(entry.workloads(candidate.id))
    else:
        parts.append(f"_No passing candidate in {len(entries)} run(s) yet._")
    latest = entries[-1]
    parts += ["", *decision_lines(latest, latest.state.decisions[-1] if latest.state.decisions else None)]
    return "\n".join(parts)


class Hover(Feature):
    name = "hover"

    def register(self, server: EvoteamServer) -> None:
        @server.feature(lsp.TEXT_DOCUMENT_HOVER)
        async def hover(ls: EvoteamServer, params: lsp.HoverParams) -> lsp.Hover | None:
            await ls.wait_ready()
            point = entry_point(ls, params.text_document.uri)
            if point is None or params.position.line != point.line:
                return None
            text = hover_text(ls, point)
            if text is None:
                return None
            return lsp.Hover(
                contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text),
                range=lsp.Range(lsp.Position(point.line, 0), lsp.Position(point.line, point.width)),
            )


FEATURE = Hover()
