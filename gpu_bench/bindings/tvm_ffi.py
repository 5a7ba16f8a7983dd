"""The ``tvm-ffi`` binding (FlashInfer-Bench's default): ``TVM_FFI_DLL_EXPORT_TYPED_FUNC`` on ``TensorView``s.

The entry point takes the inputs then the outputs in definition order (destination passing); scalar inputs
are plain numbers; axis sizes are read from the tensors' shapes. On the CPU the worker runs it in a Python host
(``python_host.py``: ``TvmFfiHostKernel``), never in its own process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from evoteam.gpu_bench.bindings import Call, KernelLoadError
from evoteam.gpu_bench.schema import Definition
from evoteam.gpu_bench.verify.inputs import Value


def tvm_ffi_build_flags() -> list[str]:
    """Compiler flags for sources that include ``<tvm/ffi/...>`` (ImportError without apache-tvm-ffi)."""
    import tvm_ffi.libinfo

    includes = [tvm_ffi.libinfo.find_include_path(), tvm_ffi.libinfo.find_dlpack_include_path()]
    return ["-std=c++17", *(f"-I{p}" for p in dict.fromkeys(includes))]


def tvm_ffi_link_flags() -> list[str]:
    import tvm_ffi.libinfo

    libdir = Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent
    return [f"-L{libdir}", "-ltvm_ffi", f"-Wl,-rpath,{libdir}"]


def load_function(library: str, symbol: str) -> Any:
    """The exported entry point of a built tvm-ffi module (KernelLoadError when it cannot be had)."""
    try:
        import tvm_ffi
    except ImportError as exc:
        raise KernelLoadError(f"the tvm-ffi binding needs apache-tvm-ffi: {exc}") from None
    try:
        module = tvm_ffi.load_module(library)
    except Exception as exc:
        raise KernelLoadError(f"cannot load {library}: {exc}") from None
    try:
        return getattr(module, symbol)
    except AttributeError:
        raise KernelLoadError(
            f"entry point {symbol!r} is not exported (TVM_FFI_DLL_EXPORT_TYPED_FUNC({symbol}, ...))"
        ) from None


class TvmFfiKernel:
    """A tvm-ffi kernel called in this process (``isolate`` off: the worker's; else ``python_host.py`` hosts it)."""

    destination_passing = True
    device = "cpu"

    def __init__(self, library: str, symbol: str, definition: Definition) -> None:
        self._fn = load_function(library, symbol)
        self._definition = definition

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        args = [inputs[n] for n in self._definition.inputs] + [outputs[n] for n in self._definition.outputs]
        fn = self._fn
        return lambda: fn(*args)
