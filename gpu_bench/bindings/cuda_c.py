"""The ``c`` binding for CUDA: the C ABI of ``c_abi.py`` on device pointers, plus a trailing ``cudaStream_t``.

``extern "C" int ENTRY(const T* inputs..., T* outputs..., int64_t var_axes..., cudaStream_t stream)``: a host
function in the nvcc-built ``kernel.so`` that launches its kernels on ``stream`` (torch's current stream) and
returns 0 on success (``cudaGetLastError()`` is the usual answer). The library's CUDA runtime works in the
device's primary context, the one torch uses, so torch's device pointers are valid in it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import torch

from evoteam.gpu_bench.bindings import Call, KernelCallError
from evoteam.gpu_bench.bindings.c_abi import c_arguments, load_c_function
from evoteam.gpu_bench.bindings.device import CUDA, cuda_error_name, current_stream_handle
from evoteam.gpu_bench.schema import Definition
from evoteam.gpu_bench.verify.inputs import Value


class CudaCKernel:
    destination_passing = True
    device = CUDA

    def __init__(self, library: str, symbol: str, definition: Definition) -> None:
        self._fn = load_c_function(library, symbol, definition, trailing=[ctypes.c_void_p])
        self._definition = definition

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        check_on_gpu(inputs, outputs)
        args = [*c_arguments(self._definition, inputs, outputs, axes), ctypes.c_void_p(current_stream_handle())]
        fn = self._fn

        def call() -> None:
            rc = fn(*args)
            if rc != 0:
                name = cuda_error_name(rc)
                raise KernelCallError(f"entry point returned {rc} (0 means success)" + (f": {name}" if name else ""))

        return call


def check_on_gpu(inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor]) -> None:
    """Device pointers only: a host tensor handed to a GPU kernel would fault or be read as garbage."""
    for name, value in [*inputs.items(), *outputs.items()]:
        if isinstance(value, torch.Tensor) and value.device.type != CUDA:
            raise KernelCallError(f"tensor {name!r} is on {value.device}; CUDA kernels take device memory")
