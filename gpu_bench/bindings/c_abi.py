"""evoteam's plain C ABI, called through ctypes.

``extern "C" int ENTRY(const T* inputs..., T* outputs..., int64_t var_axes...)`` in definition order,
scalars by value (``double`` or ``int64_t``), returning 0 on success. The CUDA variant (``cuda_c.py``) adds
a trailing ``cudaStream_t``; both share the loading and argument marshalling here.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from evoteam.gpu_bench.bindings import Call, KernelCallError, KernelLoadError
from evoteam.gpu_bench.bindings.dtypes import c_scalar_type
from evoteam.gpu_bench.schema import Definition
from evoteam.gpu_bench.verify.inputs import Value


def load_c_function(library: str, symbol: str, definition: Definition, trailing: Sequence[Any] = ()) -> Any:
    """The entry point with its argument types set (inputs, outputs, var axes, then ``trailing``)."""
    try:
        lib = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        raise KernelLoadError(f"cannot load {library}: {exc}") from None
    try:
        fn: Any = getattr(lib, symbol)
    except AttributeError:
        raise KernelLoadError(
            f'entry point {symbol!r} is not exported by the library (is it declared extern "C"?)'
        ) from None
    argtypes: list[Any] = []
    for spec in definition.inputs.values():
        argtypes.append(c_scalar_type(spec.dtype) if spec.shape is None else ctypes.c_void_p)
    argtypes += [ctypes.c_void_p] * len(definition.outputs)
    argtypes += [ctypes.c_int64] * len(definition.var_axes())
    argtypes += list(trailing)
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn


def c_arguments(
    definition: Definition,
    inputs: Mapping[str, Value],
    outputs: Mapping[str, torch.Tensor],
    axes: Mapping[str, int],
) -> list[Any]:
    """Pointers of inputs and outputs, scalars by value, then the variable axes (definition order)."""
    args: list[Any] = []
    for name, spec in definition.inputs.items():
        value = inputs[name]
        if isinstance(value, torch.Tensor):
            args.append(ctypes.c_void_p(_contiguous(name, value).data_ptr()))
        elif c_scalar_type(spec.dtype) is ctypes.c_double:
            args.append(ctypes.c_double(float(value)))
        else:
            args.append(ctypes.c_int64(int(value)))
    for name in definition.outputs:
        args.append(ctypes.c_void_p(_contiguous(name, outputs[name]).data_ptr()))
    args += [ctypes.c_int64(axes[name]) for name in definition.var_axes()]
    return args


class CKernel:
    destination_passing = True
    device = "cpu"

    def __init__(self, library: str, symbol: str, definition: Definition) -> None:
        self._fn = load_c_function(library, symbol, definition)
        self._definition = definition

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        args = c_arguments(self._definition, inputs, outputs, axes)
        fn = self._fn

        def call() -> None:
            rc = fn(*args)
            if rc != 0:
                raise KernelCallError(f"entry point returned {rc} (0 means success)")

        return call


def _contiguous(name: str, tensor: torch.Tensor) -> torch.Tensor:
    if not tensor.is_contiguous():
        raise KernelCallError(f"tensor {name!r} is not contiguous; the C ABI takes dense row-major buffers")
    return tensor
