"""The built-in roles (missions in ``roles/prompts/<role>.md``) and the verdict line that reviewing roles end with."""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evoteam.roles.prompt import package_prompt, template_variables
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.base import TOOL_NAMES

READ = ["view", "list", "history", "diff"]
EDIT = ["write", "str_replace", "patch", "delete"]
KNOW = ["read_knowledge", "write_note"]
ALL_TOOLS = list(TOOL_NAMES)

_ROLES: list[tuple[str, str, list[str], float, bool]] = [
    # name, one-line description, tools, budget share, can veto
    ("Optimizer", "makes the kernel faster one measured change at a time", ALL_TOOLS, 1.0, False),
    (
        "Debugger",
        "makes a failing candidate correct again",
        [*READ, *EDIT, "compile", "assembly", "test", "evaluate", "sanitize", *KNOW, "submit_candidate"],
        0.7,
        False,
    ),
    (
        "Profiling Scientist",
        "finds where the time goes, with numbers",
        [*READ, "compile", "assembly", "evaluate", "profile", "sanitize", *KNOW],
        0.6,
        False,
    ),
    ("Knowledge Integrator", "keeps the knowledge store short, true and usable", [*READ, *KNOW], 0.3, False),
    (
        "Disciplinarian",
        "checks each change against the constraints and 'one measurable change at a time'; can veto",
        [*READ, "compile", "assembly", *KNOW],
        0.3,
        True,
    ),
    ("Explorer", "tries a radically different design", ALL_TOOLS, 1.0, False),
    (
        "Reviewer",
        "looks for suspicious speedups and cheating patterns",
        [*READ, "compile", "assembly", "test", "evaluate", *KNOW],
        0.4,
        False,
    ),
]

BUILTIN_NAMES = tuple(r[0] for r in _ROLES)


def prompt_name(role: str) -> str:
    """``Profiling Scientist`` → ``profiling_scientist`` (its file in ``roles/prompts``)."""
    return re.sub(r"[^a-z0-9]+", "_", role.lower()).strip("_")


@cache
def _builtin_roles() -> dict[str, RoleSpec]:
    roles = {}
    for name, description, tools, share, veto in _ROLES:
        mission = package_prompt(prompt_name(name))
        template_variables(mission, f"roles/prompts/{prompt_name(name)}.md")
        roles[name] = RoleSpec(
            name=name, description=description, mission=mission, tools=tools, budget_share=share, can_veto=veto
        )
    return roles


def builtin_roles() -> dict[str, RoleSpec]:
    """Every built-in role by name (copies: changing one does not change the next caller's)."""
    return {n: r.model_copy(deep=True) for n, r in _builtin_roles().items()}


def builtin_role(name: str) -> RoleSpec:
    roles = builtin_roles()
    if name not in roles:
        raise KeyError(f"no built-in role named {name!r}; built-ins: {', '.join(BUILTIN_NAMES)}")
    return roles[name]


class Verdict(BaseModel):
    """The last ``VERDICT:`` line of a reviewing role's answer."""

    model_config = ConfigDict(extra="forbid")
    decision: Literal["approve", "veto", "suspicious"]
    reason: str = ""


_VERDICT = re.compile(r"^\s*\**VERDICT\**\s*:\s*\**\s*(approve|veto|suspicious)\b\**\s*(?:[—:-]+\s*)?(.*)$", re.I)


def parse_verdict(text: str) -> Verdict | None:
    """The verdict of an answer (its last ``VERDICT: approve|veto|suspicious — reason`` line), or None."""
    for line in reversed(text.splitlines()):
        match = _VERDICT.match(line)
        if match:
            return Verdict.model_validate({"decision": match.group(1).lower(), "reason": match.group(2).strip()})
    return None
