"""``OfflineTunerAgent``: an agent with no language model that tunes the kernel's knobs through its tools.

It reads the kernel with ``view``, finds its knobs, and for each config the search proposes writes the rewritten
source (``write``) and runs ``evaluate`` (score: geomean speedup; any other status than PASSED is a failure).
Configs the knowledge store records as failed are skipped; new failures are recorded as ``failed_attempt``
notes, the best config as a ``strategy`` note; the best is written back and submitted. A role's strategy
(``strategies``) other than the plain search submits nothing when no config beat the one it was given (the
kernel as it found it); the climb and the probes then record what they tried as one ``failed_attempt`` note,
so that later rounds skip those configs. Every action goes through ``context.toolbox``, so it is confined and
journaled like any other agent. It spends no tokens: the shared budget is never charged, and the report's usage
is zero.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.agent import AgentEvent, EventSink
from evoteam.roles.agent_api import AgentContext, AgentReport, StopReason
from evoteam.roles.llm import Usage
from evoteam.roles.offline.knobs import Knob, Value, apply, current_config, describe, find_knobs
from evoteam.roles.offline.search import Config, Space
from evoteam.roles.offline.strategies import StrategyName, proposer
from evoteam.roles.tools.base import ToolResult

MARK = "offline tuner"
"""Starts the title of every note this agent writes; ``read_knowledge`` queries by it."""
_CONFIG_LINE = re.compile(r"config: (\{[^\n]*?\})(?=\s|$)")
_VIEW_LINE = re.compile(r"^ *(\d+)\t(.*)$")
_NEEDED = ("view", "write", "evaluate", "submit_candidate")


class _Stop(Exception):
    """Ends the run early with what to report (a tool the agent cannot do without failed)."""


class OfflineTunerAgent:
    """``max_evaluations`` configs at most, within ``max_wall_s`` seconds, proposed by ``strategy``
    (``roles.offline.strategies``: ``search`` the budgeted search, the source's own values first; ``local``
    hill climbing from them; ``explore`` configs far from them; ``repair`` only when they fail). ``source`` is
    the workspace path of the kernel file (default: the task prompt's ``entry_file``), ``knobs`` the task's
    declared knobs, ``cuda`` whether thread-count domains are CUDA's (default: from the task prompt)."""

    def __init__(
        self,
        max_evaluations: int = 24,
        seed: int = 0,
        *,
        source: str | None = None,
        knobs: Mapping[str, Sequence[Value]] | None = None,
        cuda: bool | None = None,
        max_wall_s: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
        on_event: EventSink | None = None,
        should_stop: Callable[[], bool] | None = None,
        strategy: StrategyName = "search",
    ) -> None:
        if max_evaluations < 1:
            raise ValueError(f"max_evaluations must be at least 1, got {max_evaluations}")
        self.max_evaluations = max_evaluations
        self.seed = seed
        self.source = source
        self.knobs = dict(knobs or {})
        self.cuda = cuda
        self.max_wall_s = max_wall_s
        self.clock = clock
        self.on_event = on_event
        self.should_stop = should_stop
        self.strategy = strategy

    @classmethod
    def for_task(cls, task: KernelTask, max_evaluations: int = 24, seed: int = 0, **options: Any) -> OfflineTunerAgent:
        """Set up for ``task``: its entry file (as ``seed_workspace`` names it), declared knobs and language."""
        return cls(
            max_evaluations, seed, source=task.source.name, knobs=task.knobs, cuda=task.language == "cuda", **options
        )

    def run(self, context: AgentContext) -> AgentReport:
        return _Run(self, context).run()


class _Run:
    """One run of the agent: the state that lives as long as ``OfflineTunerAgent.run``."""

    def __init__(self, agent: OfflineTunerAgent, context: AgentContext) -> None:
        self.agent, self.context = agent, context
        self.calls = 0
        self.first_submission = len(context.submissions)
        self.started = agent.clock()

    def run(self) -> AgentReport:
        ctx, agent = self.context, self.agent
        missing = [name for name in _NEEDED if name not in ctx.toolbox]
        path = agent.source or (ctx.task.entry_file if ctx.task is not None else None)
        if missing or path is None:
            why = f"the role lacks the tools {missing}" if missing else "no kernel file named (source or task prompt)"
            return self.finish("end_turn", f"cannot tune: {why}", error=why)
        cuda = agent.cuda if agent.cuda is not None else (ctx.task is not None and ctx.task.language == "cuda")
        try:
            original = self.read(path)
        except _Stop as stop:
            return self.finish("end_turn", f"stopped: {stop}", error=str(stop))
        try:
            knobs = find_knobs(original, cuda=cuda, declared=agent.knobs)
            space = Space({k.name: k.values for k in knobs})
        except ValueError as exc:  # a declared knob with no values, or the same value twice
            return self.finish("end_turn", f"cannot tune: {exc}", error=str(exc))
        if not knobs:
            return self.finish("end_turn", f"{path} has no tunable knobs (and the task declares none)")
        try:
            return self.tune(path, original, knobs, space)
        except _Stop as stop:  # a tool it cannot do without broke: leave the source as it was, if it still can
            self.context.toolbox.call("write", {"path": path, "content": original})
            return self.finish("end_turn", f"stopped: {stop}", error=str(stop))

    def tune(self, path: str, original: str, knobs: list[Knob], space: Space) -> AgentReport:
        agent = self.agent
        start = current_config(knobs)
        allowed = min(agent.max_evaluations, space.size)
        if self.context.evaluations is not None:  # the role's share of the run's evaluation budget
            allowed = min(allowed, self.context.evaluations)
        if allowed < 1:
            return self.finish("budget", "no evaluations left in this role's share of the round; nothing tried")
        search = proposer(agent.strategy, space, allowed, start, agent.seed)
        known = self.known_failures(space)
        for failed in known:
            search.forbid(failed)
        skipped = len(known)
        results: dict[str, tuple[Config, float, dict[str, Any]]] = {}
        stop: StopReason = "end_turn"
        while (config := search.ask()) is not None:
            if agent.should_stop is not None and agent.should_stop():
                stop = "cancelled"
                break
            if agent.clock() - self.started > agent.max_wall_s:
                break
            self.call("write", {"path": path, "content": apply(original, config, knobs)}, required=True)
            data = self.call("evaluate", {}, required=True).data or {}
            if data.get("refused"):  # the role's share ran out (another agent of the role used it)
                stop = "budget"
                break
            score = _score(data)
            search.tell(config, score)
            if score is None:
                self.note_failure(config, data)
            else:
                results[describe(config)] = (config, score, data)
        best = search.best
        if stop == "cancelled":
            self.call("write", {"path": path, "content": original}, required=True)
            return self.finish(stop, f"cancelled after {search.evaluations} evaluations; source restored")
        if best is None or best.score is None:
            self.call("write", {"path": path, "content": original}, required=True)
            text = (
                f"no config passed ({search.evaluations} tried, {skipped} skipped as known failures); source restored"
            )
            return self.finish(stop, text)
        winner, score, data = results[describe(best.config)]
        baseline = results.get(describe(start))
        if winner == start and agent.strategy != "search":  # nothing better than what it was given: no candidate
            self.call("write", {"path": path, "content": original}, required=True)
            what = "nothing to repair: it passes" if agent.strategy == "repair" else "no config beat it"
            if agent.strategy != "repair":
                self.note_tried(start, score, [r for r in results.values() if r[0] != start])
            text = f"the kernel as given ({describe(start)}, {score:.3f}x geomean): {what}"
            return self.finish(stop, f"{text} ({search.evaluations} configs evaluated); nothing submitted")
        self.note_best(winner, score, data, baseline, search.evaluations, sorted(results.values(), key=lambda r: -r[1]))
        self.call("write", {"path": path, "content": apply(original, winner, knobs)}, required=True)
        own = f"; source's own values {baseline[1]:.3f}x" if baseline else ""
        rationale = f"offline knob tuning: {describe(winner)} gives {score:.3f}x geomean{own}"
        rationale += f" ({search.evaluations} configs evaluated)"
        submitted = self.call("submit_candidate", {"rationale": _clip(rationale, 400)})
        text = f"best {describe(winner)}: {score:.3f}x geomean after {search.evaluations} evaluations"
        if submitted.is_error:
            return self.finish(stop, f"{text}; the submission failed: {submitted.content}", error=submitted.content)
        return self.finish(stop, f"{text}; submitted")

    def read(self, path: str) -> str:
        """The file's text: exactly, from ``view``'s data, else rebuilt from its numbered lines (asking for more
        while the tool cuts it)."""
        lines: list[str] = []
        while True:
            result = self.call("view", {"path": path, "start_line": len(lines) + 1} if lines else {"path": path})
            if result.is_error:
                raise _Stop(f"cannot read {path}: {result.content}")
            exact = (result.data or {}).get("text")
            if not lines and isinstance(exact, str):  # the whole file as it is (line endings included)
                return exact
            rows = [_VIEW_LINE.match(row) for row in result.content.splitlines()]
            lines += [m.group(2) for m in rows if m is not None]
            total = (result.data or {}).get("lines")
            if not isinstance(total, int) or len(lines) >= total or not any(rows):
                return "\n".join(lines) + "\n" if lines else ""

    def known_failures(self, space: Space) -> list[Config]:
        """Configs of this knob space that earlier runs recorded as failed."""
        if "read_knowledge" not in self.context.toolbox:
            return []
        result = self.call("read_knowledge", {"kind": "failed_attempt", "query": MARK})
        found = []
        for match in _CONFIG_LINE.finditer(result.content if not result.is_error else ""):
            try:
                config = json.loads(match.group(1))
            except json.JSONDecodeError:
                continue
            if isinstance(config, dict) and space.contains(config) and config not in found:
                found.append(config)
        return found

    def note_failure(self, config: Config, data: Mapping[str, Any]) -> None:
        status = str(data.get("status", "no evaluation"))
        failures = data.get("failures") or []
        reason = failures[0].get("reason", "") if failures and isinstance(failures[0], dict) else ""
        body = f"config: {json.dumps(config)}\nstatus {status}" + (f": {reason}" if reason else "")
        title = _clip(f"{MARK}: {describe(config)} failed ({status})", 200)
        self.note("failed_attempt", title, body, data, status)

    def note_best(
        self,
        config: Config,
        score: float,
        data: Mapping[str, Any],
        baseline: tuple[Config, float, dict[str, Any]] | None,
        evaluations: int,
        ranked: list[tuple[Config, float, dict[str, Any]]],
    ) -> None:
        versus = f", vs {baseline[1]:.3f}x with the source's own values" if baseline else ""
        title = _clip(f"{MARK}: best {describe(config)} — {score:.3f}x geomean{versus}", 200)
        top = "\n".join(f"- {describe(c)}: {s:.3f}x" for c, s, _ in ranked[:5])
        body = f"config: {json.dumps(config)}\n{evaluations} configs evaluated; the best ones:\n{top}"
        self.note("strategy", title, body, data, "PASSED")

    def note_tried(self, start: Config, score: float, tried: list[tuple[Config, float, dict[str, Any]]]) -> None:
        """Records the configs tried around ``start`` that did not beat it, one ``config:`` line each, so that
        later rounds (this role's and the others') skip them as known failures."""
        if not tried or "write_note" not in self.context.toolbox:
            return
        title = _clip(f"{MARK}: {len(tried)} config(s) tried from {describe(start)}, none faster", 200)
        lines = [f"config: {json.dumps(c)} {s:.3f}x geomean" for c, s, _ in sorted(tried, key=lambda r: -r[1])]
        body = f"{describe(start)} itself: {score:.3f}x geomean (measured in the same round)\n" + "\n".join(lines)
        self.call("write_note", {"kind": "failed_attempt", "title": title, "body": body})

    def note(self, kind: str, title: str, body: str, data: Mapping[str, Any], status: str) -> None:
        if "write_note" not in self.context.toolbox:
            return
        numbers = {
            k: float(v) for k in ("geomean_speedup", "mean_speedup") if isinstance(v := data.get(k), int | float)
        }
        evidence = {"candidate": data.get("solution"), "status": status, "numbers": numbers}
        result = self.call("write_note", {"kind": kind, "title": title, "body": body, "evidence": evidence})
        if result.is_error:  # a store that takes no evidence of this shape still gets the note
            self.call("write_note", {"kind": kind, "title": title, "body": body})

    def call(self, name: str, args: dict[str, Any], required: bool = False) -> ToolResult:
        result = self.context.toolbox.call(name, args)
        self.calls += 1
        first = result.content.strip().splitlines()[0] if result.content.strip() else ""
        shown = {k: (v if k != "content" else f"<{len(v)} chars>") for k, v in args.items()}
        self.emit(
            "tool",
            tool=name,
            input=_clip(json.dumps(shown, default=str), 300),
            is_error=result.is_error,
            result=_clip(first, 300),
            data=result.data,
        )
        if required and result.is_error and result.data is None:
            raise _Stop(f"{name} failed: {_clip(first, 300)}")
        return result

    def finish(self, stop: StopReason, text: str, error: str | None = None) -> AgentReport:
        a = self.context.assignment
        self.emit("stop", usage=Usage(), stop=stop, error=error)
        mine = [s for s in self.context.submissions[self.first_submission :] if s.agent_id == a.agent_id]
        return AgentReport(
            role=a.role.name,
            agent_id=a.agent_id,
            submissions=mine,
            usage=Usage(),
            turns=self.calls,
            stop=stop,
            error=error,
            final_text=text,
        )

    def emit(self, kind: Literal["tool", "stop"], **fields: Any) -> None:
        if self.agent.on_event is not None:
            a = self.context.assignment
            self.agent.on_event(AgentEvent(kind=kind, role=a.role.name, agent_id=a.agent_id, turn=self.calls, **fields))


def _score(data: Mapping[str, Any]) -> float | None:
    """The geomean speedup of a PASSED evaluation; None for anything else."""
    geomean = data.get("geomean_speedup")
    if data.get("status") != "PASSED" or not isinstance(geomean, int | float) or geomean <= 0:
        return None
    return float(geomean)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
