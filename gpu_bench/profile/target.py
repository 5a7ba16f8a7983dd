"""The program ncu, compute-sanitizer and perf run: ``python -m evoteam.gpu_bench.profile.target REQUEST.json``
loads the built kernel, makes one workload's inputs where it runs (the GPU, or the host for a CPU kernel) and
calls the kernel a few times.

Exit status 0 when every call returned, 1 when the kernel could not be loaded or called (the reason on stderr),
2 on a bad request file. It prints nothing on stdout.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from evoteam.gpu_bench.profile.ncu import ProfileRequest


def run(request: ProfileRequest) -> None:
    """Loads and calls the kernel ``request.calls`` times, then waits for the GPU; errors propagate. With
    ``perf_control``, perf's counters are enabled just around the calls."""
    import torch

    from evoteam.gpu_bench.bindings.dtypes import torch_dtype
    from evoteam.gpu_bench.bindings.load import load_kernel
    from evoteam.gpu_bench.verify.inputs import make_inputs

    definition, workload = request.definition, request.workload
    kernel = load_kernel(request.solution, request.artifact, definition)
    blob_root = Path(request.blob_root) if request.blob_root else None
    device = request.device
    inputs = make_inputs(definition, workload, request.seed, blob_root, device=device)
    axes = definition.axis_values(workload.axes)
    outputs: dict[str, torch.Tensor] = {}
    if kernel.destination_passing:
        for name, spec in definition.outputs.items():
            shape = definition.shape_of(spec, axes) or ()
            outputs[name] = torch.zeros(shape, dtype=torch_dtype(spec.dtype), device=device)
    call = kernel.bind(inputs, outputs, axes)
    with counting(request.perf_control):
        for _ in range(request.calls):
            call()
        if device == "cuda":
            torch.cuda.synchronize()


@contextlib.contextmanager
def counting(control: tuple[str, str] | None) -> Iterator[None]:
    """perf's events enabled for the time of the block (``perf stat --control fifo:CTL,ACK --delay=-1``)."""
    if control is None:
        yield
        return
    ctl_path, ack_path = control
    with Path(ctl_path).open("w") as ctl, Path(ack_path).open() as ack:
        ctl.write("enable\n")
        ctl.flush()
        ack.readline()
        try:
            yield
        finally:
            ctl.write("disable\n")
            ctl.flush()
            ack.readline()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m evoteam.gpu_bench.profile.target REQUEST.json", file=sys.stderr)
        return 2
    try:
        request = ProfileRequest.model_validate_json(Path(args[0]).read_text())
    except (OSError, ValidationError) as exc:
        print(f"profile_target: bad request {args[0]}: {exc}", file=sys.stderr)
        return 2
    try:
        run(request)
    except Exception as exc:  # the kernel's failure, reported to the profiler's caller as text
        print(f"profile_target: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
