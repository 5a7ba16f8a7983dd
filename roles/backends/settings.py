"""``EndpointSettings`` (what any model backend needs to reach its API) and ``AnthropicSettings``: how the
``anthropic`` backend reaches the Messages API, resolved once from explicit values and the environment
(``with_environment``); the API key is a ``SecretStr`` and never shows in repr, str, JSON or logs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

DEFAULT_MODEL = "claude-sonnet-4-6"

# Environment variables, in order of precedence for each setting.
ENV_API_KEY = ("ANTHROPIC_API_KEY",)
ENV_API_KEY_FILE = "EVOTEAM_API_KEY_FILE"
"""A file that holds the key (read when no key is given otherwise); the sandbox hides it from candidates."""
ENV_BASE_URL = ("EVOTEAM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
ENV_MODEL = ("EVOTEAM_MODEL",)


def with_environment(
    values: dict[str, Any], env: Mapping[str, str], fields: tuple[tuple[str, tuple[str, ...]], ...]
) -> dict[str, Any]:
    """``values`` with each field given as None (or not given) taken from the first set variable of its names
    in ``env`` (empty ones count as unset), else left to the model's default."""
    out = dict(values)
    for field, names in fields:
        if out.get(field) is None:
            found = next((env[n] for n in names if env.get(n)), None)
            if found is not None:
                out[field] = found
            else:
                out.pop(field, None)
    return out


class EndpointSettings(BaseModel):
    """What every model backend needs to reach its API: the model, a base URL, the key (a ``SecretStr``),
    timeouts and our retries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """Used when a request names no model."""
    base_url: str | None = None
    """``None``: the provider's own API; or any compatible server."""
    api_key: SecretStr | None = None
    """Required for the provider's API; a server at ``base_url`` may need none (a placeholder is sent)."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Per attempt: the wait for a response, and for streams the longest pause between two chunks."""
    max_retries: int = Field(default=5, ge=0)
    """Retries after the first attempt, made by our loop (the SDK's own retries are off)."""
    retry_base_s: float = Field(default=1.0, ge=0)
    retry_cap_s: float = Field(default=60.0, ge=0)

    def key(self) -> str | None:
        """The key itself, for the one place that builds the client."""
        return self.api_key.get_secret_value() if self.api_key is not None else None


class AnthropicSettings(EndpointSettings):
    model: str = DEFAULT_MODEL
    stream_threshold: int = Field(default=16_000, gt=0)
    """Calls with ``max_tokens`` at or above this stream (the SDK refuses long non-streaming calls)."""
    exact_count: bool = False
    """``count_tokens`` asks the API's token-counting endpoint instead of estimating offline."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **values: Any) -> AnthropicSettings:
        """Explicit ``values`` win; then the environment (``ANTHROPIC_API_KEY``, else the file that
        ``EVOTEAM_API_KEY_FILE`` names; ``EVOTEAM_ANTHROPIC_BASE_URL`` or ``ANTHROPIC_BASE_URL``; ``EVOTEAM_MODEL``);
        then the defaults. Empty variables count as unset. An unreadable key file is a ``BackendError`` that names
        the file, never its content."""
        source = os.environ if env is None else env
        key_file = source.get(ENV_API_KEY_FILE)
        if values.get("api_key") is None and not any(source.get(n) for n in ENV_API_KEY) and key_file:
            try:
                values["api_key"] = Path(key_file).expanduser().read_text(encoding="utf-8").strip() or None
            except (OSError, UnicodeDecodeError) as exc:
                from evoteam.roles.backends.choose import BackendError

                why = type(exc).__name__
                raise BackendError(f"{ENV_API_KEY_FILE}={key_file}: cannot read the key file ({why})") from None
        return cls(
            **with_environment(
                values, source, (("api_key", ENV_API_KEY), ("base_url", ENV_BASE_URL), ("model", ENV_MODEL))
            )
        )
