"""Picks and builds the agent backend a run asks for; with no choice and no API key, the offline tuner.

``auto`` means: the Anthropic API when a key (or an Anthropic-compatible base URL) is configured, else the
offline knob tuner, which needs nothing. ``scripted`` is for tests and is built with its script, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.agent_api import Agent

BackendName = Literal["anthropic", "claude-code", "offline"]
CHOICES = ("auto", "anthropic", "claude-code", "offline")


class BackendError(ValueError):
    """An unknown backend, or one that cannot be built here; the message says what to do."""


def choose_backend(requested: str | None, env: Mapping[str, str]) -> BackendName:
    choice = (requested or "auto").strip().lower()
    if choice not in CHOICES:
        raise BackendError(f"unknown agent backend {requested!r}; choose one of {', '.join(CHOICES)}")
    if choice == "auto":
        from evoteam.roles.backends.settings import AnthropicSettings

        settings = AnthropicSettings.from_env(env)
        return "anthropic" if settings.api_key is not None or settings.base_url is not None else "offline"
    if choice == "anthropic":
        return "anthropic"
    if choice == "claude-code":
        return "claude-code"
    return "offline"


def make_agent(
    name: BackendName,
    task: KernelTask,
    env: Mapping[str, str],
    model: str | None = None,
    max_evaluations: int = 24,
    seed: int = 0,
) -> Agent:
    """A ready agent of backend ``name`` for ``task`` (the Anthropic client is built here, without a call)."""
    if name == "offline":
        from evoteam.roles.offline.agent import OfflineTunerAgent

        return OfflineTunerAgent.for_task(task, max_evaluations=max_evaluations, seed=seed)
    if name == "anthropic":
        from evoteam.roles.agent import LoopAgent
        from evoteam.roles.backends.anthropic_api import AnthropicLLM
        from evoteam.roles.backends.settings import AnthropicSettings

        settings = AnthropicSettings.from_env(env, model=model)
        if settings.api_key is None and settings.base_url is None:
            raise BackendError("the anthropic backend needs ANTHROPIC_API_KEY (or an Anthropic-compatible base URL)")
        return LoopAgent(AnthropicLLM(settings), settings.model)
    try:
        from evoteam.roles.backends.claude_code import ClaudeCodeAgent, ClaudeCodeSettings
    except ImportError as exc:
        raise BackendError(f"the claude-code backend needs `pip install evoteam[claude-code]`: {exc}") from None
    return ClaudeCodeAgent(ClaudeCodeSettings(model=model))
