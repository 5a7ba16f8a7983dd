"""Imports a KernelBench problem (``class Model``, ``get_inputs()``, ``get_init_inputs()``) as an evoteam task.

The problem runs once here, on the CPU, at the chosen sizes: ``get_inputs()`` gives the definition's inputs
(shapes and dtypes, one constant axis per dimension, named after the module constant of that size when
exactly one has it), ``Model(*get_init_inputs())(*inputs)`` its outputs. The reference is generated code that
embeds the problem's source (see ``kernelbench_codegen``), so the definition needs no file beside it.

Inputs of the workload (``inputs="trial"``, the default): every tensor is what ``get_inputs()`` gives under
the trial's own seed, as KernelBench draws the inputs of each correctness trial: the reference's
``trial_inputs(seed, device)`` calls it (``generated`` workload inputs), so each trial sees values no candidate
has seen, with the range and structure the problem gives them. ``"auto"``: a floating-point tensor that
``get_inputs()`` draws like ``torch.randn`` is drawn by the evaluator (standard normal), any other is what
``get_inputs()`` gave under ``torch.manual_seed(seed)``, stored in a safetensors blob; ``"recorded"`` stores
every tensor, ``"random"`` draws every float tensor. Scalars from ``get_inputs()`` are scalar inputs.

Candidates are ``python``-binding solutions of two files: ``kernelbench_run.py`` (the adapter, entry ``run``)
and ``model_new.py`` (a KernelBench-style file defining ``class ModelNew(nn.Module)``).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.interop.kernelbench.codegen import (
    ADAPTER_FILE,
    ENTRY,
    MODEL_NEW_FILE,
    PRELUDE_NAMES,
    adapter_code,
    compiled_model_new,
    prelude,
    reference_code,
    starting_model_new,
)
from evoteam.gpu_bench.interop.kernelbench.source import (
    SourceError,
    Value,
    find_constants,
    parse,
    rewrite,
    scaled,
)
from evoteam.gpu_bench.interop.kernelbench.values import (
    const_axes,
    describe,
    dtype_of,
    input_names,
    not_like_randn,
    output_names,
    scalar_dtype,
)
from evoteam.gpu_bench.interop.size_cap import cap_for
from evoteam.gpu_bench.schema import (
    Binding,
    BuildSpec,
    Definition,
    DType,
    GeneratedInput,
    Language,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Solution,
    SourceFile,
    TensorSpec,
    Workload,
)
from evoteam.gpu_bench.schema.workload import InputSpec
from evoteam.gpu_bench.task import KernelTask

OP_TYPE = "kernelbench"
MB = 1 << 20
DEFAULT_SEED = 42
"""KernelBench's own evaluation seed."""
SCALE_MIN = 8
"""``--scale`` leaves integer constants below this alone (kernel sizes, strides, small channel counts)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FORWARD = "Model(*get_init_inputs())(*get_inputs())"
InputMode = Literal["trial", "auto", "random", "recorded"]


class KernelBenchError(ValueError):
    """The problem file cannot be imported (unreadable, broken, not in KernelBench's format); one line."""


class ImportOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    """Task and definition name (default: from the file name, ``kb_`` in front of a leading digit)."""
    overrides: dict[str, Value] = Field(default_factory=dict)
    """Module-level constants to set before ``get_inputs()`` and ``get_init_inputs()`` run (after ``scale``)."""
    scale: float | None = Field(default=None, gt=0)
    """Multiply every integer constant of at least ``SCALE_MIN`` that is a dimension of an input or output."""
    seed: int = DEFAULT_SEED
    target: str = "cpu"
    inputs: InputMode = "trial"
    """``trial``: every tensor from get_inputs() under each trial's seed; otherwise which float tensors the
    evaluator draws afresh (standard normal): those drawn like torch.randn (``auto``), all, or none."""
    model_new: str | None = None
    """Source of the starting ``model_new.py`` (default: the problem with ``class ModelNew(Model)`` added)."""
    max_mb: float | None = Field(default=None, gt=0)
    """Refuse a problem whose tensors exceed this many MiB at the chosen sizes (None: the default cap from this
    machine's memory, ``interop/size_cap.py``; ``inf``: no cap)."""


@dataclass
class ImportedProblem:
    """Everything a task is made of, not yet written anywhere."""

    name: str
    origin: str
    definition: Definition
    workload: Workload
    adapter: str
    model_new: str
    baseline_model_new: str
    """The problem's own Model as ModelNew: what candidates are measured against."""
    blobs: dict[str, torch.Tensor]
    sizes: dict[str, Value]
    """The constants that were changed, with their new values."""
    target: str
    notes: list[str] = field(default_factory=list)

    def blob_path(self) -> str:
        return f"blobs/{self.name}.safetensors"

    def baseline(self) -> Solution:
        """The problem's Model through the adapter, so the adapter's cost is on both sides of a speedup."""
        return Solution(
            name=f"{self.name}__model",
            definition=self.definition.name,
            author="kernelbench",
            spec=BuildSpec(
                language=Language.PYTHON,
                target_hardware=[self.target],
                entry_point=f"{ADAPTER_FILE}::{ENTRY}",
                binding=Binding.PYTHON,
            ),
            sources=[
                SourceFile(path=ADAPTER_FILE, content=self.adapter),
                SourceFile(path=MODEL_NEW_FILE, content=self.baseline_model_new),
            ],
            description="The KernelBench problem's Model, as ModelNew behind evoteam's adapter.",
        )


def candidate_solution(task: KernelTask, definition: Definition, model_new: Path, name: str | None = None) -> Solution:
    """An imported task's adapter with the ModelNew file ``model_new``, built like the task's own source."""
    if task.source.name != ADAPTER_FILE:
        raise KernelBenchError(
            f"kernel {task.name!r} is not an imported KernelBench task (its source is not {ADAPTER_FILE})"
        )
    try:
        adapter, candidate = task.source.read_text(), model_new.read_text()
    except OSError as exc:
        raise KernelBenchError(f"cannot read {exc.filename}: {exc.strerror}") from None
    sources = [SourceFile(path=ADAPTER_FILE, content=adapter), SourceFile(path=MODEL_NEW_FILE, content=candidate)]
    spec = task.build_spec()
    return Solution(name=name or model_new.stem, definition=definition.name, author="user", spec=spec, sources=sources)


def compiled_baseline(task: KernelTask, definition: Definition) -> Solution:
    """The imported task's baseline (the problem's Model) under ``torch.compile``: KernelBench's compiled
    baseline, ``evoteam bench --baseline compile``."""
    if task.source.name != ADAPTER_FILE:
        raise KernelBenchError(
            f"--baseline compile needs an imported KernelBench task; {task.name!r}'s source is not {ADAPTER_FILE}"
        )
    eager = task.baseline_solution(definition)
    sources = [
        SourceFile(path=f.path, content=compiled_model_new(f.content)) if f.path == MODEL_NEW_FILE else f
        for f in eager.sources
    ]
    if [f.path for f in sources].count(MODEL_NEW_FILE) != 1:
        raise KernelBenchError(f"{task.name!r}'s baseline has no {MODEL_NEW_FILE} to compile")
    return eager.model_copy(
        update={
            "name": f"{eager.name}_compiled",
            "sources": sources,
            "description": "The KernelBench problem's Model under torch.compile, behind evoteam's adapter.",
        }
    )


def default_name(problem: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", problem.stem).strip("_").lower() or "problem"
    return f"kb_{name}" if name[0].isdigit() else name


def import_problem(problem: Path, options: ImportOptions | None = None) -> ImportedProblem:
    """Runs ``problem`` once on the CPU and builds its definition, workload, adapter and starting ModelNew."""
    options = options or ImportOptions()
    name = options.name or default_name(problem)
    if not _NAME.fullmatch(name):
        raise KernelBenchError(f"task name {name!r} must be letters, digits, '_', '.' or '-' (not first)")
    try:
        original = problem.read_text()
    except OSError as exc:
        raise KernelBenchError(f"cannot read {problem}: {exc.strerror}") from None
    origin, seed = problem.name, options.seed
    try:
        _check_shape_of_file(parse(original, origin), origin)
    except SourceError as exc:
        raise KernelBenchError(str(exc)) from None
    source, sizes, stuck = _sized_source(original, origin, options.scale, options.overrides, seed)
    _check_size(original, origin, source, options)
    model_new = options.model_new if options.model_new is not None else starting_model_new(source)
    _check_model_new(model_new)

    namespace = _exec(prelude(source, seed, origin), origin)
    model = _model_class(namespace["PROBLEM"], origin)
    values = _call_get_inputs(namespace, origin)
    in_names = input_names(model, len(values), PRELUDE_NAMES | {"run"})
    reference = reference_code(source, seed, origin, in_names)
    run = _exec(reference, origin)["run"]
    outputs = _outputs(_call(lambda: run(*values), origin, _FORWARD), origin)
    out_names = output_names(len(outputs), in_names)

    constants = find_constants(source, origin)
    named_sizes = {n: v for n, v in namespace["PROBLEM"].items() if n in constants and type(v) is int and v >= 2}
    tensors = [(n, v) for n, v in zip(in_names, values, strict=True) if isinstance(v, torch.Tensor)]
    tensors += list(zip(out_names, outputs, strict=True))
    axes, shapes = const_axes(tensors, named_sizes)
    given = dict(zip(in_names, values, strict=True))
    inputs = {
        n: TensorSpec(shape=shapes[n], dtype=_dtype(v, f"input {n!r}", origin))
        if isinstance(v, torch.Tensor)
        else TensorSpec(shape=None, dtype=scalar_dtype(v))
        for n, v in given.items()
    }
    output_specs = {
        n: TensorSpec(shape=shapes[n], dtype=_dtype(t, f"output {n!r}", origin))
        for n, t in zip(out_names, outputs, strict=True)
    }
    specs, blobs, notes = _input_specs(given, options.inputs, f"blobs/{name}.safetensors")
    notes = [_stuck_note(d) for d in stuck] + notes
    notes += _finite_on_random_inputs(run, values, outputs, specs)
    if options.inputs != "random":
        notes += _identity_outputs(given, dict(zip(out_names, outputs, strict=True)))
    definition = Definition(
        name=name,
        op_type=OP_TYPE,
        axes=dict(axes),
        inputs=inputs,
        outputs=output_specs,
        reference=reference,
        tags=["source:kernelbench"],
        description=_description(origin, model, named_sizes, sizes, seed),
    )
    workload = Workload(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"evoteam-kernelbench:{name}:{reference}")), axes={}, inputs=specs
    )
    return ImportedProblem(
        name=name,
        origin=origin,
        definition=definition,
        workload=workload,
        adapter=adapter_code(source, seed, origin, in_names, out_names),
        model_new=model_new,
        baseline_model_new=starting_model_new(source),
        blobs=blobs,
        sizes=sizes,
        target=options.target,
        notes=notes,
    )


def _input_specs(
    given: dict[str, Any], mode: InputMode, blob_path: str
) -> tuple[dict[str, InputSpec], dict[str, torch.Tensor], list[str]]:
    """How the workload makes each input, the tensors to record, and a note for each float tensor recorded."""
    specs: dict[str, InputSpec] = {}
    blobs: dict[str, torch.Tensor] = {}
    notes: list[str] = []
    for n, value in given.items():
        if not isinstance(value, torch.Tensor):
            specs[n] = ScalarInput(type="scalar", value=value)
            continue
        if mode == "trial":
            specs[n] = GeneratedInput(type="generated")
            continue
        floating = value.dtype.is_floating_point
        why = not_like_randn(value) if floating and mode == "auto" else None
        if floating and (mode == "random" or (mode == "auto" and why is None)):
            specs[n] = RandomInput(type="random")
            continue
        specs[n] = SafetensorsInput(type="safetensors", path=blob_path, tensor_key=n)
        blobs[n] = value.detach().contiguous().clone()
        if why is not None:
            notes.append(f"input {n!r} is recorded, not drawn afresh per trial: {why}")
    return specs, blobs, notes


def _description(
    origin: str,
    model: type[torch.nn.Module],
    named_sizes: dict[str, int],
    sizes: dict[str, Value],
    seed: int,
) -> str:
    doc = inspect.getdoc(model)
    summary = f" {doc.splitlines()[0]}" if doc else ""
    named = ", ".join(f"{n}={v}" for n, v in named_sizes.items()) or "none named"
    changed = f" (changed from the file: {', '.join(f'{n}={v}' for n, v in sizes.items())})" if sizes else ""
    weights = f"Weights: torch.manual_seed({seed}) before Model(*get_init_inputs())."
    return f"KernelBench problem {origin}.{summary} Sizes: {named}{changed}. {weights}"


def _check_shape_of_file(tree: ast.Module, origin: str) -> None:
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {(a.asname or a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    missing = [n for n in ("Model", "get_inputs") if n not in defined]
    if missing:
        raise KernelBenchError(
            f"{origin} is not a KernelBench problem: it defines no {' and no '.join(missing)} "
            "(it needs class Model(nn.Module), get_inputs() and get_init_inputs())"
        )


def _check_model_new(source: str) -> None:
    try:
        tree = parse(source, MODEL_NEW_FILE)
    except SourceError as exc:
        raise KernelBenchError(str(exc)) from None
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise KernelBenchError("the ModelNew file defines no top-level class ModelNew")


def _exec(code: str, origin: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "kernelbench_import"}
    _call(lambda: exec(compile(code, f"<kernelbench {origin}>", "exec"), namespace), origin, "importing it")
    return namespace


def _call(fn: Callable[[], Any], origin: str, what: str) -> Any:
    """``fn()``; any exception of the problem's code becomes one KernelBenchError line."""
    try:
        return fn()
    except KernelBenchError:
        raise
    except Exception as exc:
        text = str(exc).strip().splitlines()
        detail = f": {text[0]}" if text else ""
        raise KernelBenchError(f"{origin}: {what} failed: {type(exc).__name__}{detail}") from None


def _model_class(problem: dict[str, Any], origin: str) -> type[torch.nn.Module]:
    model = problem.get("Model")
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise KernelBenchError(f"{origin}: Model is not a class derived from torch.nn.Module")
    for fn in ("get_inputs", "get_init_inputs"):
        if fn in problem and not callable(problem[fn]):
            raise KernelBenchError(f"{origin}: {fn} is not a function")
    return model


def _call_get_inputs(namespace: dict[str, Any], origin: str) -> list[Any]:
    get = namespace["PROBLEM"]["get_inputs"]
    values = _call(lambda: namespace["_seeded"](get, torch.device("cpu")), origin, "get_inputs()")
    if not isinstance(values, list | tuple) or not values:
        raise KernelBenchError(f"{origin}: get_inputs() must return a non-empty list, not {describe(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, torch.Tensor | bool | int | float):
            raise KernelBenchError(f"{origin}: get_inputs()[{i}] is {describe(value)}, not a tensor or a number")
    return list(values)


def _outputs(produced: object, origin: str) -> list[torch.Tensor]:
    values = [produced] if isinstance(produced, torch.Tensor) else produced
    if not isinstance(values, list | tuple) or not values or not all(isinstance(v, torch.Tensor) for v in values):
        raise KernelBenchError(
            f"{origin}: Model.forward must return a tensor or a tuple of tensors, not {describe(produced)}"
        )
    return list(values)


def _dtype(value: torch.Tensor, what: str, origin: str) -> DType:
    dtype = dtype_of(value)
    if dtype is None:
        raise KernelBenchError(f"{origin}: {what} has dtype {value.dtype}, which definitions cannot express")
    return dtype


def _sized_source(
    original: str, origin: str, scale: float | None, overrides: dict[str, Value], seed: int
) -> tuple[str, dict[str, Value], list[int]]:
    """The problem's source at the chosen sizes, the constants changed, and the sizes ``--scale`` cannot
    reach (``_scaled_sizes``)."""
    try:
        sizes: dict[str, Value] = {}
        stuck: list[int] = []
        if scale is not None:
            scaled_sizes, stuck = _scaled_sizes(original, origin, scale, seed)
            sizes.update(scaled_sizes)
        sizes.update(overrides)
        return rewrite(original, sizes, origin), sizes, stuck
    except SourceError as exc:
        raise KernelBenchError(str(exc)) from None


def _check_size(original: str, origin: str, source: str, options: ImportOptions) -> None:
    """Refuses a problem whose tensors (inputs, and outputs where the model runs on the meta device) exceed
    the size cap (``max_mb``, else the default from this machine's memory), naming a ``--scale`` that fits;
    the problem runs on the CPU next, at these sizes."""
    cap = cap_for(options.max_mb, options.target)
    if cap is None or not math.isfinite(cap.mb):
        return
    need = meta_bytes(source, origin, options.seed)
    if need is None or need <= cap.mb * MB:
        return
    found = _halved_until_it_fits(original, origin, options, cap.mb)
    hint = (
        f"--scale {found[0]:g} fits ({found[1] / MB:.3g} MiB); "
        if found is not None
        else f"no --scale fits{_fixed_sizes(original, origin, options)}; "
    )
    raise KernelBenchError(
        f"{origin}: its tensors need {need / MB:.1f} MiB at these sizes, over the {cap.mb:g} MiB cap ({cap.why}): "
        f"{hint}--scale or --size-override make them smaller, --max-mb sets another cap (inf: none)"
    )


def fitting_scale(problem: Path, options: ImportOptions, max_mb: float) -> float | None:
    """The ``--scale`` (``options.scale`` halved until it fits, up to 12 times) at which the problem's tensors
    fit ``max_mb`` MiB: ``options.scale`` itself (None: the file's sizes) when they already do, or when
    ``get_inputs()`` does not run on the meta device. A KernelBenchError when no halving fits."""
    try:
        original = problem.read_text()
    except OSError as exc:
        raise KernelBenchError(f"cannot read {problem}: {exc.strerror}") from None
    source, _, _ = _sized_source(original, problem.name, options.scale, options.overrides, options.seed)
    need = meta_bytes(source, problem.name, options.seed)
    if need is None or need <= max_mb * MB:
        return options.scale
    found = _halved_until_it_fits(original, problem.name, options, max_mb)
    if found is None:
        raise KernelBenchError(
            f"{problem.name}: no --scale down to 1/4096 fits {max_mb:g} MiB"
            f"{_fixed_sizes(original, problem.name, options)}"
        )
    return found[0]


def _halved_until_it_fits(
    original: str, origin: str, options: ImportOptions, max_mb: float
) -> tuple[float, int] | None:
    base = options.scale or 1.0
    for step in range(1, 13):
        factor = base / 2**step
        smaller, _, _ = _sized_source(original, origin, factor, options.overrides, options.seed)
        fits = meta_bytes(smaller, origin, options.seed)
        if fits is not None and fits <= max_mb * MB:
            return factor, fits
    return None


def _fixed_sizes(original: str, origin: str, options: ImportOptions) -> str:
    """The dimensions ``--scale`` cannot reach (written where they are used), for a refusal."""
    _, _, stuck = _sized_source(original, origin, 0.5, options.overrides, options.seed)
    shown = ", ".join(str(d) for d in stuck)
    return f" (sizes written where they are used, which --scale cannot reach: {shown})" if stuck else ""


def meta_bytes(source: str, origin: str, seed: int) -> int | None:
    """Bytes of the problem's inputs and outputs at the sizes in ``source``, found on torch's meta device
    (nothing is allocated; torch.distributions run there without argument validation); None when
    ``get_inputs()`` does not run there (it reads values). Outputs count only where the model also runs there."""
    namespace = _exec(prelude(source, seed, origin), origin)
    values = _meta_inputs(namespace)
    if values is None:
        return None
    tensors = [v for v in values if isinstance(v, torch.Tensor)] + _meta_outputs(namespace, values)
    return sum(t.numel() * t.element_size() for t in tensors)


def _meta_inputs(namespace: dict[str, Any]) -> list[Any] | None:
    """``get_inputs()`` on torch's meta device, or None where it does not run there."""
    try:
        with torch.device("meta"), _unvalidated_distributions():
            return list(namespace["PROBLEM"]["get_inputs"]())
    except Exception:
        return None


def _meta_outputs(namespace: dict[str, Any], values: list[Any]) -> list[torch.Tensor]:
    """The model's output tensors on the meta device for ``values``; none where an op has no meta kernel."""
    try:
        with torch.device("meta"):
            produced = namespace["forward"](namespace["PROBLEM"]["Model"], tuple(values))
    except Exception:
        return []
    outputs = [produced] if isinstance(produced, torch.Tensor) else list(produced)
    return [o for o in outputs if isinstance(o, torch.Tensor)]


def _scaled_sizes(source: str, origin: str, factor: float, seed: int) -> tuple[dict[str, Value], list[int]]:
    """The integer constants (at least ``SCALE_MIN``) that are a dimension of an input, or of an output when
    the model runs on torch's meta device, each times ``factor``; in a tuple or list constant that holds such
    a dimension (``input_shape = (4096,)``, ``layer_sizes = [400, 800]``) every integer of at least
    ``SCALE_MIN``, hidden sizes included; and the dimensions that no constant holds (a size written inside
    ``get_inputs()``), which ``--scale`` cannot change."""
    namespace = _exec(prelude(source, seed, origin), origin)
    constants = find_constants(source, origin)
    values = _meta_inputs(namespace)
    if values is None:  # get_inputs() needs values: any large integer may be a size
        numbers = [v for c in constants.values() for v in _numbers(c.literal)]
        large = (v for v in numbers if isinstance(v, int) and v >= SCALE_MIN)
        values = [torch.empty(0, *large, device="meta")]
    dims = {d for v in values if isinstance(v, torch.Tensor) for d in v.shape}
    dims |= {d for o in _meta_outputs(namespace, values) for d in o.shape}

    def scalable(v: object) -> bool:
        return type(v) is int and v >= SCALE_MIN and v in dims

    sizes: dict[str, Value] = {}
    held: set[int] = set()
    for n, c in constants.items():
        literal = c.literal
        if scalable(literal):
            assert isinstance(literal, int)
            sizes[n], held = scaled(literal, factor), held | {literal}
        elif isinstance(literal, tuple | list) and any(scalable(v) for v in literal):
            # sizes of one group (an MLP's layer sizes): the hidden ones scale with those that are dimensions
            group = {v for v in literal if isinstance(v, int) and v >= SCALE_MIN}
            items = [scaled(v, factor) if isinstance(v, int) and v in group else v for v in literal]
            sizes[n] = tuple(items) if isinstance(literal, tuple) else items
            held |= group
    # a dimension equal to a constant that is not literal (dim2 = dim * 2) follows that constant
    computed = {v for n, v in namespace["PROBLEM"].items() if type(v) is int and n in constants}
    stuck = sorted(d for d in dims if d >= SCALE_MIN and d not in held and d not in computed)
    return sizes, stuck


def _stuck_note(size: int) -> str:
    return (
        f"--scale cannot change size {size}: no module-level constant (a number, tuple or list) holds it "
        "(it is written where it is used); set it in the file, or leave it"
    )


@contextlib.contextmanager
def _unvalidated_distributions() -> Iterator[None]:
    """torch.distributions without argument validation, whose checks read values (``.item()``), which tensors
    on the meta device do not have: a ``Pareto(0.01, 1.5).sample(shape)`` then runs there too."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


def _numbers(literal: object) -> list[int | float]:
    """The numbers of a constant's literal value: itself, or the items of a tuple or list; bools are not."""
    items = list(literal) if isinstance(literal, tuple | list) else [literal]
    return [v for v in items if isinstance(v, int | float) and not isinstance(v, bool)]


def _finite_on_random_inputs(
    run: Callable[..., Any], values: list[Any], outputs: list[torch.Tensor], specs: dict[str, InputSpec]
) -> list[str]:
    """A note when the reference is finite on get_inputs()'s values but not on the evaluator's draws."""
    if not any(isinstance(s, RandomInput) for s in specs.values()) or not all(
        bool(o.isfinite().all()) for o in outputs
    ):
        return []
    generator = torch.Generator().manual_seed(0)
    drawn = [
        torch.randn(v.shape, generator=generator).to(v.dtype)
        if isinstance(spec, RandomInput) and isinstance(v, torch.Tensor)
        else v
        for v, spec in zip(values, specs.values(), strict=True)
    ]
    try:
        produced = run(*drawn)
    except Exception as exc:
        return [f"the reference fails on standard normal inputs ({type(exc).__name__}); try --inputs recorded"]
    again = [produced] if isinstance(produced, torch.Tensor) else list(produced)
    if all(isinstance(o, torch.Tensor) and bool(o.isfinite().all()) for o in again):
        return []
    return ["the reference gives NaN or inf on standard normal inputs; --inputs recorded keeps get_inputs()'s values"]


def _identity_outputs(inputs: dict[str, Any], outputs: dict[str, torch.Tensor]) -> list[str]:
    """A note for each output equal to an input on get_inputs()'s values: there a candidate that returns its
    input unchanged (``x.clone()``, an in-place op that changes nothing) passes, so the problem's inputs do not
    tell it apart from the real computation (``torch.rand``'s values under a ReLU, for instance)."""
    notes = []
    for out_name, out in outputs.items():
        same = [
            n
            for n, v in inputs.items()
            if isinstance(v, torch.Tensor) and v.shape == out.shape and v.dtype == out.dtype and torch.equal(v, out)
        ]
        if same:
            notes.append(
                f"output {out_name!r} equals input {same[0]!r} on get_inputs()'s values: a candidate that returns "
                "its input unchanged passes there; --inputs random draws standard normal values instead"
            )
    return notes
