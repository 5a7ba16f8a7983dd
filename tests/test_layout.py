"""The layout promises of docs/architecture.md, checked on the source: the evaluator's one public API, the
one-way import order of the packages, the stage folders of ``gpu_bench/`` and the picture that shows them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).parent.parent
# Imports flow one way: a package may import those after it, never those before it.
ORDER = ["cli", "server", "supervisor", "roles", "gpu_bench"]
OUTSIDE_EVALUATOR = ["cli", "server", "supervisor", "roles", "benchmarks"]
API = "evoteam.gpu_bench.api"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, ``from evoteam.x import y`` counted as ``evoteam.x.y``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def python_files(folder: str) -> list[Path]:
    return sorted(path for path in (REPO / folder).rglob("*.py") if "node_modules" not in path.parts)


def test_code_outside_the_evaluator_uses_only_its_public_api() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for folder in OUTSIDE_EVALUATOR
        for path in python_files(folder)
        for line, module in imported_modules(path)
        if module.startswith("evoteam.gpu_bench") and not module.startswith(f"{API}.")
    ]
    assert offenders == [], "import the evaluator through evoteam.gpu_bench.api:\n" + "\n".join(offenders)


def test_every_api_name_is_exported_and_importable() -> None:
    import evoteam.gpu_bench.api as api

    tree = ast.parse((REPO / "gpu_bench" / "api.py").read_text())
    bound = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module != "__future__"
        for alias in node.names
    }
    assert bound == set(api.__all__)
    assert all(hasattr(api, name) for name in api.__all__)


def test_packages_import_only_those_after_them() -> None:
    offenders = []
    for rank, package in enumerate(ORDER):
        before = ORDER[:rank]
        for path in python_files(package):
            for line, module in imported_modules(path):
                parts = module.split(".")
                if parts[0] == "evoteam" and len(parts) > 1 and parts[1] in before:
                    offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert offenders == [], "imports must flow cli → server → supervisor → roles → gpu_bench:\n" + "\n".join(offenders)


def test_the_evaluator_top_level_stays_small_and_staged() -> None:
    root = REPO / "gpu_bench"
    loose = sorted(path.name for path in root.glob("*.py"))
    stages = sorted(path.name for path in root.iterdir() if (path / "__init__.py").is_file())
    assert len(loose) <= 10, loose
    assert {
        "schema",
        "build",
        "bindings",
        "worker",
        "verify",
        "timing",
        "profile",
        "interop",
        "remote",
        "sandbox",
    } <= set(stages)


def test_the_architecture_picture_names_every_stage_folder() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    root = REPO / "gpu_bench"
    folders = sorted(str(path.parent.relative_to(root)) for path in root.rglob("__init__.py") if path.parent != root)
    modules = sorted(path.name for path in root.glob("*.py") if path.name != "__init__.py")
    missing = [f"{name}/" for name in folders if f"{name.rsplit('/', 1)[-1]}/" not in text]
    missing += [name for name in modules if name not in text]
    assert missing == [], f"docs/architecture.md does not show: {missing}"
