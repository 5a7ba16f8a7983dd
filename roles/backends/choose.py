"""Picks and builds the agent backend a run asks for; with no choice and no API key, the offline tuner.

``auto`` means: the Anthropic API when a key (or an Anthropic-compatible base URL) is configured, else the
offline knob tuner, which needs nothing. ``scripted`` is for tests and is built with its script, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.agent_api import Agent
from evoteam.roles.llm import LLM

BackendName = Literal["anthropic", "openai", "claude-code", "offline"]
CHOICES = ("auto", "anthropic", "openai", "claude-code", "offline")


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
    if choice == "openai":
        return "openai"
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
    if name == "openai":
        from evoteam.roles.agent import LoopAgent

        return LoopAgent(*openai_llm(env, model))
    try:
        from evoteam.roles.backends.claude_code import ClaudeCodeAgent, ClaudeCodeSettings
    except ImportError as exc:
        raise BackendError(f"the claude-code backend needs `pip install evoteam[claude-code]`: {exc}") from None
    return ClaudeCodeAgent(ClaudeCodeSettings(model=model))


def openai_llm(env: Mapping[str, str], model: str | None = None) -> tuple[LLM, str]:
    """The OpenAI-compatible model and its name, from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` (or
    ``EVOTEAM_OPENAI_BASE_URL``) and ``EVOTEAM_OPENAI_MODEL``, ``model`` first."""
    from evoteam.roles.backends.openai_api import OpenAILLM, OpenAISettings

    settings = OpenAISettings.from_env(env, model=model)
    if settings.api_key is None and settings.base_url is None:
        raise BackendError("the openai backend needs OPENAI_API_KEY (or an OpenAI-compatible OPENAI_BASE_URL)")
    return OpenAILLM(settings), settings.model
