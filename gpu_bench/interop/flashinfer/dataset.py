"""Reads a FlashInfer Trace dataset folder as FlashInfer-Bench lays it out: ``definitions/<op_type>/<name>.json``,
``workloads/<op_type>/<name>.jsonl`` and ``solutions/<op_type>/<name>/<solution>.json`` (blobs relative to the
folder). Where no folder is named, FlashInfer-Bench's own default: ``$FIB_DATASET_PATH``, else
``~/.cache/flashinfer_bench/dataset``.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from evoteam.gpu_bench.schema import Definition, Solution, Workload
from evoteam.gpu_bench.task import TaskError, load_definition, load_solution, load_workloads

DATASET_ENV = "FIB_DATASET_PATH"


class DatasetError(ValueError):
    """The folder is not a FlashInfer Trace dataset, or a pattern selects nothing; the message says why."""


def dataset_path(given: Path | None = None) -> Path:
    """``given``, else ``$FIB_DATASET_PATH``, else FlashInfer-Bench's default cache folder."""
    if given is not None:
        return given
    value = os.environ.get(DATASET_ENV)
    if value:
        return Path(value).expanduser()
    return Path.home() / ".cache" / "flashinfer_bench" / "dataset"


def load_definitions(dataset: Path) -> dict[str, tuple[Definition, Path]]:
    """Every definition of the dataset by name, with its file."""
    folder = dataset / "definitions"
    if not folder.is_dir():
        raise DatasetError(f"{dataset} is not a FlashInfer Trace dataset (no definitions/ folder)")
    found: dict[str, tuple[Definition, Path]] = {}
    for path in sorted(folder.rglob("*.json")):
        try:
            definition = load_definition(path)
        except TaskError as exc:
            raise DatasetError(str(exc)) from None
        if definition.name in found:
            raise DatasetError(f"definition {definition.name!r} appears twice: {found[definition.name][1]}")
        found[definition.name] = (definition, path)
    if not found:
        raise DatasetError(f"{folder} holds no definition JSON")
    return found


def select(names: list[str], patterns: list[str]) -> list[str]:
    """The names matching any of ``patterns`` (shell patterns), in pattern order; all of them without any. A
    pattern that matches nothing is an error."""
    if not patterns:
        return sorted(names)
    chosen: list[str] = []
    for pattern in patterns:
        matches = sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))
        if not matches:
            raise DatasetError(f"no definition matches {pattern!r}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def dataset_workloads(definition: Definition, dataset: Path) -> list[Workload]:
    """The definition's workloads in the dataset (none when it has no file); TaskError when unreadable."""
    path = dataset / "workloads" / definition.op_type / f"{definition.name}.jsonl"
    return load_workloads(path) if path.is_file() else []


def dataset_solutions(definition: Definition, dataset: Path) -> list[tuple[Path, Solution | str]]:
    """The definition's solutions in the dataset, each loaded or with the reason it cannot be."""
    folder = dataset / "solutions" / definition.op_type / definition.name
    found: list[tuple[Path, Solution | str]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            solution = load_solution(path)
        except TaskError as exc:
            found.append((path, str(exc)))
            continue
        if solution.definition != definition.name:
            found.append((path, f"it is for definition {solution.definition!r}, not {definition.name!r}"))
            continue
        found.append((path, solution))
    return found
