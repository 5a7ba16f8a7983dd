"""Which agent plays a role: the backend's agent for roles that write code, small tool-driven agents offline.

Offline there is no model: roles that write and submit code (Optimizer, Debugger, Explorer) are the offline
knob tuner, each round with its own seed so rounds explore different configs; the Profiling Scientist profiles
the current kernel and records what it measured as a hardware note. Other roles have no offline behaviour and
sit the round out (the journal says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from evoteam.gpu_bench.task import KernelTask
from evoteam.roles.agent import AgentEvent, EventSink
from evoteam.roles.agent_api import Agent, AgentContext, AgentReport
from evoteam.roles.backends.choose import BackendName, make_agent
from evoteam.roles.spec import RoleSpec

_WRITERS = {"write", "submit_candidate", "evaluate", "view"}


class OfflineProfiler:
    """Profiles the workspace's kernel with the ``profile`` tool and records the result as a hardware note."""

    def __init__(self, on_event: EventSink | None = None) -> None:
        self.on_event = on_event

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        result = context.toolbox.call("profile", {})
        if self.on_event is not None:
            self.on_event(
                AgentEvent(
                    kind="tool",
                    role=a.role.name,
                    agent_id=a.agent_id,
                    turn=1,
                    tool="profile",
                    is_error=result.is_error,
                    result=result.content.splitlines()[0] if result.content else "",
                )
            )
        if not result.is_error and "write_note" in context.toolbox:
            lines = result.content.splitlines()
            context.toolbox.call(
                "write_note",
                {
                    "kind": "hardware",
                    "title": f"profile of round {a.round}: " + (lines[0] if lines else "")[:150],
                    "body": "\n".join(lines[:40]),
                },
            )
        return AgentReport(
            role=a.role.name,
            agent_id=a.agent_id,
            turns=1,
            stop="end_turn",
            error=result.content if result.is_error else None,
            final_text=result.content[:2000],
        )


AgentFactory = Callable[[RoleSpec, int, int, EventSink, Callable[[], bool]], Agent | None]
"""(role, round, index in the team, event sink, should_stop) → the agent, or None when the role sits out."""


def backend_factory(
    backend: BackendName, task: KernelTask, env: Mapping[str, str], model: str | None, evaluations: int, seed: int
) -> AgentFactory:
    def build(role: RoleSpec, round_number: int, index: int, sink: EventSink, stop: Callable[[], bool]) -> Agent | None:
        if backend == "offline":
            if set(role.tools) >= _WRITERS:
                from evoteam.roles.offline.agent import OfflineTunerAgent

                return OfflineTunerAgent.for_task(
                    task,
                    max_evaluations=evaluations,
                    seed=seed + 1000 * round_number + index,
                    on_event=sink,
                    should_stop=stop,
                )
            if "profile" in role.tools:
                return OfflineProfiler(on_event=sink)
            return None
        from evoteam.roles.agent import LoopAgent

        agent = make_agent(backend, task, env, model=role.model or model)
        if isinstance(agent, LoopAgent):
            agent.on_event, agent.should_stop = sink, stop
        return agent

    return build
