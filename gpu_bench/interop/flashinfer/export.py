"""Exports a solution and its traces as a FlashInfer-Bench dataset that flashinfer-bench itself can load.

The layout is FlashInfer-Bench's (``TraceSet.from_path``): ``definitions/<op_type>/<definition>.json``,
``solutions/<op_type>/<definition>/<solution>.json``, ``workloads/<op_type>/<definition>.jsonl``,
``traces/<op_type>/<definition>.jsonl`` and, with ``blob_root``, the safetensors blobs the workloads read.

What maps (language + binding): ``python``/``triton``/``tilelang`` with evoteam's ``python`` binding become
the same language without a binding (flashinfer-bench calls ``run(*inputs, *outputs)`` or ``run(*inputs)``
exactly as evoteam does); ``cpp``/``cuda`` with ``tvm-ffi`` or ``torch`` stay as they are. Converted:
``cpp`` with evoteam's ``c`` binding gains a generated source that exports the C entry point through
tvm-ffi (sizes of the variable axes read from the tensors). Refused with ``ExportError``: ``cuda`` with the
``c`` binding and the ``pycuda`` binding (their launch and stream conventions have no tvm-ffi equivalent
here). evoteam's ``compile_flags`` and ``launch`` are dropped, and a ``REJECTED`` trace (a status
flashinfer-bench lacks) becomes ``RUNTIME_ERROR`` with ``REJECTED by evoteam:`` at the start of its log. Also
refused: a definition with a dtype flashinfer-bench lacks (``float64``, ``uint8``, ``float8_e4m3``), and
workloads whose inputs are made in ways only evoteam knows (``generated``, ``fill``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evoteam.gpu_bench.interop.flashinfer.emit import emit_dataset
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    Evaluation,
    EvaluationStatus,
    Language,
    SafetensorsInput,
    Solution,
    SourceFile,
    Trace,
    Workload,
)

_SCRIPTED = (Language.PYTHON, Language.TRITON, Language.TILELANG)
FLASHINFER_DTYPES = frozenset(
    {"bfloat16", "bool", "float16", "float32", "float4_e2m1", "float8_e4m3fn", "float8_e5m2", "int16", "int32",
     "int64", "int8"}
)  # fmt: skip
"""The dtypes flashinfer-bench's Definition accepts (its ``DType``)."""
FLASHINFER_INPUTS = frozenset({"random", "scalar", "safetensors"})
"""The workload input kinds flashinfer-bench makes."""


class ExportError(ValueError):
    """The solution or its traces cannot be written as a loadable FlashInfer-Bench dataset."""


def export_flashinfer(
    solution: Solution,
    definition: Definition,
    traces: list[Trace],
    out_dir: Path,
    blob_root: Path | None = None,
) -> list[Path]:
    """Writes the dataset under ``out_dir`` (traces and workloads are appended) and returns the files written.

    ``blob_root`` is the folder the workloads' safetensors paths are relative to; their blobs are copied
    along. Without it, workloads that read blobs are written as they are and need their blobs put in place.
    """
    converted = to_flashinfer_solution(solution, definition)
    check_exportable(definition, [t.workload for t in traces])
    out_traces = [_trace(t, solution, converted, definition) for t in traces]
    written = emit_dataset(out_dir, definition, [converted], out_traces)
    if blob_root is not None:
        written += _copy_blobs(out_traces, blob_root, out_dir)
    return written


def append_traces(root: Path, solution: Solution, definition: Definition, traces: list[Trace]) -> Path:
    """Appends ``traces`` of a solution the dataset at ``root`` already holds to its ``traces/`` file, with
    flashinfer-bench's statuses (``flashinfer-bench run`` writes its traces there too); returns that file."""
    converted = to_flashinfer_solution(solution, definition)
    check_exportable(definition, [t.workload for t in traces])
    path = root / "traces" / definition.op_type / f"{definition.name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for trace in traces:
            f.write(_trace(trace, solution, converted, definition).to_json() + "\n")
    return path


def check_exportable(definition: Definition, workloads: list[Workload]) -> None:
    """Raises ExportError when flashinfer-bench could not load the definition or make the workloads' inputs."""
    specs = {**definition.inputs, **definition.outputs}
    odd = sorted({f"{n} ({s.dtype.value})" for n, s in specs.items() if s.dtype.value not in FLASHINFER_DTYPES})
    if odd:
        raise ExportError(
            f"{definition.name} has tensors of dtypes flashinfer-bench lacks: {', '.join(odd)} (its dtypes: "
            f"{', '.join(sorted(FLASHINFER_DTYPES))})"
        )
    for workload in workloads:
        kinds = sorted({f"{n} ({s.type})" for n, s in workload.inputs.items() if s.type not in FLASHINFER_INPUTS})
        if kinds:
            raise ExportError(
                f"workload {workload.uuid} makes inputs in ways only evoteam knows: {', '.join(kinds)} "
                "(flashinfer-bench makes random, scalar and safetensors inputs)"
            )


def to_flashinfer_solution(solution: Solution, definition: Definition) -> Solution:
    """The solution with a build spec flashinfer-bench accepts (see the module docstring for the mapping)."""
    if solution.definition != definition.name:
        raise ExportError(f"solution {solution.name!r} is for {solution.definition!r}, not {definition.name!r}")
    empty = [s.path for s in solution.sources if not s.content]
    if empty:
        raise ExportError(f"solution {solution.name!r} has empty sources {empty} (flashinfer-bench refuses them)")
    spec = solution.spec
    binding = spec.resolved_binding()
    sources = list(solution.sources)
    entry = spec.entry_point
    fib_binding: Binding | None
    if spec.language in _SCRIPTED:
        if binding != Binding.PYTHON:
            raise ExportError(f"a {spec.language.value} solution with the {binding.value} binding has no equivalent")
        fib_binding = None
    elif binding in (Binding.TVM_FFI, Binding.TORCH):
        fib_binding = binding
    elif binding == Binding.C and spec.language == Language.CPP:
        wrapper = tvm_ffi_wrapper(spec.entry_symbol, definition)
        path = _free_name(f"evoteam_tvm_ffi_{spec.entry_symbol}.cpp", {s.path for s in sources})
        sources.append(SourceFile(path=path, content=wrapper))
        entry = f"{path}::{spec.entry_symbol}"
        fib_binding = Binding.TVM_FFI
    else:
        raise ExportError(
            f"solution {solution.name!r} ({spec.language.value}, {binding.value} binding) cannot be exported: "
            "flashinfer-bench calls cpp/cuda through tvm-ffi or torch, and only cpp with the c binding is "
            "converted (add a tvm-ffi entry point to export it)"
        )
    fields: dict[str, object] = {
        "language": spec.language,
        "target_hardware": spec.target_hardware,
        "entry_point": entry,
        "dependencies": spec.dependencies,
        "destination_passing_style": spec.destination_passing_style,
    }
    if fib_binding is not None:
        fields["binding"] = fib_binding
    new_spec = BuildSpec.model_validate(fields)
    return Solution(
        name=solution.name,
        definition=solution.definition,
        author=solution.author,
        spec=new_spec,
        sources=sources,
        description=solution.description,
    )


def tvm_ffi_wrapper(symbol: str, definition: Definition) -> str:
    """C++ that exports evoteam's ``extern "C" int symbol(inputs..., outputs..., var axes...)`` through tvm-ffi."""
    params: list[str] = []
    prototype: list[str] = []
    args: list[str] = []
    for name, spec in definition.inputs.items():
        if spec.shape is None:
            c_type = "double" if _is_float(spec.dtype.value) else "int64_t"
            params.append(f"{c_type} {name}")
            prototype.append(c_type)
            args.append(name)
        else:
            params.append(f"tvm::ffi::TensorView {name}")
            prototype.append("const void*")
            args.append(f'evoteam_data({name}, "{name}")')
    for name in definition.outputs:
        params.append(f"tvm::ffi::TensorView {name}")
        prototype.append("void*")
        args.append(f'evoteam_data({name}, "{name}")')
    for axis in definition.var_axes():
        prototype.append("int64_t")
        args.append(_axis_source(axis, definition))
    call = ",\n      ".join(args)
    return f"""\
// Generated by evoteam export: the plain C entry point `{symbol}` (evoteam's c binding) exported through
// tvm-ffi, FlashInfer-Bench's binding. Variable axes are read from the tensors' shapes.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>

extern "C" int {symbol}({", ".join(prototype)});

namespace {{

void* evoteam_data(const tvm::ffi::TensorView& t, const char* name) {{
  TVM_FFI_CHECK(t.IsContiguous(), ValueError) << name << " must be contiguous (the C entry point takes dense buffers)";
  return static_cast<char*>(t.data_ptr()) + t.byte_offset();
}}

void evoteam_{symbol}({", ".join(params)}) {{
  int rc = {symbol}(
      {call});
  TVM_FFI_CHECK(rc == 0, RuntimeError) << "{symbol} returned " << rc << " (0 means success)";
}}

}}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC({symbol}, evoteam_{symbol});
"""


def _axis_source(axis: str, definition: Definition) -> str:
    for name, spec in [*definition.inputs.items(), *definition.outputs.items()]:
        if spec.shape is not None and axis in spec.shape:
            return f"{name}.size({spec.shape.index(axis)})"
    raise ExportError(
        f"variable axis {axis!r} of {definition.name} is in no tensor's shape; the wrapper cannot size it"
    )


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _free_name(name: str, taken: set[str]) -> str:
    stem, suffix = name.rsplit(".", 1)
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{stem}_{n}.{suffix}", n + 1
    return candidate


def _trace(trace: Trace, original: Solution, converted: Solution, definition: Definition) -> Trace:
    """The trace with flashinfer-bench's statuses, naming the exported solution."""
    if trace.definition != definition.name:
        raise ExportError(f"a trace is for definition {trace.definition!r}, not {definition.name!r}")
    if trace.solution not in (None, original.name):
        raise ExportError(f"a trace is for solution {trace.solution!r}, not {original.name!r}")
    evaluation = trace.evaluation
    if evaluation is None:
        raise ExportError(f"the trace of workload {trace.workload.uuid} has no evaluation (export evaluated traces)")
    if evaluation.status == EvaluationStatus.REJECTED:
        evaluation = Evaluation(
            status=EvaluationStatus.RUNTIME_ERROR,
            environment=evaluation.environment,
            timestamp=evaluation.timestamp,
            log=f"REJECTED by evoteam: {evaluation.log}",
        )
    return Trace(definition=trace.definition, workload=trace.workload, solution=converted.name, evaluation=evaluation)


def _copy_blobs(traces: list[Trace], blob_root: Path, out_dir: Path) -> list[Path]:
    copied: list[Path] = []
    paths = {s.path for t in traces for s in t.workload.inputs.values() if isinstance(s, SafetensorsInput)}
    for rel in sorted(paths):
        source = blob_root / rel
        target = out_dir / rel
        if not source.is_file():
            raise ExportError(f"workload blob {rel} is not under {blob_root}")
        if target.resolve() == source.resolve():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
    return copied
