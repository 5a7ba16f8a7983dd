"""Writes definitions, solutions, workloads and traces in FlashInfer-Bench's dataset layout.

``definitions/<op_type>/<definition>.json``, ``solutions/<op_type>/<definition>/<solution>.json``,
``workloads/<op_type>/<definition>.jsonl`` and ``traces/<op_type>/<definition>.jsonl`` (traces are appended,
so several solutions can share one dataset folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from evoteam.gpu_bench.schema import Definition, Solution, Trace, Workload


def emit_dataset(root: Path, definition: Definition, solutions: list[Solution], traces: list[Trace]) -> list[Path]:
    op = definition.op_type
    written: list[Path] = []
    d_path = root / "definitions" / op / f"{definition.name}.json"
    _write(d_path, json.dumps(definition.to_json_dict(), indent=2) + "\n")
    written.append(d_path)
    for solution in solutions:
        data = solution.to_json_dict()
        # compile_flags and launch are evoteam's extensions; FlashInfer-Bench's BuildSpec has no such fields.
        data["spec"].pop("compile_flags", None)
        data["spec"].pop("launch", None)
        s_path = root / "solutions" / op / definition.name / f"{solution.name}.json"
        _write(s_path, json.dumps(data, indent=2) + "\n")
        written.append(s_path)
    seen: dict[str, Workload] = {t.workload.uuid: t.workload for t in traces}
    w_path = root / "workloads" / op / f"{definition.name}.jsonl"
    existing = _existing_uuids(w_path)
    with _open_append(w_path) as f:
        for uuid, workload in seen.items():
            if uuid not in existing:
                f.write(
                    Trace(definition=definition.name, workload=workload, solution=None, evaluation=None).to_json()
                    + "\n"
                )
    written.append(w_path)
    t_path = root / "traces" / op / f"{definition.name}.jsonl"
    with _open_append(t_path) as f:
        for trace in traces:
            f.write(trace.to_json() + "\n")
    written.append(t_path)
    return written


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _open_append(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("a", encoding="utf-8")


def _existing_uuids(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    uuids = set()
    for line in path.read_text().splitlines():
        if line.strip():
            uuids.add(json.loads(line)["workload"]["uuid"])
    return uuids
