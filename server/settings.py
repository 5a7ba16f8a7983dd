"""The editor's ``evoteam`` settings (``workspace/configuration``), validated field by field: a bad value is
reported and replaced by its default, and the good ones are kept."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SECTION = "evoteam"
NULLABLE = frozenset({"model", "cudaArch"})
"""Settings whose ``null`` means something (the default choice), not "unset"."""
CLIENT_ONLY = frozenset({"python"})
"""Settings of the section that the editor's extension reads itself (the interpreter that starts the server):
not the server's, not unknown."""


class Settings(BaseModel):
    """The editor's ``evoteam`` settings section: the options of a run."""

    model_config = ConfigDict(extra="forbid")
    budget: int = Field(default=200_000, ge=0, description="hard token budget of a run")
    team: Literal["single", "fixed", "evolving"] = "evolving"
    llm: Literal["auto", "anthropic", "openai", "claude-code", "offline"] = "auto"
    runner: str = Field(default="local", pattern=r"^(local|ray|ssh://\S+|ray://\S+)$")
    model: str | None = None
    rounds: int = Field(default=3, ge=1, le=1000)
    evaluations: int = Field(default=6, ge=1, le=10_000, description="offline tuner: evaluations per agent and round")
    unsafeNoSandbox: bool = Field(  # noqa: N815 (the editor's setting name)
        default=False, description="run agent-generated code even where no sandbox (bubblewrap) is possible"
    )
    # diagnostics of kernel files (server/file_check.py), not options of a run
    cudaArch: str | None = Field(  # noqa: N815
        default=None,
        pattern=r"^sm_\d+[a-z]?$",
        description="target of CUDA files that are no task (none: the local GPU's, else sm_90a)",
    )
    includePaths: list[str] = Field(  # noqa: N815
        default=[], description="include folders for the diagnostics of kernel files (relative to the workspace)"
    )
    compileOnChange: bool = Field(  # noqa: N815
        default=True, description="compile kernel files while typing (debounced), not only on open and save"
    )


def parse_settings(raw: Any) -> tuple[Settings, list[str]]:
    """The settings in ``raw`` (what the client sent for the section), and one problem line per bad field."""
    if raw is None:
        return Settings(), []
    if not isinstance(raw, dict):
        return Settings(), [f"evoteam settings must be an object, got {type(raw).__name__}; using the defaults"]
    problems = []
    good: dict[str, Any] = {}
    fields = Settings.model_fields
    for key, value in raw.items():
        if key in CLIENT_ONLY:
            continue
        if key not in fields:
            problems.append(f"evoteam.{key}: unknown setting (ignored)")
            continue
        if value is None and key not in NULLABLE:
            continue
        try:
            Settings.model_validate({key: value})
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            problems.append(f"evoteam.{key}: {reason} (got {value!r}); using {getattr(Settings(), key)!r}")
            continue
        good[key] = value
    return Settings.model_validate(good), problems
