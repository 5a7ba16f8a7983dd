"""The ``pycuda`` binding: an ``extern "C" __global__`` kernel from the nvcc-built cubin, launched by the harness.

Arguments in the C ABI's order: device pointers of the inputs, then of the outputs (definition order), scalar
inputs by value (``double`` for floats, ``int64_t`` for integers), then each variable axis as ``int64_t``.
Grid, block and dynamic shared memory come from the solution's ``LaunchSpec``, evaluated over the workload's
axes. pycuda attaches to the device's primary context, the one torch uses (never ``pycuda.autoinit``, which
would make a second context whose pointers torch cannot use), and launches on torch's current stream.
pycuda is optional (the ``[gpu]`` extra): it is imported only when such a kernel is loaded.
"""

from __future__ import annotations

import atexit
import importlib
from collections.abc import Mapping
from typing import Any

import torch

from evoteam.gpu_bench.bindings import Call, KernelCallError, KernelLoadError
from evoteam.gpu_bench.bindings.cuda_c import check_on_gpu
from evoteam.gpu_bench.bindings.device import CUDA, current_stream_handle
from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.build.cuda.launch import Launch, LaunchError
from evoteam.gpu_bench.schema import Definition, LaunchSpec
from evoteam.gpu_bench.verify.inputs import Value

DEFAULT_SHARED_LIMIT = 48 * 1024
"""Dynamic shared memory beyond this needs the kernel's opt-in attribute."""

_attached: list[Any] = []
"""The primary context, once pushed for this process (pycuda's stack must hold it for modules to load)."""


def pycuda_driver() -> Any:
    """``pycuda.driver``, or a KernelLoadError that says how to get it."""
    try:
        return importlib.import_module("pycuda.driver")
    except ImportError as exc:
        raise KernelLoadError(
            f"the pycuda binding needs pycuda ({exc}); install it on the GPU machine: pip install 'evoteam[gpu]'"
        ) from None


def attach_primary_context(driver: Any) -> Any:
    """Pushes torch's device's primary context onto pycuda's context stack, once per process."""
    if _attached:
        return _attached[0]
    if not torch.cuda.is_available():
        raise KernelLoadError("the pycuda binding needs a CUDA GPU, and torch sees none in this worker")
    index = torch.cuda.current_device()  # initializes torch's runtime first: it retains the same context
    try:
        driver.init()
        context = driver.Device(index).retain_primary_context()
        context.push()
    except Exception as exc:
        raise KernelLoadError(f"pycuda cannot attach to the primary context of GPU {index}: {exc}") from None
    _attached.append(context)
    atexit.register(_detach, context)  # pycuda aborts at exit if its context stack is not empty
    return context


def _detach(context: Any) -> None:
    try:
        context.pop()
    except Exception:
        return


def argument_format(definition: Definition) -> str:
    """pycuda's struct format of the kernel's parameters: ``P`` pointers, ``d`` double, ``q`` int64."""
    fmt = ""
    for spec in definition.inputs.values():
        fmt += "P" if spec.shape is not None else ("d" if torch_dtype(spec.dtype).is_floating_point else "q")
    fmt += "P" * len(definition.outputs)
    fmt += "q" * len(definition.var_axes())
    return fmt


class PycudaKernel:
    destination_passing = True
    device = CUDA

    def __init__(self, cubin: str, symbol: str, definition: Definition, launch: LaunchSpec | None) -> None:
        if launch is None:
            raise KernelLoadError("the pycuda binding needs spec.launch: grid, block and shared_bytes expressions")
        try:
            self._launch = Launch(launch, definition.axes)
        except LaunchError as exc:
            raise KernelLoadError(str(exc)) from None
        self._definition = definition
        self._driver = pycuda_driver()
        attach_primary_context(self._driver)
        try:
            self._module = self._driver.module_from_file(cubin)
        except Exception as exc:
            raise KernelLoadError(f"cannot load the cubin {cubin}: {exc}") from None
        try:
            self._fn = self._module.get_function(symbol)
        except Exception:
            raise KernelLoadError(
                f'kernel {symbol!r} is not in the cubin (is it declared extern "C" __global__?)'
            ) from None
        self._fn.prepare(argument_format(definition))
        self._stream: Any = None
        self._shared_opt_in = DEFAULT_SHARED_LIMIT

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        check_on_gpu(inputs, outputs)
        try:
            geometry = self._launch.resolve(axes)
        except LaunchError as exc:
            raise KernelCallError(str(exc)) from None
        if geometry.shared_bytes > self._shared_opt_in:
            self._allow_shared(geometry.shared_bytes)
        args = self._arguments(inputs, outputs, axes)
        fn, grid, block, shared = self._fn, geometry.grid, geometry.block, geometry.shared_bytes
        if current_stream_handle() == 0:  # torch's default stream is the legacy default stream: pycuda's None

            def call() -> None:
                fn.prepared_async_call(grid, block, None, *args, shared_size=shared)

            return call
        # Another current stream: pycuda cannot wrap a foreign handle, so its own stream is ordered after
        # torch's and torch's after it; events recorded on torch's stream then bracket the kernel.
        if self._stream is None:
            self._stream = self._driver.Stream()
        cuda: Any = torch.cuda  # ExternalStream is untyped
        own, bridge = self._stream, cuda.ExternalStream(self._stream.handle)
        current = torch.cuda.current_stream()

        def bridged() -> None:
            bridge.wait_stream(current)
            fn.prepared_async_call(grid, block, own, *args, shared_size=shared)
            current.wait_stream(bridge)

        return bridged

    def _arguments(
        self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]
    ) -> list[int | float]:
        args: list[int | float] = []
        for name, spec in self._definition.inputs.items():
            value = inputs[name]
            if isinstance(value, torch.Tensor):
                args.append(_pointer(name, value))
            elif torch_dtype(spec.dtype).is_floating_point:
                args.append(float(value))
            else:
                args.append(int(value))
        args += [_pointer(name, outputs[name]) for name in self._definition.outputs]
        args += [int(axes[name]) for name in self._definition.var_axes()]
        return args

    def _allow_shared(self, nbytes: int) -> None:
        """Opts the kernel in to more than 48 KiB of dynamic shared memory (Hopper allows up to 227 KiB)."""
        try:
            attribute = self._driver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._fn.set_attribute(attribute, nbytes)
        except Exception as exc:
            raise KernelCallError(f"cannot allow {nbytes} bytes of dynamic shared memory: {exc}") from None
        self._shared_opt_in = nbytes


def _pointer(name: str, tensor: torch.Tensor) -> int:
    if not tensor.is_contiguous():
        raise KernelCallError(f"tensor {name!r} is not contiguous; kernels take dense row-major buffers")
    return int(tensor.data_ptr())
