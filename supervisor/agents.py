"""Which agent plays a role: the backend's agent with a model; offline, a small tool-driven agent per role.

Offline there is no model. Roles that write and submit code are the offline knob tuner, each round with its own
seed, each built-in role with its own strategy (``roles.offline.strategies``: the Optimizer climbs from the
best so far, the Explorer probes configs far from it, the Debugger repairs only what fails); the others are
the rule-based agents of ``roles.offline.roles``, chosen by what the role may do: a role that can veto is the
Disciplinarian, one with ``profile`` the Profiling Scientist, one with ``evaluate`` the Reviewer, one with only
the knowledge tools the Knowledge Integrator. A role that fits none sits the round out (the journal says so).
Every agent is built with the round's event sink and cancel check as constructor arguments (nothing is set on
an agent after it is made).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.agent import EventSink
from evoteam.roles.agent_api import Agent
from evoteam.roles.backends.choose import BackendError, BackendName, make_agent
from evoteam.roles.spec import RoleSpec
from evoteam.supervisor.config import DEFAULT_MAX_TOKENS

_WRITERS = {"write", "submit_candidate", "evaluate", "view"}


AgentFactory = Callable[[RoleSpec, int, int, EventSink, Callable[[], bool]], Agent | None]
"""(role, round, index in the team, event sink, should_stop) → the agent, or None when the role sits out."""


def backend_factory(
    backend: BackendName,
    task: KernelTask,
    env: Mapping[str, str],
    model: str | None,
    evaluations: int,
    seed: int,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> AgentFactory:
    """``max_tokens``: the longest reply of a model-backed agent (the run's ``max_tokens``)."""

    def build(role: RoleSpec, round_number: int, index: int, sink: EventSink, stop: Callable[[], bool]) -> Agent | None:
        if backend == "offline":
            if set(role.tools) >= _WRITERS:
                from evoteam.roles.offline.agent import OfflineTunerAgent
                from evoteam.roles.offline.strategies import STRATEGIES

                return OfflineTunerAgent.for_task(
                    task,
                    max_evaluations=evaluations,
                    seed=seed + 1000 * round_number + index,
                    on_event=sink,
                    should_stop=stop,
                    strategy=STRATEGIES.get(role.name, "search"),
                )
            return offline_role(role, sink)
        if backend == "anthropic":
            return _loop_agent(env, role.model or model, sink, stop, max_tokens)
        if backend == "openai":
            from evoteam.roles.agent import LoopAgent
            from evoteam.roles.backends.choose import openai_llm

            llm, name = openai_llm(env, role.model or model)
            return LoopAgent(llm, name, max_tokens=max_tokens, on_event=sink, should_stop=stop)
        return make_agent(backend, task, env, model=role.model or model)

    return build


def _loop_agent(
    env: Mapping[str, str], model: str | None, sink: EventSink, stop: Callable[[], bool], max_tokens: int
) -> Agent:
    """The tool-loop agent over the Anthropic API, reporting to ``sink`` and polling ``stop``."""
    from evoteam.roles.agent import LoopAgent
    from evoteam.roles.backends.anthropic_api import AnthropicLLM
    from evoteam.roles.backends.settings import AnthropicSettings

    settings = AnthropicSettings.from_env(env, model=model)
    if settings.api_key is None and settings.base_url is None:
        raise BackendError("the anthropic backend needs ANTHROPIC_API_KEY (or an Anthropic-compatible base URL)")
    return LoopAgent(AnthropicLLM(settings), settings.model, max_tokens=max_tokens, on_event=sink, should_stop=stop)


def offline_role(role: RoleSpec, sink: EventSink) -> Agent | None:
    """The rule-based agent of a role that does not write code, or None when none fits its tools."""
    from evoteam.roles.offline.roles import (
        OfflineDisciplinarian,
        OfflineIntegrator,
        OfflineProfiler,
        OfflineReviewer,
    )

    tools = set(role.tools)
    if role.can_veto and "compile" in tools:
        return OfflineDisciplinarian(sink)
    if "profile" in tools:
        return OfflineProfiler(sink)
    if "evaluate" in tools:
        return OfflineReviewer(sink)
    if {"read_knowledge", "write_note"} <= tools:
        return OfflineIntegrator(sink)
    return None
