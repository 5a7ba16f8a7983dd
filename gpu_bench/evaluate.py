"""Verifies and times one loaded kernel on one workload; runs inside the worker process only.

The rules that make a result trustworthy live here: fresh seeded inputs per trial (the previous trial's
buffers stay alive, so consecutive trials never share an address), outputs pre-filled with NaN, the
candidate called before the reference, inputs checked byte-for-byte afterwards, one trial that reuses the
previous buffers with new values (defeats caching by pointer), input contents rotated between timed
samples, and outputs re-checked after timing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, Field

from evoteam.gpu_bench.bindings import Kernel
from evoteam.gpu_bench.compare import Errors, Mismatch, compare
from evoteam.gpu_bench.dtypes import torch_dtype
from evoteam.gpu_bench.flush import operand_flusher
from evoteam.gpu_bench.inputs import Value, make_inputs
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Workload
from evoteam.gpu_bench.timing import TimingConfig, TimingStats, time_call


class EvalConfig(BaseModel):
    trials: int = Field(default=3, ge=3)
    """Fresh-input trials per workload (at least 3); one more reuses the previous trial's buffers."""
    atol: float = 1e-2
    rtol: float = 1e-2
    seed: int = 0
    timing: TimingConfig = Field(default_factory=TimingConfig)
    measure: bool = True
    """Time the kernel after it passes (off: correctness only)."""
    timeout_s: float = 60.0
    """Wall-clock limit for one workload (enforced by the caller, who kills the worker)."""
    rotate_inputs: bool = True


class WorkloadOutcome(BaseModel):
    status: EvaluationStatus
    reason: str = ""
    max_absolute_error: float | None = None
    max_relative_error: float | None = None
    timing: TimingStats | None = None


class ReferenceFailure(RuntimeError):
    """The definition's own reference does not run on this workload: the task is broken, not the candidate."""


@dataclass
class _Trial:
    inputs: dict[str, Value]
    pristine: dict[str, Value]
    expected: dict[str, torch.Tensor]


RunReference = Callable[[dict[str, Value]], dict[str, torch.Tensor]]


def evaluate_workload(
    kernel: Kernel,
    definition: Definition,
    workload: Workload,
    reference: RunReference,
    config: EvalConfig,
    blob_root: Path | None,
) -> WorkloadOutcome:
    axes = definition.axis_values(workload.axes)
    worst = Errors(0.0, 0.0)
    previous: _Trial | None = None
    trials: list[_Trial] = []
    for t in range(config.trials + 1):
        fresh = make_inputs(definition, workload, _seed(config.seed, workload.uuid, t), blob_root)
        reuse = t == config.trials and previous is not None
        inputs = _refill(previous.inputs, fresh) if reuse and previous is not None else fresh
        pristine = _clone(inputs)
        outputs = _nan_outputs(definition, axes)
        produced = _run_once(kernel, kernel.bind(inputs, outputs, axes), outputs, inputs, pristine)
        if isinstance(produced, WorkloadOutcome):
            return _label(produced, t, reuse)
        expected = _reference(reference, definition, pristine, workload)
        checked = _check(definition, produced, expected, axes, config)
        if isinstance(checked, Mismatch):
            return _label(_outcome(checked), t, reuse)
        worst = Errors(
            max(worst.max_absolute_error, checked.max_absolute_error),
            max(worst.max_relative_error, checked.max_relative_error),
        )
        previous = _Trial(inputs, pristine, expected)
        trials = [*trials[-1:], previous]  # the last two: timing alternates between their contents
    passed = WorkloadOutcome(
        status=EvaluationStatus.PASSED,
        max_absolute_error=worst.max_absolute_error,
        max_relative_error=worst.max_relative_error,
    )
    if not config.measure:
        return passed
    return _time(kernel, definition, axes, trials, config, passed)


def _time(
    kernel: Kernel,
    definition: Definition,
    axes: dict[str, int],
    contents: list[_Trial],
    config: EvalConfig,
    passed: WorkloadOutcome,
) -> WorkloadOutcome:
    """Times the kernel on one set of buffers whose contents alternate between the last two trials."""
    if any(not isinstance(v, torch.Tensor) and v != contents[0].pristine[k] for k, v in contents[-1].pristine.items()):
        contents = contents[-1:]  # scalars are bound by value: rotating tensors alone would mismatch them
    buffers = contents[-1].inputs
    outputs = _nan_outputs(definition, axes)
    call = kernel.bind(buffers, outputs, axes)
    returned: list[object] = []
    last_content = [len(contents) - 1]

    def before_sample(i: int) -> None:
        if config.rotate_inputs and len(contents) > 1:
            last_content[0] = i % len(contents)
            _refill(buffers, contents[last_content[0]].pristine)

    def timed() -> None:
        result = call()
        if not kernel.destination_passing:
            returned[:] = [result]

    flush = None
    if config.timing.flush_cache and config.timing.flush_method == "operands":
        tensors = [v for v in buffers.values() if isinstance(v, torch.Tensor)] + list(outputs.values())
        flush = operand_flusher(tensors)
    try:
        stats = time_call(timed, config.timing, before_sample, flush=flush)
        # One more call on the other content (or the same, if not rotating), into NaN-filled outputs and
        # on the same addresses as the timed calls: a kernel that skips work once it is timed fails here.
        trial = contents[(last_content[0] + 1) % len(contents)]
        _refill(buffers, trial.pristine)
        _fill_sentinel(outputs)
        timed()
    except Exception as exc:
        return WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=f"while timing: {_describe(exc)}")
    changed = _changed_input(buffers, trial.pristine)
    if changed:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"input {changed!r} was modified while timed")
    produced: object = returned[0] if returned else outputs
    checked = _check(definition, produced, trial.expected, axes, config)
    if isinstance(checked, Mismatch):
        return WorkloadOutcome(
            status=EvaluationStatus.REJECTED,
            reason=f"outputs after timing differ from the reference (the kernel behaves differently when timed): "
            f"{checked.reason}",
        )
    return passed.model_copy(update={"timing": stats})


def _run_once(
    kernel: Kernel,
    call: Callable[[], object],
    outputs: dict[str, torch.Tensor],
    inputs: Mapping[str, Value],
    pristine: Mapping[str, Value],
) -> WorkloadOutcome | object:
    """Calls the kernel once: what it produced (its return value, or the filled outputs) or a failure."""
    try:
        result = call()
    except Exception as exc:
        return WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=_describe(exc))
    changed = _changed_input(inputs, pristine)
    if changed:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"the kernel modified its input {changed!r}")
    return outputs if kernel.destination_passing else result


def _check(
    definition: Definition,
    produced: object,
    expected: dict[str, torch.Tensor],
    axes: dict[str, int],
    config: EvalConfig,
) -> Errors | Mismatch:
    got = _as_named(definition, produced)
    if isinstance(got, Mismatch):
        return got
    worst = Errors(0.0, 0.0)
    for name, spec in definition.outputs.items():
        ref = expected[name]
        want_shape = definition.shape_of(spec, axes) or ()
        value = got[name]
        if isinstance(value, torch.Tensor) and tuple(value.shape) != want_shape:
            return Mismatch(
                EvaluationStatus.INCORRECT_SHAPE,
                f"output {name!r} has shape {tuple(value.shape)}, expected {want_shape}",
            )
        if isinstance(value, torch.Tensor) and value.dtype != torch_dtype(spec.dtype):
            return Mismatch(
                EvaluationStatus.INCORRECT_DTYPE,
                f"output {name!r} has dtype {value.dtype}, expected {spec.dtype}",
            )
        result = compare(name, value, ref.to(torch_dtype(spec.dtype)), config.atol, config.rtol)
        if isinstance(result, Mismatch):
            return result
        worst = Errors(
            max(worst.max_absolute_error, result.max_absolute_error),
            max(worst.max_relative_error, result.max_relative_error),
        )
    return worst


def _as_named(definition: Definition, produced: object) -> dict[str, object] | Mismatch:
    names = list(definition.outputs)
    if isinstance(produced, dict):
        missing = [n for n in names if n not in produced]
        if missing:
            return Mismatch(EvaluationStatus.INCORRECT_SHAPE, f"outputs {missing} are missing from the result")
        return {n: produced[n] for n in names}
    if isinstance(produced, torch.Tensor):
        produced = (produced,)
    if isinstance(produced, tuple | list) and len(produced) == len(names):
        return dict(zip(names, produced, strict=True))
    return Mismatch(
        EvaluationStatus.INCORRECT_SHAPE,
        f"expected {len(names)} output(s) {names}, got {type(produced).__name__}"
        + (f" of length {len(produced)}" if isinstance(produced, tuple | list) else ""),
    )


def _reference(
    reference: RunReference, definition: Definition, pristine: Mapping[str, Value], workload: Workload
) -> dict[str, torch.Tensor]:
    try:
        expected = reference(_clone(pristine))
    except Exception as exc:
        raise ReferenceFailure(
            f"the reference of {definition.name} fails on workload {workload.uuid}: {_describe(exc)}"
        ) from exc
    return expected


def _outcome(mismatch: Mismatch) -> WorkloadOutcome:
    numerical = mismatch.status == EvaluationStatus.INCORRECT_NUMERICAL
    return WorkloadOutcome(
        status=mismatch.status,
        reason=mismatch.reason,
        max_absolute_error=mismatch.max_absolute_error if numerical else None,
        max_relative_error=mismatch.max_relative_error if numerical else None,
    )


def _label(outcome: WorkloadOutcome, trial: int, reuse: bool) -> WorkloadOutcome:
    where = "on the trial that reuses the previous buffers with new values" if reuse else f"on trial {trial + 1}"
    return outcome.model_copy(update={"reason": f"{outcome.reason} ({where})"})


def _nan_outputs(definition: Definition, axes: dict[str, int]) -> dict[str, torch.Tensor]:
    outputs = {
        name: torch.empty(definition.shape_of(spec, axes) or (), dtype=torch_dtype(spec.dtype))
        for name, spec in definition.outputs.items()
    }
    _fill_sentinel(outputs)
    return outputs


def _fill_sentinel(outputs: Mapping[str, torch.Tensor]) -> None:
    """NaN for floats, the smallest value for integers, True for bools: values a kernel must overwrite."""
    for tensor in outputs.values():
        if tensor.dtype.is_floating_point:
            tensor.fill_(float("nan"))
        elif tensor.dtype == torch.bool:
            tensor.fill_(True)
        else:
            tensor.fill_(torch.iinfo(tensor.dtype).min)


def _clone(values: Mapping[str, Value]) -> dict[str, Value]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}


def _refill(buffers: dict[str, Value], contents: Mapping[str, Value]) -> dict[str, Value]:
    """Writes ``contents`` into the existing tensors of ``buffers`` (same addresses, new values)."""
    for name, value in contents.items():
        target = buffers.get(name)
        if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and target.shape == value.shape:
            target.copy_(value)
        else:
            buffers[name] = value
    return buffers


def _changed_input(inputs: Mapping[str, Value], pristine: Mapping[str, Value]) -> str | None:
    for name, value in inputs.items():
        before = pristine[name]
        if (
            isinstance(value, torch.Tensor)
            and isinstance(before, torch.Tensor)
            and (value.shape != before.shape or not torch.equal(_bytes(value), _bytes(before)))
        ):
            return name
    return None


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.numel() else t


def _seed(base: int, uuid: str, trial: int) -> int:
    digest = hashlib.sha256(f"{base}:{uuid}:{trial}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def make_reference(definition: Definition) -> RunReference:
    """Compiles the definition's reference once; the callable maps inputs to named outputs."""
    namespace: dict[str, Any] = {"__name__": f"evoteam_reference_{definition.name}"}
    exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), namespace)
    run = namespace["run"]
    names = list(definition.outputs)

    def reference(inputs: dict[str, Value]) -> dict[str, torch.Tensor]:
        produced = run(*(inputs[n] for n in definition.inputs))
        named = _as_named(definition, produced)
        if isinstance(named, Mismatch):
            raise ReferenceFailure(f"the reference returned the wrong outputs: {named.reason}")
        out: dict[str, torch.Tensor] = {}
        for name in names:
            value = named[name]
            out[name] = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        return out

    return reference
