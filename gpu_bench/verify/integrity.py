"""Detects a candidate that tampers with the worker's shared Python state (e.g. patches torch functions).

A Python candidate runs in the same interpreter as the reference and the harness: replacing ``torch.rsqrt``
or a ``torch.Tensor`` method would change the reference's answer too, replacing the harness's output check
would pass anything, and a torch function or dispatch mode left active would rewrite the comparison. The
worker records what these namespaces (torch's and the harness's own modules) hold before any candidate runs
and checks it after every request; ``active_modes`` is checked before every comparison. This is a best
effort against code in the same interpreter; C ABI kernels on the CPU run in a process of their own.
"""

from __future__ import annotations

import builtins
import math
import sys
from types import ModuleType

import torch
import torch.nn.functional

_WATCHED: dict[str, ModuleType | type] = {
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.linalg": torch.linalg,
    "torch.fft": torch.fft,
    "torch.special": torch.special,
    "math": math,
    "builtins": builtins,
}

_HARNESS = (
    "evoteam.gpu_bench.verify.compare",
    "evoteam.gpu_bench.verify.integrity",
    "evoteam.gpu_bench.verify.inputs",
    "evoteam.gpu_bench.worker.evaluate",
    "evoteam.gpu_bench.worker.timed",
    "evoteam.gpu_bench.worker.server",
    "evoteam.gpu_bench.worker.process_state",
    "evoteam.gpu_bench.timing.cpu",
    "evoteam.gpu_bench.timing.paired",
    "evoteam.gpu_bench.timing.statistics",
    "evoteam.gpu_bench.bindings.host",
    "evoteam.gpu_bench.bindings.python_host",
)
"""The harness's own modules: watched like torch's, when loaded."""

Snapshot = dict[str, int]


def snapshot() -> Snapshot:
    """The identity of every attribute, as attribute lookup would find it (classes: along the MRO)."""
    return {key: id(value) for key, value in _entries()}


def tampered(before: Snapshot) -> list[str]:
    """Names that were replaced or removed since ``before`` (names added later are not compared). torch's own
    wrapping of a function on first use of ``torch.compile`` (importing ``torch._dynamo`` replaces
    ``torch.manual_seed`` with ``torch._disable_dynamo(torch.manual_seed)``) is not a replacement."""
    now = dict(_entries())
    changed = []
    for name, ident in before.items():
        value = now.get(name, _MISSING)
        if id(value) != ident and not _dynamo_disabled(value, ident):
            changed.append(name)
    return sorted(changed)


_MISSING = object()
_DISABLE = getattr(torch, "_disable_dynamo", None)
_DISABLED_CODE = getattr(_DISABLE(lambda: None), "__code__", None) if _DISABLE is not None else None
"""The code of the wrapper ``torch._disable_dynamo`` makes (the same code object for every function)."""


_WRAPPED_CELL = _DISABLED_CODE.co_freevars.index("fn") if _DISABLED_CODE is not None else -1
"""Where the wrapper keeps the function it calls, among its closure's cells."""


def _dynamo_disabled(value: object, original: int) -> bool:
    """Whether ``value`` is torch's ``_disable_dynamo`` wrapper around the object whose id is ``original``: its
    code is torch's wrapper and the function its closure calls is that object (``__wrapped__`` is only an
    attribute, which anyone may set on a wrapper of something else)."""
    if _DISABLED_CODE is None or getattr(value, "__code__", None) is not _DISABLED_CODE:
        return False
    cells = getattr(value, "__closure__", None) or ()
    return 0 <= _WRAPPED_CELL < len(cells) and id(cells[_WRAPPED_CELL].cell_contents) == original


def _entries() -> list[tuple[str, object]]:
    entries: list[tuple[str, object]] = []
    harness = {name: sys.modules[name] for name in _HARNESS if name in sys.modules}
    for prefix, namespace in {**_WATCHED, **harness}.items():
        owners = reversed(namespace.__mro__) if isinstance(namespace, type) else [namespace]
        for owner in owners:
            entries += [(f"{prefix}.{name}", value) for name, value in list(vars(owner).items())]
    return entries


def active_modes() -> list[str]:
    """The torch function and dispatch modes active on this thread (the harness enters none)."""
    modes = [type(torch._C._get_function_stack_at(i)).__name__ for i in range(torch._C._len_torch_function_stack())]
    modes += [type(torch._C._get_dispatch_stack_at(i)).__name__ for i in range(torch._C._len_torch_dispatch_stack())]
    return modes
