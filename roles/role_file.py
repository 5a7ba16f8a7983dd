"""User roles from TOML: ``[[role]]`` tables that add roles or override built-ins; every error names the file.

A table whose name is a built-in's overrides only the keys it sets (``model = "..."`` alone is fine); a new
role needs ``mission`` (inline) or ``mission_file`` (relative to the TOML file) and ``tools``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam.roles.builtin import builtin_roles
from evoteam.roles.prompt import PromptError, template_variables
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.base import TOOL_NAMES


class RoleFileError(ValueError):
    """A role file is missing, not TOML, or holds an invalid role; the message names the file and the role."""


class RoleEntry(BaseModel):
    """One ``[[role]]`` table as written (everything but the name optional, for overrides)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str | None = None
    mission: str | None = None
    mission_file: str | None = None
    tools: list[str] | None = None
    model: str | None = None
    budget_share: float | None = Field(default=None, gt=0)
    can_veto: bool | None = None


def load_role_file(path: Path) -> list[RoleSpec]:
    """The roles ``path`` defines, each complete (overrides merged onto their built-in), in file order."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RoleFileError(f"cannot read role file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RoleFileError(f"{path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"role"})
    if unknown:
        raise RoleFileError(f"{path}: unknown top-level key(s) {unknown}; roles go in [[role]] tables")
    tables = data.get("role", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise RoleFileError(f"{path}: 'role' must be an array of tables ([[role]])")
    builtins = builtin_roles()
    roles: list[RoleSpec] = []
    for number, table in enumerate(tables, 1):
        where = f"{path}: role {number}" + (f" ({table['name']!r})" if isinstance(table.get("name"), str) else "")
        role = _role(table, path.parent, builtins, where)
        if any(r.name == role.name for r in roles):
            raise RoleFileError(f"{where}: a role named {role.name!r} is already defined in this file")
        roles.append(role)
    return roles


def team_roles(path: Path | None = None) -> dict[str, RoleSpec]:
    """The built-in roles, with the roles of ``path`` (if given) added or overriding them."""
    roles = builtin_roles()
    for role in load_role_file(path) if path is not None else []:
        roles[role.name] = role
    return roles


def _role(table: dict[str, Any], folder: Path, builtins: dict[str, RoleSpec], where: str) -> RoleSpec:
    try:
        entry = RoleEntry.model_validate(table)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(table)"
        raise RoleFileError(f"{where}: {key}: {err['msg']}") from None
    if entry.mission is not None and entry.mission_file is not None:
        raise RoleFileError(f"{where}: give either mission or mission_file, not both")
    mission = entry.mission
    if entry.mission_file is not None:
        mission_path = Path(entry.mission_file).expanduser()
        mission_path = mission_path if mission_path.is_absolute() else folder / mission_path
        try:
            mission = mission_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RoleFileError(f"{where}: cannot read mission_file {mission_path}: {exc.strerror}") from None
    base = builtins.get(entry.name)
    values: dict[str, Any] = base.model_dump() if base is not None else {"name": entry.name}
    given = entry.model_dump(exclude={"mission_file"}, exclude_none=True)
    if mission is not None:
        given["mission"] = mission
    values.update(given)
    missing = [key for key in ("mission", "tools") if key not in values]
    if missing:
        need = " and ".join("mission (or mission_file)" if k == "mission" else k for k in missing)
        raise RoleFileError(f"{where}: a new role needs {need}")
    unknown = [t for t in values["tools"] if t not in TOOL_NAMES]
    if unknown:
        raise RoleFileError(f"{where}: unknown tool(s) {unknown}; tools: {', '.join(TOOL_NAMES)}")
    if not str(values["mission"]).strip():
        raise RoleFileError(f"{where}: the mission is empty")
    try:
        template_variables(values["mission"], f"{where}: mission")
    except PromptError as exc:
        raise RoleFileError(str(exc)) from None
    try:
        return RoleSpec.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RoleFileError(f"{where}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
