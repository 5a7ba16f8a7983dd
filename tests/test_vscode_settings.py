"""The VS Code extension's settings (``vscode-extension/package.json``) mirror the language server's: the same
names, types, defaults, choices and bounds as ``server.settings.Settings``, plus the extension's own
``CLIENT_ONLY`` ones (which the server neither uses nor reports as unknown)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from annotated_types import Ge, Le
from pydantic.fields import FieldInfo

from evoteam.server.settings import CLIENT_ONLY, SECTION, Settings

pytestmark = pytest.mark.unit

MANIFEST = Path(__file__).resolve().parent.parent / "vscode-extension" / "package.json"


def contributed() -> dict[str, dict[str, Any]]:
    properties = json.loads(MANIFEST.read_text())["contributes"]["configuration"]["properties"]
    assert all(key.startswith(f"{SECTION}.") for key in properties)
    return {key.removeprefix(f"{SECTION}."): value for key, value in properties.items()}


def expected(field: FieldInfo) -> dict[str, Any]:
    """What package.json should say of a server setting."""
    found: dict[str, Any] = {"default": field.default}
    annotation = field.annotation
    if typing.get_origin(annotation) is typing.Literal:
        found |= {"type": "string", "enum": list(typing.get_args(annotation))}
    elif annotation is bool:
        found["type"] = "boolean"
    elif annotation is int:
        found["type"] = "integer"
    elif annotation is str:
        found["type"] = "string"
    elif annotation == str | None:
        found["type"] = ["string", "null"]
    elif annotation == list[str]:
        found |= {"type": "array", "items": {"type": "string"}}
    else:
        raise AssertionError(f"no JSON type for {annotation}")
    for rule in field.metadata:
        if isinstance(rule, Ge):
            found["minimum"] = rule.ge
        elif isinstance(rule, Le):
            found["maximum"] = rule.le
        elif getattr(rule, "pattern", None) is not None:
            found["pattern"] = rule.pattern
    return found


def test_every_server_setting_is_contributed_with_its_type_default_and_bounds() -> None:
    properties = contributed()
    assert set(properties) == set(Settings.model_fields) | CLIENT_ONLY
    for name, field in Settings.model_fields.items():
        shown = {k: v for k, v in properties[name].items() if k != "description"}
        assert shown == expected(field), name
        assert properties[name]["description"], f"{name} has no description"


def test_the_extensions_own_settings_are_known_to_the_server() -> None:
    properties = contributed()
    assert {"python"} == CLIENT_ONLY
    assert properties["python"]["type"] == ["string", "null"] and properties["python"]["default"] is None
