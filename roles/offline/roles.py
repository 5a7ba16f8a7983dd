"""What the roles that do not write code do without a language model: small, rule-based agents on their tools.

- ``OfflineProfiler`` (Profiling Scientist): profiles the workspace's kernel and records it as a hardware note.
- ``OfflineIntegrator`` (Knowledge Integrator): reads the whole store and writes one plan note: the best
  verified strategies with their numbers, the recorded failures, duplicated or unbacked entries, next steps.
- ``OfflineDisciplinarian``: compiles the workspace's kernel against the active constraints and vetoes it when
  it does not compile or breaks one (the verdict line of ``roles.builtin.parse_verdict``).
- ``OfflineReviewer``: reads the kernel for cheating patterns (state kept between calls, timers, global
  settings, pointer caches), evaluates it, and calls a jump of ``SUSPICIOUS_JUMP`` times the best so far suspicious.

Each acts only through ``context.toolbox``, so it is confined and journaled like any other agent, and spends
no tokens. They judge with rules, not understanding: what they cannot see (a subtle race, a wrong reduction
order) they do not claim.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from evoteam.roles.agent import AgentEvent, EventSink
from evoteam.roles.agent_api import AgentContext, AgentReport
from evoteam.roles.tools.base import ToolResult

SUSPICIOUS_JUMP = 10.0
"""A geomean speedup this many times the best so far (named in the brief) is flagged for a human look."""

CHEAT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "state kept between calls (a non-const static variable)",
        re.compile(
            r"\bstatic\s+(?!const\b|constexpr\b|inline\b|void\b|__device__\b|__global__\b|__forceinline__\b)"
            r"[^;()=]*?\b\w+\s*(=|;|\[|\{)"
        ),
    ),
    (
        "a timer or clock read inside the kernel",
        re.compile(r"\b(clock\s*\(|clock_gettime|__rdtsc|chrono::|perf_counter|time\.time\()"),
    ),
    (
        "a change of global settings (threads, FP mode, environment)",
        re.compile(
            r"\b(omp_set_num_threads|fesetround|fesetenv|_MM_SET_FLUSH_ZERO_MODE|setenv|putenv|set_num_threads)\b"
        ),
    ),
    (
        "results keyed by an input's address",
        re.compile(r"\[[^\]]*(data_ptr\(\)|\bid\(\w+\))[^\]]*\]|(data_ptr\(\)|\bid\(\w+\))\s+(not\s+)?in\b"),
    ),
)

_KNOWLEDGE_LINE = re.compile(
    r"^(?:[0-9a-f]+ )?"  # the entry's id
    r"\[(?P<kind>\w+)\] (?P<title>.*?) \((?:[^()]*?, )?round (?P<round>\d+)\)(?: \[(?P<evidence>[^\]]*)\])?"
)
_BEST_SO_FAR = re.compile(r"Best so far: \S+ at ([0-9.]+)x geomean")
"""The supervisor's brief names the best so far this way (``supervisor.loop``)."""
_COMMENT = re.compile(r"//.*$|^\s*# .*$")
_NUMBER = re.compile(r"\bgeomean_speedup=([0-9.eE+-]+)")


class _Acting:
    """Tool calls that are reported as events (the journal's ``agent_event``)."""

    def __init__(self, on_event: EventSink | None = None) -> None:
        self.on_event = on_event
        self.calls = 0

    def call(self, context: AgentContext, name: str, args: dict[str, Any]) -> ToolResult:
        a = context.assignment
        result = context.toolbox.call(name, args)
        self.calls += 1
        if self.on_event is not None:
            first = result.content.strip().splitlines()[0] if result.content.strip() else ""
            self.on_event(
                AgentEvent(
                    kind="tool",
                    role=a.role.name,
                    agent_id=a.agent_id,
                    turn=self.calls,
                    tool=name,
                    is_error=result.is_error,
                    result=first[:300],
                )
            )
        return result

    def report(self, context: AgentContext, text: str, error: str | None = None) -> AgentReport:
        a = context.assignment
        return AgentReport(
            role=a.role.name, agent_id=a.agent_id, turns=self.calls, stop="end_turn", error=error, final_text=text
        )

    def source(self, context: AgentContext) -> str | None:
        """The text of the kernel's entry file in the workspace, read with ``view`` (None when it cannot)."""
        path = context.task.entry_file if context.task is not None else None
        if path is None or "view" not in context.toolbox:
            return None
        result = self.call(context, "view", {"path": path})
        text = (result.data or {}).get("text")
        return text if isinstance(text, str) and not result.is_error else None


class OfflineProfiler(_Acting):
    """Profiles the workspace's kernel with the ``profile`` tool and records the result as a hardware note."""

    def run(self, context: AgentContext) -> AgentReport:
        result = self.call(context, "profile", {})
        if not result.is_error and "write_note" in context.toolbox:
            lines = result.content.splitlines()
            self.call(
                context,
                "write_note",
                {
                    "kind": "hardware",
                    "title": f"profile of round {context.assignment.round}: " + (lines[0] if lines else "")[:150],
                    "body": "\n".join(lines[:40]),
                },
            )
        return self.report(context, result.content[:2000], result.content if result.is_error else None)


class OfflineIntegrator(_Acting):
    """Writes one plan note from what the store holds; invents nothing (every number comes from an entry)."""

    def run(self, context: AgentContext) -> AgentReport:
        if "read_knowledge" not in context.toolbox or "write_note" not in context.toolbox:
            return self.report(context, "needs read_knowledge and write_note; did nothing")
        read = self.call(context, "read_knowledge", {})
        entries = [] if read.is_error else _entries(read.content)
        title, body = plan(entries, context.assignment.round)
        written = self.call(context, "write_note", {"kind": "plan", "title": title, "body": body})
        return self.report(context, f"{title}\n{body}", written.content if written.is_error else None)


def _entries(content: str) -> list[dict[str, str]]:
    found = []
    for line in content.splitlines():
        match = _KNOWLEDGE_LINE.match(line)
        if match:
            found.append({k: v or "" for k, v in match.groupdict().items()})
    return found


def plan(entries: list[dict[str, str]], round_number: int) -> tuple[str, str]:
    """The plan note (title, body) for the entries of ``read_knowledge`` (kind, title, round, evidence)."""
    strategies = [e for e in entries if e["kind"] == "strategy"]
    failures = [e for e in entries if e["kind"] == "failed_attempt"]
    hardware = [e for e in entries if e["kind"] == "hardware"]
    scored = sorted(
        ((float(m.group(1)), e) for e in strategies if (m := _NUMBER.search(e["evidence"]))),
        key=lambda pair: -pair[0],
    )
    unbacked = [e for e in strategies if not _NUMBER.search(e["evidence"])]
    repeats = {t: n for t, n in Counter(e["title"] for e in entries if e["kind"] != "role_record").items() if n > 1}
    lines = ["Known to work (measured):"]
    lines += [f"- {e['title']} (round {e['round']}, {score:.3f}x geomean)" for score, e in scored[:3]] or [
        "- nothing yet"
    ]
    lines.append(f"Known not to work: {len(failures)} recorded failed attempt(s)")
    lines += [f"- {e['title']}" for e in failures[:5]]
    if unbacked:
        lines.append(f"Unverified: {len(unbacked)} strategy note(s) without a measured speedup; do not rely on them")
    if repeats:
        lines.append("Recorded more than once: " + "; ".join(f"{t} ({n}x)" for t, n in list(repeats.items())[:3]))
    steps = []
    if not hardware:
        steps.append("profile the best kernel: there is no hardware observation yet")
    else:
        steps.append(f"act on the latest profile: {hardware[0]['title']}")
    if scored:
        steps.append(
            f"change one thing at a time around the best ({scored[0][1]['title']}), skipping recorded failures"
        )
    else:
        steps.append("get one correct candidate first (a Debugger on the most common failure)")
    if len(failures) > 2 * max(1, len(scored)):
        steps.append("failures outnumber successes: look for what the failed attempts share before trying more")
    lines.append("Next steps:")
    lines += [f"{i}. {s}" for i, s in enumerate(steps, 1)]
    best = f"best {scored[0][0]:.3f}x" if scored else "no verified strategy yet"
    return f"plan after round {round_number}: {best}, {len(failures)} failed attempt(s) recorded", "\n".join(lines)


class OfflineDisciplinarian(_Acting):
    """Vetoes the workspace's kernel when it does not compile or breaks an active constraint."""

    def run(self, context: AgentContext) -> AgentReport:
        if "compile" not in context.toolbox:
            return self.report(context, "no compile tool: nothing checked\nVERDICT: approve")
        result = self.call(context, "compile", {})
        data = result.data or {}
        if result.is_error:
            return self.report(context, f"cannot check: {result.content[:300]}\nVERDICT: approve", result.content)
        violations = [str(v) for v in data.get("violations") or []]
        if not data.get("ok", False):
            first = next((ln for ln in result.content.splitlines()[1:] if ln.strip()), "")
            verdict = f"VERDICT: veto — the kernel does not compile: {first.strip()[:200]}"
        elif violations:
            verdict = f"VERDICT: veto — constraint broken: {'; '.join(violations)[:300]}"
        else:
            verdict = "VERDICT: approve"
        return self.report(context, f"{result.content[:1500]}\n{verdict}")


class OfflineReviewer(_Acting):
    """Flags cheating patterns in the kernel's text and implausible speedups; says what it did not check."""

    def run(self, context: AgentContext) -> AgentReport:
        source = self.source(context)
        findings = [] if source is None else cheat_findings(source)
        speed = None
        if "evaluate" in context.toolbox:
            result = self.call(context, "evaluate", {})
            value = (result.data or {}).get("geomean_speedup")
            speed = float(value) if isinstance(value, int | float) and not result.is_error else None
        best = _BEST_SO_FAR.search(context.assignment.brief)
        before = float(best.group(1)) if best else None
        if speed is not None and before is not None and speed > SUSPICIOUS_JUMP * before:
            findings.append(
                f"geomean speedup {speed:.3f}x is over {SUSPICIOUS_JUMP:g} times the best so far ({before:.3f}x): "
                "check it by hand"
            )
        measured = f"measured {speed:.3f}x geomean" if speed is not None else "no passing evaluation"
        read = "read the kernel" if source is not None else "could not read the kernel"
        if not findings:
            return self.report(context, f"{read}; {measured}; no cheating pattern found\nVERDICT: approve")
        if "write_note" in context.toolbox:
            self.call(
                context,
                "write_note",
                {
                    "kind": "failed_attempt",
                    "title": f"Reviewer, round {context.assignment.round}: suspicious — {findings[0]}"[:200],
                    "body": "\n".join(findings),
                },
            )
        return self.report(
            context, f"{read}; {measured}\n" + "\n".join(findings) + f"\nVERDICT: suspicious — {findings[0]}"
        )


def cheat_findings(source: str) -> list[str]:
    """One finding per pattern that a line of the source matches, ``//`` and ``# `` comments left out."""
    found = []
    lines = [_COMMENT.sub("", line) for line in source.splitlines()]
    for what, pattern in CHEAT_PATTERNS:
        for number, line in enumerate(lines, 1):
            if pattern.search(line):
                found.append(f"{what} at line {number}: {line.strip()[:120]}")
                break
    return found
