"""What "Create evoteam.toml entry for this kernel" writes for a kernel file that is not a task yet: a
``[[kernel]]`` entry (appended to the nearest evoteam.toml in the repository, or in a new one beside the file), a
definition template and a workloads file with one workload, baseline ``source``. Plain data and files; no
lsprotocol here (the code action turns a ``Scaffold`` into a WorkspaceEdit, its fallback command writes it)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from evoteam.gpu_bench.api import CONFIG_NAME, Definition, Workload, find_config, load_tasks

LANGUAGES = {".cpp": ("cpp", "c"), ".cc": ("cpp", "c"), ".cu": ("cuda", "c"), ".py": ("python", "python")}
"""Kernel file suffix → (language, binding) of its scaffold."""
CUDA_TARGET = "sm_90a"
_ENTRY = {
    "cpp": re.compile(r'extern\s+"C"\s+(?:[\w:<>*&\s]+?)\b(\w+)\s*\('),
    "cuda": re.compile(r'extern\s+"C"\s+(?!__global__)(?:[\w:<>*&\s]+?)\b(\w+)\s*\('),
    "python": re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE),
}


@dataclass(frozen=True)
class Scaffold:
    name: str
    """The new task's name."""
    config: Path
    config_exists: bool
    entry: str
    """The TOML text to append to ``config`` (its whole text when it is new)."""
    files: dict[Path, str]
    """New files: the definition template and the workloads."""


def can_scaffold(path: Path) -> bool:
    return path.suffix in LANGUAGES


def scaffold_for(path: Path, text: str, root: Path, config_text: str | None = None) -> Scaffold:
    """The scaffold of kernel file ``path`` (its text ``text``) in repository ``root``. ``config_text`` is the
    nearest evoteam.toml's text when the editor has it open. Raises ``TaskError`` when that file is invalid."""
    language, binding = LANGUAGES[path.suffix]
    config = config_for(path, root)
    exists = config.is_file()
    taken = {t.name for t in load_tasks(config)} if exists else set()
    name = _unique(_identifier(path.stem), taken)
    definition = _free(path.parent / f"{name}.definition.json")
    workloads = _free(path.parent / f"{name}.workloads.jsonl")
    fields = {
        "name": name,
        "source": _relative(path, config),
        "language": language,
        "binding": binding,
        "entry": _entry_point(text, language, path.stem),
        "definition": _relative(definition, config),
        "workloads": _relative(workloads, config),
        "baseline": "source",
    }
    entry = _todo(path, definition, workloads) + "[[kernel]]\n"
    entry += "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    if language == "cuda":
        entry += f'target = "{CUDA_TARGET}"  # TODO: your GPU\'s architecture\n'
    if exists:
        before = config_text if config_text is not None else config.read_text()
        entry = ("\n" if before.endswith("\n") else "\n\n") + entry if before.strip() else entry
    else:
        entry = f"# Kernel tasks of this folder: one [[kernel]] per kernel file; paths are relative to it.\n\n{entry}"
    return Scaffold(name, config, exists, entry, {definition: _definition(name), workloads: _workloads(name)})


def config_for(path: Path, root: Path) -> Path:
    """The evoteam.toml the entry of ``path`` goes to: the nearest one in the repository, else a new one beside it."""
    config = find_config(path.parent)
    if config is None or not _under(config, root):
        return path.parent / CONFIG_NAME
    return config


def write(scaffold: Scaffold) -> list[Path]:
    """Writes the scaffold to disk (new files exclusively, the entry appended); the files written."""
    for path, text in scaffold.files.items():
        with path.open("x") as out:
            out.write(text)
    with scaffold.config.open("a") as out:
        out.write(scaffold.entry)
    return [scaffold.config, *scaffold.files]


def _todo(path: Path, definition: Path, workloads: Path) -> str:
    return (
        f"# TODO: a scaffold for {path.name}: describe what it computes in {definition.name} (axes, inputs,\n"
        f"# outputs, reference) and its shapes in {workloads.name}. The baseline is the file as it is now.\n"
    )


def _definition(name: str) -> str:
    data = {
        "name": name,
        "op_type": "TODO",
        "description": "TODO: what the kernel computes. Fill the axes, inputs, outputs and the reference below.",
        "axes": {"n": {"type": "var", "description": "TODO: one axis per dimension (var: set by each workload)"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
        "reference": (
            "import torch\n\n\ndef run(x):\n"
            "    # TODO: compute the kernel's outputs from its inputs with PyTorch (the ground truth)\n"
            "    return x.clone()\n"
        ),
    }
    Definition.model_validate(data)
    return json.dumps(data, indent=2) + "\n"


def _workloads(name: str) -> str:
    data = {"uuid": f"{name}-n1024", "axes": {"n": 1024}, "inputs": {"x": {"type": "random"}}}
    Workload.model_validate(data)
    return json.dumps(data) + "\n"


def _entry_point(text: str, language: str, fallback: str) -> str:
    match = _ENTRY[language].search(text)
    return match.group(1) if match else fallback


def _identifier(stem: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", stem).strip("_-")
    return clean or "kernel"


def _unique(name: str, taken: set[str]) -> str:
    number, found = 2, name
    while found in taken:
        found, number = f"{name}_{number}", number + 1
    return found


def _free(path: Path) -> Path:
    """``path``, or ``stem_2.suffixes`` ... when a file of that name exists."""
    base, suffixes = path.name.split(".", 1)
    number, found = 2, path
    while found.exists():
        found, number = path.with_name(f"{base}_{number}.{suffixes}"), number + 1
    return found


def _relative(path: Path, config: Path) -> str:
    """``path`` relative to the folder of ``config`` (POSIX; ``..`` where it is not below it)."""
    return Path(os.path.relpath(path.resolve(), config.parent.resolve())).as_posix()


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True
