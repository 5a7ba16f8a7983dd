"""Verifies and times one loaded kernel on one workload; runs inside the worker process only.

The rules that make a result trustworthy live here: fresh seeded inputs per trial (the previous trial's
buffers stay alive, so consecutive trials never share an address), outputs pre-filled with NaN, the
candidate called before the reference, inputs checked byte-for-byte afterwards, one trial that reuses the
previous buffers with new values (defeats caching by pointer); then the timed phase (``timed.py``: rotation,
poisoning, random checks of timed calls, the re-check after timing). The buffer and output helpers here are
shared with it.

Everything lives on the kernel's device: inputs, NaN-filled outputs and the reference run there (``cuda``:
torch's current GPU), comparisons move to the CPU. On a GPU every candidate call is followed by a device-wide
synchronize before anything is checked, and a CUDA error from the kernel is a ``DeviceFault``: the context
is unusable, so the worker reports RUNTIME_ERROR and exits.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, Field

from evoteam.gpu_bench.bindings import (
    Kernel,
    KernelCallError,
    KernelIntegrityError,
    KernelOutputError,
    KernelRaised,
)
from evoteam.gpu_bench.bindings.device import CUDA, cuda_healthy, is_device_error, synchronize
from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, SafetensorsInput, Solution, Workload
from evoteam.gpu_bench.timing.statistics import PairedStats, TimingConfig, TimingStats
from evoteam.gpu_bench.verify.compare import Errors, Mismatch, ToleranceRule, compare
from evoteam.gpu_bench.verify.inputs import Value, make_inputs, perturbed, perturbed_values
from evoteam.gpu_bench.verify.integrity import active_modes
from evoteam.gpu_bench.verify.sampling import (
    TVD_LIMIT,
    check_samples,
    distance,
    is_sampling,
    make_sampling_reference,
    method,
    padded,
    repeats,
    samples_needed,
    target_distribution,
    valid_mask,
)
from evoteam.gpu_bench.worker.memory import is_out_of_memory


class EvalConfig(BaseModel):
    trials: int = Field(default=3, ge=3)
    """Fresh-input trials per workload (at least 3); one more reuses the previous trial's buffers."""
    atol: float = 1e-2
    rtol: float = 1e-2
    rule: ToleranceRule = "flashinfer"
    """How atol and rtol combine (``verify/compare.py``)."""
    matched_ratio: float | None = Field(default=None, gt=0, le=1)
    """The share of an output's elements that must be within tolerance (None: every one)."""
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
    isolate: bool = True
    """Run C ABI kernels on the CPU in a native host process of their own (``bindings/host.py``), and Python
    candidates on the CPU in a Python host (``bindings/python_host.py``): the worker that holds the reference
    outputs and decides the verdict never shares an address space with them. Off: they are called in the
    worker's process (faster to start, no isolation)."""
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
    perturbed: bool = False
    """The workload's fixed (blob) inputs were also verified on a perturbed copy, and the kernel was timed and
    memo-checked on perturbed copies: answers carried for the fixed values cannot pass or time well."""
    stream_unchecked: str | None = None
    """Why the stream audit (``timing/streams.py``) could not tell whether the kernel works on the stream it is
    given (it was inconclusive); None where it could, or where it does not apply. Flagged ``stream-unchecked``."""


class ReferenceFailure(RuntimeError):
    """The definition's own reference does not run on this workload: the task is broken, not the candidate."""


class DeviceFault(RuntimeError):
    """The kernel raised a CUDA error (an illegal address, a failed launch): ``outcome`` is its RUNTIME_ERROR.
    The CUDA context cannot be trusted afterwards, so the worker answers and exits, and a fresh one continues."""

    def __init__(self, outcome: WorkloadOutcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


@dataclass
class Trial:
    inputs: dict[str, Value]
    pristine: dict[str, Value]
    expected: dict[str, torch.Tensor]
    written: dict[str, torch.Tensor] = field(default_factory=dict)
    """The inputs the definition's reference writes into (``_reference``), as the reference left them."""


RunReference = Callable[[dict[str, Value]], dict[str, torch.Tensor]]


def evaluate_workload(
    kernel: Kernel,
    definition: Definition,
    workload: Workload,
    reference: RunReference,
    config: EvalConfig,
    blob_root: Path | None,
    incumbent: Kernel | None = None,
    trusted: bool = False,
) -> WorkloadOutcome:
    """Verifies ``kernel`` on fresh trials, then times it (interleaved with ``incumbent`` when given). A
    ``trusted`` kernel (the definition's own reference, the ground truth) is not put through the memo check:
    its timing on a loaded machine must not fail the task itself."""
    axes = definition.axis_values(workload.axes)
    worst = Errors(0.0, 0.0)
    everything = frozenset(definition.inputs)
    previous: Trial | None = None
    trials: list[Trial] = []
    written: frozenset[str] | None = None  # found on the first trial, from what the reference writes
    for t in range(config.trials + 1):
        fresh = make_inputs(definition, workload, _seed(config.seed, workload.uuid, t), blob_root, kernel.device)
        reuse = t == config.trials and previous is not None
        inputs = refill(previous.inputs, fresh) if reuse and previous is not None else fresh
        pristine = _clone(inputs)
        outputs = nan_outputs(definition, axes, kernel.device)
        try:
            call = kernel.bind(inputs, outputs, axes)
        except KernelCallError as exc:
            return _label(WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=_describe(exc)), t, reuse)
        try:
            produced = _run_once(kernel, call, outputs, inputs, pristine, everything if written is None else written)
        except DeviceFault as fault:
            raise DeviceFault(_label(fault.outcome, t, reuse)) from None
        if isinstance(produced, WorkloadOutcome):
            return _label(produced, t, reuse)
        expected, wrote = _reference(reference, definition, pristine, workload, written)
        if written is None:
            written = frozenset(wrote)
            changed = changed_input(inputs, pristine, written)
            if changed:
                modified = WorkloadOutcome(
                    status=EvaluationStatus.REJECTED, reason=f"the kernel modified its input {changed!r}"
                )
                return _label(modified, t, reuse)
        checked = check_outputs(definition, produced, expected, axes, config)
        if isinstance(checked, Errors):
            checked = check_written(inputs, wrote, config, checked)
        if isinstance(checked, Mismatch):
            return _label(_outcome(checked), t, reuse)
        if kernel.destination_passing:
            # Checked: the answer goes, as a native host keeps the last trial's buffers mapped while timing
            # rotates over its inputs; a kernel that kept their address found its own answer there (a third
            # of the timed calls copied it, and the memo check, on another trial's inputs, saw nothing).
            fill_sentinel(outputs)
        worst = Errors(
            max(worst.max_absolute_error, checked.max_absolute_error),
            max(worst.max_relative_error, checked.max_relative_error),
        )
        previous = Trial(inputs, pristine, expected, wrote)
        trials = [*trials[-2:], previous]  # the last three: timing rotates over their contents
    written = written or frozenset()
    if is_sampling(definition) and previous is not None and not trusted:  # the reference draws the target itself
        drawn = _distribution(kernel, definition, previous.pristine, axes, written)
        if drawn is not None:
            return drawn
    draw = random.SystemRandom()  # values nobody can precompute: a memo of earlier calls cannot answer them
    fixed = _perturbable(kernel, definition, workload, reference, config, blob_root, draw, written)
    if isinstance(fixed, WorkloadOutcome):
        return fixed
    passed = WorkloadOutcome(
        status=EvaluationStatus.PASSED,
        max_absolute_error=worst.max_absolute_error,
        max_relative_error=worst.max_relative_error,
        perturbed=fixed,
    )
    if not config.measure:
        return passed
    if fixed:  # timed on perturbed copies of the fixed values: a table carried for them is never hit
        trials = [_perturbed_trial(t, definition, workload, reference, written, draw) for t in trials]
    from evoteam.gpu_bench.worker.timed import Unseen, time_workload  # timed.py builds on this module

    unseen = (
        None
        if trusted
        else Unseen(
            inputs=lambda seen: perturbed_values(seen, draw.getrandbits(63)),
            expect=lambda pristine: _reference(reference, definition, pristine, workload, written)[0],
        )
    )
    return time_workload(kernel, definition, axes, trials, config, passed, incumbent, unseen)


def _distribution(
    kernel: Kernel,
    definition: Definition,
    pristine: Mapping[str, Value],
    axes: dict[str, int],
    written: frozenset[str],
) -> WorkloadOutcome | None:
    """A sampling kernel's samples on one trial's inputs against the distribution the reference samples from
    (``verify/sampling.py``): its failure, or None. The batch is repeated so that one call draws many samples
    per row."""
    kind = method(definition)
    target = target_distribution(pristine, kind)
    mask = valid_mask(pristine, kind)
    batch, vocab = target.shape
    wanted = samples_needed(target)
    probs_shape = definition.inputs["probs"].shape or []
    axis = probs_shape[0] if len(probs_shape) == 2 else None
    var = axis is not None and axis in definition.axes and definition.axes[axis].type == "var"
    copies = repeats(pristine, batch, wanted) if var else 1
    inputs = padded(pristine, batch, copies) if copies > 1 else _clone(pristine)
    grown = {**axes, axis: batch * copies} if var and axis is not None else axes
    outputs = nan_outputs(definition, grown, kernel.device)
    counts = torch.zeros(batch * vocab, dtype=torch.int64)
    rows = torch.arange(batch * copies) % batch
    name = next(iter(definition.outputs))
    try:
        call = kernel.bind(inputs, outputs, grown)
    except KernelCallError as exc:
        return WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=_describe(exc))
    before = _clone(inputs)
    drawn = 0
    while drawn < wanted:
        fill_sentinel(outputs)
        produced = _run_once(kernel, call, outputs, inputs, before, written)
        if isinstance(produced, WorkloadOutcome):
            return produced
        named = _as_named(definition, produced)
        if isinstance(named, Mismatch):
            return _outcome(named)
        checked = check_samples(name, named[name], mask)
        if isinstance(checked, Mismatch):
            return _outcome(checked)
        samples = named[name]
        assert isinstance(samples, torch.Tensor)
        flat = samples.detach().to("cpu", torch.int64).reshape(-1)
        counts.index_add_(0, rows * vocab + flat, torch.ones_like(rows))
        drawn += copies
    tvd, row = distance(counts.view(batch, vocab), target)
    if tvd > TVD_LIMIT:
        return WorkloadOutcome(
            status=EvaluationStatus.INCORRECT_NUMERICAL,
            reason=f"output {name!r}: the samples' distribution is {tvd:.3f} away from the filtered probabilities "
            f"in row {row} (total variation distance over {drawn} samples per row; FlashInfer-Bench's limit is "
            f"{TVD_LIMIT})",
        )
    return None


def _perturbed_trial(
    trial: Trial,
    definition: Definition,
    workload: Workload,
    reference: RunReference,
    written: frozenset[str],
    draw: random.SystemRandom,
) -> Trial:
    """The trial with its fixed (blob) floating-point inputs perturbed in place (``verify/inputs.perturbed``,
    the same buffers) and the reference's outputs for them: what timing and the memo check then use, so that
    a kernel carrying answers for a dataset's fixed values is timed at the speed of its real work."""
    copy = perturbed(workload, trial.pristine, draw.getrandbits(63))
    if copy is None:
        return trial
    inputs = refill(trial.inputs, copy)
    pristine = _clone(inputs)
    expected, wrote = _reference(reference, definition, pristine, workload, written)
    return Trial(inputs, pristine, expected, wrote)


def _perturbable(
    kernel: Kernel,
    definition: Definition,
    workload: Workload,
    reference: RunReference,
    config: EvalConfig,
    blob_root: Path | None,
    draw: random.SystemRandom,
    written: frozenset[str] = frozenset(),
) -> bool | WorkloadOutcome:
    """One more trial on a perturbed copy of the workload's fixed inputs (``verify/inputs.perturbed``): True
    when the kernel passed it, its failure when it did not, False when there is nothing to perturb or the
    definition does not allow it (the reference fails, or turns finite outputs non-finite, on the copy)."""
    if not any(isinstance(source, SafetensorsInput) for source in workload.inputs.values()):
        return False
    original = make_inputs(definition, workload, _seed(config.seed, workload.uuid, 0), blob_root, kernel.device)
    copy = perturbed(workload, original, draw.getrandbits(63))
    if copy is None:
        return False
    try:
        before = reference(_clone(original))
        expected = reference(_clone(copy))
    except Exception:
        return False
    if any(bool(torch.isfinite(before[n]).logical_and(~torch.isfinite(expected[n])).any()) for n in expected):
        return False
    axes = definition.axis_values(workload.axes)
    outputs = nan_outputs(definition, axes, kernel.device)
    pristine = _clone(copy)
    where = " (on a perturbed copy of the workload's fixed inputs: answers carried for the fixed values fail here)"
    try:
        call = kernel.bind(copy, outputs, axes)
    except KernelCallError as exc:
        return WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=_describe(exc) + where)
    produced = _run_once(kernel, call, outputs, copy, pristine, written)
    if isinstance(produced, WorkloadOutcome):
        return produced.model_copy(update={"reason": produced.reason + where})
    checked = check_outputs(definition, produced, expected, axes, config)
    if isinstance(checked, Mismatch):
        failed = _outcome(checked)
        return failed.model_copy(update={"reason": failed.reason + where})
    return True


def failure(kernel: Kernel, exc: Exception, prefix: str = "") -> WorkloadOutcome:
    """RUNTIME_ERROR for an exception of the kernel (REJECTED if it tampered with the harness); a DeviceFault
    if it is a CUDA error or left one behind."""
    if isinstance(exc, KernelIntegrityError):
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"{prefix}{exc}")
    if isinstance(exc, KernelOutputError):
        return WorkloadOutcome(status=exc.status, reason=f"{prefix}{exc}")
    memory = "out of memory: " if is_out_of_memory(exc) else ""
    outcome = WorkloadOutcome(status=EvaluationStatus.RUNTIME_ERROR, reason=f"{prefix}{memory}{_describe(exc)}")
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
    written: frozenset[str] = frozenset(),
) -> WorkloadOutcome | object:
    """Calls the kernel once and waits for it: what it produced (its return value, or the filled outputs) or a
    failure. A CUDA error raises DeviceFault."""
    try:
        result = call()
        synchronize(kernel.device)
    except Exception as exc:
        return failure(kernel, exc)
    changed = changed_input(inputs, pristine, written)
    if changed:
        return WorkloadOutcome(status=EvaluationStatus.REJECTED, reason=f"the kernel modified its input {changed!r}")
    return outputs if kernel.destination_passing else result


def check_outputs(
    definition: Definition,
    produced: object,
    expected: dict[str, torch.Tensor],
    axes: dict[str, int],
    config: EvalConfig,
) -> Errors | Mismatch:
    modes = active_modes()
    if modes:
        return Mismatch(
            EvaluationStatus.REJECTED,
            f"a torch mode is active during the output check ({', '.join(modes)}): the kernel entered it and left "
            "it on; it would rewrite the comparison",
        )
    got = _as_named(definition, produced)
    if isinstance(got, Mismatch):
        return got
    worst = Errors(0.0, 0.0)
    for name, spec in definition.outputs.items():
        ref = expected[name]
        want_shape = definition.shape_of(spec, axes) or ()
        value = got[name]
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            return Mismatch(
                EvaluationStatus.REJECTED,
                f"output {name!r} is a {type(value).__name__}, a subclass of torch.Tensor whose operations can "
                "rewrite the comparison: return plain tensors",
            )
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
        result = (
            check_samples(name, value, ref)
            if is_sampling(definition)  # ref: the samples a sampler may draw (verify/sampling.py)
            else compare(
                name,
                value,
                ref.to(torch_dtype(spec.dtype)),
                config.atol,
                config.rtol,
                config.rule,
                config.matched_ratio,
            )
        )
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
    reference: RunReference,
    definition: Definition,
    pristine: Mapping[str, Value],
    workload: Workload,
    written: frozenset[str] | None = frozenset(),
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The reference's outputs on a copy of ``pristine``, and the ``written`` inputs as it left them; with
    ``written`` None, the inputs it changed (FlashInfer Trace's ``gdn_mtp`` references fill
    ``intermediate_states_buffer``, a cache the caller passes). A kernel may write those inputs too, and what it
    writes is compared like an output; FlashInfer-Bench itself does not compare them."""
    copy = _clone(pristine)
    try:
        expected = reference(copy)
    except Exception as exc:
        raise ReferenceFailure(
            f"the reference of {definition.name} fails on workload {workload.uuid}: {_describe(exc)}"
        ) from exc
    names = frozenset(changed_inputs(copy, pristine)) if written is None else written
    return expected, {n: v for n, v in copy.items() if n in names and isinstance(v, torch.Tensor)}


def check_written(
    inputs: Mapping[str, Value], wrote: Mapping[str, torch.Tensor], config: EvalConfig, worst: Errors
) -> Errors | Mismatch:
    """The inputs the kernel wrote against what the reference wrote into them, like outputs."""
    for name, ref in wrote.items():
        value = inputs[name]
        result = compare(name, value, ref, config.atol, config.rtol, config.rule, config.matched_ratio)
        if isinstance(result, Mismatch):
            return Mismatch(
                result.status,
                result.reason.replace("output ", "the input the reference writes ", 1),
                result.max_absolute_error,
                result.max_relative_error,
            )
        worst = Errors(
            max(worst.max_absolute_error, result.max_absolute_error),
            max(worst.max_relative_error, result.max_relative_error),
        )
    return worst


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


def nan_outputs(definition: Definition, axes: dict[str, int], device: str = "cpu") -> dict[str, torch.Tensor]:
    outputs = {
        name: torch.empty(definition.shape_of(spec, axes) or (), dtype=torch_dtype(spec.dtype), device=device)
        for name, spec in definition.outputs.items()
    }
    fill_sentinel(outputs)
    return outputs


def fill_sentinel(outputs: Mapping[str, torch.Tensor]) -> None:
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


def refill(buffers: dict[str, Value], contents: Mapping[str, Value]) -> dict[str, Value]:
    """Writes ``contents`` into the existing tensors of ``buffers`` (same addresses, new values)."""
    for name, value in contents.items():
        target = buffers.get(name)
        if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and target.shape == value.shape:
            target.copy_(value)
        else:
            buffers[name] = value
    return buffers


def changed_input(
    inputs: Mapping[str, Value], pristine: Mapping[str, Value], allowed: frozenset[str] = frozenset()
) -> str | None:
    """The first input (not ``allowed`` to change) whose bytes differ from ``pristine``."""
    return next((name for name in changed_inputs(inputs, pristine) if name not in allowed), None)


def changed_inputs(inputs: Mapping[str, Value], pristine: Mapping[str, Value]) -> list[str]:
    """Every tensor input whose shape or bytes differ from ``pristine``."""
    changed = []
    for name, value in inputs.items():
        before = pristine[name]
        if (
            isinstance(value, torch.Tensor)
            and isinstance(before, torch.Tensor)
            and (value.shape != before.shape or not torch.equal(_bytes(value), _bytes(before)))
        ):
            changed.append(name)
    return changed


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.numel() else t


def _seed(base: int, uuid: str, trial: int) -> int:
    digest = hashlib.sha256(f"{base}:{uuid}:{trial}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, KernelRaised):  # already the exception's type and text, as its host saw it
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def make_reference(definition: Definition) -> RunReference:
    """Compiles the definition's reference once; the callable maps inputs to named outputs. A sampling
    definition's outputs are random: its "expected" output is the mask of the samples it may draw."""
    if is_sampling(definition):
        return make_sampling_reference(definition)
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
