"""Verifies and times one loaded kernel on one workload; runs inside the worker process only.

The rules that make a result trustworthy live here: fresh seeded inputs per trial (the previous trial's
buffers stay alive, so consecutive trials never share an address), outputs pre-filled with NaN, the
candidate called before the reference, inputs checked byte-for-byte afterwards, one trial that reuses the
previous buffers with new values (defeats caching by pointer), input contents rotated over the last three
trials between timed samples, outputs poisoned before every timed call and a random share of timed calls
verified (a kernel cannot tell a checked call from a timed one), and outputs re-checked after timing.

Everything lives on the kernel's device: inputs, NaN-filled outputs and the reference run there (``cuda``:
torch's current GPU), comparisons move to the CPU. On a GPU every candidate call is followed by a device-wide
synchronize before anything is checked, and a CUDA error from the kernel is a ``DeviceFault``: the context
is unusable, so the worker reports RUNTIME_ERROR and exits.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, Field

from evoteam.gpu_bench.bindings import Call, Kernel, KernelCallError
from evoteam.gpu_bench.bindings.device import CUDA, cuda_healthy, is_device_error, synchronize
from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Solution, Workload
from evoteam.gpu_bench.timing.cpu import time_call
from evoteam.gpu_bench.timing.flush import buffer_flusher, operand_flusher
from evoteam.gpu_bench.timing.gpu import (
    TimingMismatch,
    cross_check,
    cuda_measure,
    cuda_warm,
    current_cuda_device,
    time_cuda_call,
)
from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, device_key, gpu_lock
from evoteam.gpu_bench.timing.paired import cpu_measure, time_pair
from evoteam.gpu_bench.timing.statistics import PairedStats, TimingConfig, TimingStats
from evoteam.gpu_bench.verify.compare import Errors, Mismatch, compare
from evoteam.gpu_bench.verify.inputs import Value, make_inputs


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
    keep_going: bool = False
    """After a workload times out or crashes, evaluate the rest anyway (default: skip them with that reason,
    so a hanging candidate costs one timeout, not one per workload)."""
    incumbent: Solution | None = None
    """Time the kernel interleaved with this one (the start kernel) in the same worker, on the same inputs:
    the outcome's ``paired`` holds the per-pair ratios, the speedup and its interval. The incumbent's
    correctness is the caller's to establish (it is the trusted baseline)."""


class WorkloadOutcome(BaseModel):
    status: EvaluationStatus
    reason: str = ""
    max_absolute_error: float | None = None
    max_relative_error: float | None = None
    timing: TimingStats | None = None
    paired: PairedStats | None = None
    """Timed against ``EvalConfig.incumbent``: the ratios, their median and interval, both kernels' stats."""


CHECK_FRACTION = 0.125
"""Share of timed calls (drawn at random, the first always) whose outputs are verified, outside the clock."""


class TimedCallMismatch(RuntimeError):
    """A timed call, drawn for verification, produced outputs that differ from the reference."""


class ReferenceFailure(RuntimeError):
    """The definition's own reference does not run on this workload: the task is broken, not the candidate."""


class DeviceFault(RuntimeError):
    """The kernel raised a CUDA error (an illegal address, a failed launch): ``outcome`` is its RUNTIME_ERROR.
    The CUDA context cannot be trusted afterwards, so the worker answers and exits, and a fresh one continues."""

    def __init__(self, outcome: WorkloadOutcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


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
    incumbent: Kernel | None = None,
) -> WorkloadOutcome:
    """Verifies ``kernel`` on fresh trials, then times it (interleaved with ``incumbent`` when given)."""
    axes = definition.axis_values(workload.axes)
    worst = Errors(0.0, 0.0)
    previous: _Trial | None = None
    trials: list[_Trial] = []
    for t in range(config.trials + 1):
        fresh = make_inputs(definition, workload, _seed(config.seed, workload.uuid, t), blob_root, kernel.device)
        reuse = t == config.trials and previous is not None
        inputs = _refill(previous.inputs, fresh) if reuse and previous is not None else fresh
        pristine = _clone(inputs)
        outputs = _nan_outputs(definition, axes, kernel.device)
        try:
            call = kernel.bind(inputs, outputs, axes)
        except KernelCallError as exc:
            return _label(WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=_describe(exc)), t, reuse)
        try:
            produced = _run_once(kernel, call, outputs, inputs, pristine)
        except DeviceFault as fault:
            raise DeviceFault(_label(fault.outcome, t, reuse)) from None
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
        trials = [*trials[-2:], previous]  # the last three: timing rotates over their contents
    passed = WorkloadOutcome(
        status=EvaluationStatus.PASSED,
        max_absolute_error=worst.max_absolute_error,
        max_relative_error=worst.max_relative_error,
    )
    if not config.measure:
        return passed
    return _time(kernel, definition, axes, trials, config, passed, incumbent)


def _time(
    kernel: Kernel,
    definition: Definition,
    axes: dict[str, int],
    contents: list[_Trial],
    config: EvalConfig,
    passed: WorkloadOutcome,
    incumbent: Kernel | None = None,
) -> WorkloadOutcome:
    """Times the kernel on one set of buffers whose contents rotate over the last three trials' inputs; the
    outputs are poisoned before every timed call and a random share of timed calls is verified."""
    if any(not isinstance(v, torch.Tensor) and v != contents[0].pristine[k] for k, v in contents[-1].pristine.items()):
        contents = contents[-1:]  # scalars are bound by value: rotating tensors alone would mismatch them
    buffers = contents[-1].inputs
    outputs = _nan_outputs(definition, axes, kernel.device)
    call = kernel.bind(buffers, outputs, axes)
    returned: list[object] = []
    last_content = [len(contents) - 1]
    pending: list[tuple[int, int]] = []  # (sample, content) of a timed call whose outputs are to be verified
    draw = random.SystemRandom()  # not seeded: a candidate cannot predict which timed calls are checked

    def verify_pending() -> None:
        if pending:
            sample, content = pending.pop()
            synchronize(kernel.device)
            produced: object = returned[0] if returned else outputs
            checked = _check(definition, produced, contents[content].expected, axes, config)
            if isinstance(checked, Mismatch):
                raise TimedCallMismatch(f"timed call {sample + 1}: {checked.reason}")

    def before_sample(i: int) -> None:
        """Outside the timed region: verify the previous call if it was drawn, rotate the inputs, poison the
        outputs (every timed call must write them), and draw whether this call is verified."""
        verify_pending()
        if config.rotate_inputs and len(contents) > 1:
            last_content[0] = i % len(contents)
            _refill(buffers, contents[last_content[0]].pristine)
        if kernel.destination_passing:
            _fill_sentinel(outputs)
        if i == 0 or draw.random() < CHECK_FRACTION:
            pending.append((i, last_content[0]))

    def timed() -> None:
        result = call()
        if not kernel.destination_passing:
            returned[:] = [result]

    paired: PairedStats | None = None
    try:
        if incumbent is not None:
            incumbent_outputs = _nan_outputs(definition, axes, kernel.device)
            incumbent_call = incumbent.bind(buffers, incumbent_outputs, axes)
            paired = _time_paired(
                incumbent_call,
                timed,
                kernel.device,
                config,
                before_sample,
                buffers,
                {**outputs, **_prefixed(incumbent_outputs)},
            )
            stats = paired.candidate
        elif kernel.device == CUDA:
            stats = _time_on_gpu(timed, config, before_sample)
        else:
            stats = time_call(timed, config.timing, before_sample, flush=_cpu_flush(config, buffers, outputs))
        verify_pending()
        # One more call on the other content (or the same, if not rotating), into NaN-filled outputs and
        # on the same addresses as the timed calls: a kernel that skips work once it is timed fails here.
        trial = contents[(last_content[0] + 1) % len(contents)]
        _refill(buffers, trial.pristine)
        _fill_sentinel(outputs)
        timed()
        synchronize(kernel.device)
    except TimingMismatch as exc:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"while timing: {exc}")
    except TimedCallMismatch as exc:
        reason = (
            f"the outputs of a timed call differ from the reference (the kernel behaves differently when timed): {exc}"
        )
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=reason)
    except GpuLockTimeout as exc:
        return WorkloadOutcome(status=EvaluationStatus.TIMEOUT, reason=str(exc))
    except Exception as exc:
        return _failure(kernel, exc, "while timing: ")
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
    return passed.model_copy(update={"timing": stats, "paired": paired})


def _time_paired(
    incumbent: Call,
    candidate: Call,
    device: str,
    config: EvalConfig,
    before_pair: Callable[[int], None],
    buffers: Mapping[str, Value],
    outputs: Mapping[str, torch.Tensor],
) -> PairedStats:
    """The incumbent and the candidate interleaved (``timing/paired.py``); on a GPU under its lock, with
    CUDA events, and the candidate's wall-clock cross-check afterwards."""
    if device != CUDA:
        flush = _cpu_flush(config, buffers, outputs) or _buffer_flush(config)
        return time_pair(incumbent, candidate, config.timing, cpu_measure(flush), _call_once, before_pair)
    gpu = current_cuda_device()
    with gpu_lock(device_key(gpu.index), wait_s=config.timeout_s):
        measure = cuda_measure(gpu, config.timing.flush_cache)
        paired = time_pair(incumbent, candidate, config.timing, measure, cuda_warm(gpu), before_pair)
        wall = cross_check(candidate, gpu, paired.candidate.median_ms)
    own = {"clock": "cuda_events", "sm_clock_mhz": gpu.sm_clock_mhz()}
    flushed = {"flush_bytes": gpu.flush_bytes if config.timing.flush_cache else None}
    return paired.model_copy(
        update={
            "candidate": paired.candidate.model_copy(update={**own, **flushed, "wall_per_call_ms": wall}),
            "incumbent": paired.incumbent.model_copy(update={**own, **flushed}),
        }
    )


def _call_once(call: Callable[[], object]) -> None:
    call()


def _buffer_flush(config: EvalConfig) -> Callable[[], None]:
    return buffer_flusher() if config.timing.flush_cache else _no_flush


def _no_flush() -> None:
    return None


def _prefixed(outputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"incumbent.{name}": tensor for name, tensor in outputs.items()}


def _cpu_flush(
    config: EvalConfig, buffers: Mapping[str, Value], outputs: Mapping[str, torch.Tensor]
) -> Callable[[], None] | None:
    if config.timing.flush_cache and config.timing.flush_method == "operands":
        tensors = [v for v in buffers.values() if isinstance(v, torch.Tensor)] + list(outputs.values())
        return operand_flusher(tensors)
    return None


def _time_on_gpu(timed: Call, config: EvalConfig, before_sample: Callable[[int], None]) -> TimingStats:
    """CUDA-event timing while holding this GPU's lock: two workers never time on one GPU at once."""
    device = current_cuda_device()
    with gpu_lock(device_key(device.index), wait_s=config.timeout_s):
        return time_cuda_call(timed, config.timing, device, before_sample)


def _failure(kernel: Kernel, exc: Exception, prefix: str = "") -> WorkloadOutcome:
    """RUNTIME_ERROR for an exception of the kernel; a DeviceFault if it is a CUDA error or left one behind."""
    outcome = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=f"{prefix}{_describe(exc)}")
    if kernel.device == CUDA and (is_device_error(exc) or not cuda_healthy()):
        reason = f"{outcome.reason} (a CUDA error: the worker's GPU context is unusable, so the worker was replaced)"
        raise DeviceFault(outcome.model_copy(update={"reason": reason}))
    return outcome


def _run_once(
    kernel: Kernel,
    call: Callable[[], object],
    outputs: dict[str, torch.Tensor],
    inputs: Mapping[str, Value],
    pristine: Mapping[str, Value],
) -> WorkloadOutcome | object:
    """Calls the kernel once and waits for it: what it produced (its return value, or the filled outputs) or a
    failure. A CUDA error raises DeviceFault."""
    try:
        result = call()
        synchronize(kernel.device)
    except Exception as exc:
        return _failure(kernel, exc)
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


def _nan_outputs(definition: Definition, axes: dict[str, int], device: str = "cpu") -> dict[str, torch.Tensor]:
    outputs = {
        name: torch.empty(definition.shape_of(spec, axes) or (), dtype=torch_dtype(spec.dtype), device=device)
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
