"""Writes an imported KernelBench problem as a task folder and appends its ``[[kernel]]`` to evoteam.toml.

Layout under the output folder (all paths in evoteam.toml relative to it)::

    definitions/NAME.json            the Definition (reference embedded)
    workloads/NAME.jsonl             one workload trace
    blobs/NAME.safetensors           recorded integer/bool inputs (only when there are some)
    kernels/NAME/kernelbench_run.py  the adapter: the task's source, entry ``run``
    kernels/NAME/model_new.py        the candidate: class ModelNew (an extra source)
    solutions/NAME__model.json       the baseline: the problem's Model through the same adapter
    evoteam.toml                     a [[kernel]] entry appended (existing entries are kept)
"""

from __future__ import annotations

import json
from pathlib import Path

from evoteam.gpu_bench.interop.kernelbench.codegen import ADAPTER_FILE, ENTRY, MODEL_NEW_FILE
from evoteam.gpu_bench.interop.kernelbench.problem import ImportedProblem, KernelBenchError
from evoteam.gpu_bench.schema import DType, Trace
from evoteam.gpu_bench.task import CONFIG_NAME, TaskError, load_tasks

HALF_TOLERANCE = 1e-2
"""KernelBench's atol and rtol for float16 and bfloat16 outputs (``get_tolerance_for_precision``)."""
FULL_TOLERANCE = 1e-4
"""KernelBench's atol and rtol for float32 (torchbench's), which evoteam also uses for float64 and integers."""


def tolerance(problem: ImportedProblem) -> float:
    """KernelBench's atol = rtol for the problem's outputs, checked with torch.allclose's rule: 1e-2 when an
    output is float16 or bfloat16, else 1e-4."""
    half = any(spec.dtype in (DType.FLOAT16, DType.BFLOAT16) for spec in problem.definition.outputs.values())
    return HALF_TOLERANCE if half else FULL_TOLERANCE


def write_task(problem: ImportedProblem, out: Path) -> list[Path]:
    """Writes the task's files under ``out`` and its evoteam.toml entry; the paths written, toml last.
    A kernel of the same name already in ``out``'s evoteam.toml is an error (nothing is written)."""
    config = out / CONFIG_NAME
    existing = config.read_text() if config.is_file() else None
    if existing is not None:
        try:
            names = [t.name for t in load_tasks(config)]
        except TaskError as exc:
            raise KernelBenchError(str(exc)) from None
        if problem.name in names:
            raise KernelBenchError(f"{config} already has a kernel named {problem.name!r} (choose another with --name)")
    name = problem.name
    files: dict[str, str | bytes] = {
        f"definitions/{name}.json": json.dumps(problem.definition.to_json_dict(), indent=2) + "\n",
        f"workloads/{name}.jsonl": json.dumps(
            Trace(definition=name, workload=problem.workload, solution=None, evaluation=None).model_dump(mode="json")
        )
        + "\n",
        f"kernels/{name}/{ADAPTER_FILE}": problem.adapter,
        f"kernels/{name}/{MODEL_NEW_FILE}": problem.model_new,
        f"solutions/{name}__model.json": json.dumps(problem.baseline().to_json_dict(), indent=2) + "\n",
    }
    if problem.blobs:
        files[problem.blob_path()] = _safetensors(problem)
    written = []
    try:
        for relative, content in files.items():
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            written.append(path)
        config.write_text(_with_entry(existing, problem))
    except OSError as exc:
        raise KernelBenchError(f"cannot write {exc.filename}: {exc.strerror}") from None
    try:
        load_tasks(config)
    except TaskError as exc:  # never expected: put the file back as it was
        if existing is None:
            config.unlink()
        else:
            config.write_text(existing)
        raise KernelBenchError(f"the new entry would break {config}: {exc}") from None
    return [*written, config]


def toml_entry(problem: ImportedProblem) -> str:
    name = problem.name
    fields: list[tuple[str, str]] = [
        ("name", _string(name)),
        ("source", _string(f"kernels/{name}/{ADAPTER_FILE}")),
        ("extra_sources", f"[{_string(f'kernels/{name}/{MODEL_NEW_FILE}')}]"),
        ("language", _string("python")),
        ("binding", _string("python")),
        ("entry", _string(ENTRY)),
        ("definition", _string(f"definitions/{name}.json")),
        ("workloads", _string(f"workloads/{name}.jsonl")),
        ("baseline", _string(f"solutions/{name}__model.json")),
        ("target", _string(problem.target)),
        ("tolerance", f'{{ atol = {tolerance(problem):g}, rtol = {tolerance(problem):g}, rule = "allclose" }}'),
    ]
    origin = problem.origin.replace("\n", " ").replace("\r", " ")
    lines = [
        f"# KernelBench problem {origin}, imported by `evoteam import kernelbench`. The candidate is",
        f"# {MODEL_NEW_FILE} (class ModelNew); {ADAPTER_FILE} builds it with the seeded init and calls forward.",
        "[[kernel]]",
        *(f"{key} = {value}" for key, value in fields),
    ]
    return "\n".join(lines) + "\n"


def _with_entry(existing: str | None, problem: ImportedProblem) -> str:
    if existing is None:
        header = "# Kernel tasks of this folder: one [[kernel]] per kernel file that evoteam evaluates or evolves.\n"
        return header + "\n" + toml_entry(problem)
    separator = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
    return existing + separator + toml_entry(problem)


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def _safetensors(problem: ImportedProblem) -> bytes:
    from safetensors.torch import save

    data: bytes = save(problem.blobs, metadata={"source": f"kernelbench {problem.origin}"})
    return data
