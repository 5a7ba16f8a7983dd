"""Token usage of a claude-code session as the CLI reports it: per model call from the stream events, and in
total from the final result; the two are reconciled when the session ends. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evoteam.roles.llm import Usage

_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_MODEL_USAGE_KEYS = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cache_creation_input_tokens": "cacheCreationInputTokens",
    "cache_read_input_tokens": "cacheReadInputTokens",
}


def usage_of(raw: Mapping[str, Any] | None) -> Usage:
    """A Messages-API ``usage`` object (extra keys ignored, missing or null counters are 0)."""
    raw = raw or {}
    return Usage(**{f: int(raw.get(f) or 0) for f in _FIELDS})


def result_usage(usage: Mapping[str, Any] | None, model_usage: Mapping[str, Mapping[str, Any]] | None) -> Usage:
    """The session's total from the result message: the per-model breakdown when there is one (it also
    counts the CLI's side calls to other models), else the main loop's ``usage``."""
    if model_usage:
        total = Usage()
        for entry in model_usage.values():
            total = total + Usage(**{f: int(entry.get(k) or 0) for f, k in _MODEL_USAGE_KEYS.items()})
        return total
    return usage_of(usage)


def remainder(reported: Usage, charged: Usage) -> Usage:
    """What ``reported`` holds beyond ``charged``, field by field (never negative)."""
    return Usage(**{f: max(0, getattr(reported, f) - getattr(charged, f)) for f in _FIELDS})


class CallMeter:
    """Follows the raw stream events of the session's model calls: ``message_start`` opens a call with its
    input and cache counters, ``message_delta`` updates the (cumulative) counters, ``message_stop`` ends it."""

    def __init__(self) -> None:
        self.current: Usage | None = None
        self.model: str | None = None
        self.calls = 0

    def feed(self, event: Mapping[str, Any]) -> Usage | None:
        """Takes one stream event; returns the usage of the call that it ends, if it ends one."""
        kind = event.get("type")
        if kind == "message_start":
            finished = self.close()
            message = event.get("message") or {}
            self.current = usage_of(message.get("usage"))
            self.model = message.get("model") or self.model
            self.calls += 1
            return finished
        if kind == "message_delta" and self.current is not None:
            delta = event.get("usage") or {}
            self.current = self.current.model_copy(
                update={f: int(delta[f]) for f in _FIELDS if delta.get(f) is not None}
            )
            return None
        if kind == "message_stop":
            return self.close()
        return None

    def close(self) -> Usage | None:
        """Ends the open call (a stream cut short by an interrupt ends here); its usage, or ``None``."""
        finished, self.current = self.current, None
        return finished

    @property
    def in_flight(self) -> Usage:
        return self.current or Usage()
