"""A run's configuration (the ``run_started`` event's payload) and where a run's files live under ``.evoteam/``."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.budget import Price
from evoteam.supervisor.team import TeamMode

StopReason = Literal["rounds", "budget", "target", "cancelled", "error"]
DEFAULT_MAX_TOKENS = 4096
"""The longest reply of a model-backed agent unless the run says otherwise (``--max-tokens``)."""
LlmChoice = Literal["auto", "anthropic", "openai", "claude-code", "offline"]


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: str
    kernel: str
    config: str
    """The evoteam.toml that defines the kernel (absolute)."""
    mode: TeamMode = "evolving"
    rounds: int = Field(default=3, ge=1)
    budget: int = Field(default=200_000, ge=0)
    llm: LlmChoice = "auto"
    runner: str = "local"
    model: str | None = None
    target_speedup: float | None = Field(default=None, gt=0)
    min_effect: float = Field(default=0.02, ge=0)
    """A candidate is the best only if its speedup over the start is significant: the lower end of its 95%
    interval above 1 + this."""
    retime_top: int = Field(default=3, ge=0)
    """Before a round's best is named, its best few contenders (significant, faster than the best so far) are
    timed again against the start, and only a re-timed candidate whose re-timed geomean still exceeds
    1 + ``min_effect`` can be the best, ranked on its re-timed figures: the figures a best is named on never
    come from the measurement that singled it out. 0: no re-timing (the first measurement decides)."""
    evaluations_per_agent: int = Field(default=6, ge=1)
    """The offline tuner's evaluations per agent and round."""
    evaluation_budget: int | None = Field(default=None, ge=1)
    """The run's agents may call ``evaluate`` this many times in all (None: no limit). Each round gets what is
    left divided by the rounds left, split between its roles that evaluate by their weights, as tokens are;
    a call over a role's share is refused. Offline, where no tokens are spent, this is the budget that makes
    two teams' runs the same size (``evoteam compare``)."""
    knowledge: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.@+-]*$")
    """The knowledge store the run reads and writes: ``.evoteam/knowledge/<this>/``; None: the kernel's own
    (``.evoteam/knowledge/<kernel>/``), shared by its runs. ``evoteam compare`` gives each run its own."""
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    """The longest reply of a model-backed agent (a model's own limit may be lower)."""
    max_turns: int | None = Field(default=None, gt=0)
    """Model turns per agent and round at most; None: the backend's default (30). A safety net: the token
    budget is the limit that matters."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Prices (USD per million tokens) by model name prefix, over the built-in table
    (``roles.budget.DEFAULT_PRICES``): what the run's dollars are counted with."""
    seed: int = 0
    unsafe_no_sandbox: bool = False
    """The user let agent-generated code run without the sandbox (``--unsafe-no-sandbox``); resume keeps it."""


def new_run_id(kernel: str, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in kernel)
    return f"{safe}-{stamp}-{secrets.token_hex(2)}"


def state_dir(repo_root: Path) -> Path:
    """``.evoteam/`` of the repository; it ignores itself (``.gitignore`` with ``*``), so ``git status`` of the
    user's repository does not change."""
    path = repo_root / ".evoteam"
    path.mkdir(exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# evoteam's run state and knowledge (not part of your sources)\n*\n")
    return path


def task_config(repo_root: Path, journaled: str | Path) -> Path:
    """The evoteam.toml of a run in ``repo_root``: the journaled (absolute) path, or, for a repository that was
    moved or copied since the run started, the same path below ``repo_root`` (its longest tail that exists)."""
    path = Path(journaled)
    root = repo_root.resolve()
    try:
        path.resolve().relative_to(root)
        return path
    except ValueError:
        pass
    for start in range(1, len(path.parts)):
        moved = root.joinpath(*path.parts[start:])
        if moved.is_file():
            return moved
    return path


def run_dir(repo_root: Path, run: str) -> Path:
    return state_dir(repo_root) / "runs" / run


def journal_path(repo_root: Path, run: str) -> Path:
    """``.evoteam/runs/<run>/journal.jsonl``."""
    return run_dir(repo_root, run) / "journal.jsonl"
