"""Loads a built solution as a ``Kernel`` for its language and binding (CPU or CUDA)."""

from __future__ import annotations

import torch

from evoteam.gpu_bench.bindings import Kernel, KernelLoadError
from evoteam.gpu_bench.bindings.c_abi import CKernel
from evoteam.gpu_bench.bindings.device import CUDA, device_for
from evoteam.gpu_bench.bindings.python_fn import PythonKernel
from evoteam.gpu_bench.bindings.tvm_ffi import TvmFfiKernel
from evoteam.gpu_bench.schema import Binding, Definition, Language, Solution


def load_kernel(solution: Solution, artifact: str, definition: Definition, isolate: bool = False) -> Kernel:
    """The solution's kernel; with ``isolate``, a C ABI kernel on the CPU runs in a native host process of its
    own (``host.py``) and a Python or tvm-ffi one on the CPU in a Python host (``python_host.py``), not in the
    caller's."""
    spec = solution.spec
    binding = spec.resolved_binding()
    if binding in (Binding.C, Binding.TVM_FFI, Binding.PYCUDA) and not spec.destination_passing_style:
        raise KernelLoadError(f"the {binding.value} binding is destination-passing only")
    if spec.language == Language.CUDA:
        return _load_cuda(solution, artifact, definition, binding)
    if binding == Binding.PYCUDA:
        raise KernelLoadError(f"the pycuda binding loads a CUDA cubin, not a {spec.language.value} solution")
    if binding == Binding.C:
        if isolate:
            from evoteam.gpu_bench.bindings.host import HostKernel

            return HostKernel(artifact, spec.entry_symbol, definition)
        return CKernel(artifact, spec.entry_symbol, definition)
    if binding == Binding.TVM_FFI:
        if isolate:
            from evoteam.gpu_bench.bindings.python_host import TvmFfiHostKernel

            return TvmFfiHostKernel(artifact, spec.entry_symbol, definition)
        return TvmFfiKernel(artifact, spec.entry_symbol, definition)
    if binding == Binding.PYTHON:
        device = device_for(spec.target_hardware)
        if device == CUDA:
            _need_gpu(solution)
        dps = spec.destination_passing_style
        if isolate and device != CUDA:
            from evoteam.gpu_bench.bindings.python_host import PythonHostKernel

            return PythonHostKernel(artifact, spec.entry_file, spec.entry_symbol, definition, dps)
        return PythonKernel(artifact, spec.entry_file, spec.entry_symbol, definition, dps, device)
    raise KernelLoadError(f"binding {binding.value!r} is not supported by this evaluator")


def runs_in_caller(solution: Solution, isolate: bool) -> bool:
    """Whether ``load_kernel(..., isolate)`` runs the solution's code (its library's constructors included) in
    the calling process: always without ``isolate``; with it, a kernel on a GPU (a CUDA solution, or a Python
    one whose target is a GPU), for which there is no host yet."""
    if not isolate:
        return True
    spec = solution.spec
    on_gpu = spec.resolved_binding() == Binding.PYTHON and device_for(spec.target_hardware) == CUDA
    return spec.language == Language.CUDA or on_gpu


def _load_cuda(solution: Solution, artifact: str, definition: Definition, binding: Binding) -> Kernel:
    spec = solution.spec
    if binding not in (Binding.C, Binding.PYCUDA):
        raise KernelLoadError(f"CUDA solutions use the c or pycuda binding, not {binding.value!r}")
    _need_gpu(solution)
    if binding == Binding.C:
        from evoteam.gpu_bench.bindings.cuda_c import CudaCKernel

        return CudaCKernel(artifact, spec.entry_symbol, definition)
    from evoteam.gpu_bench.bindings.pycuda_kernel import PycudaKernel

    return PycudaKernel(artifact, spec.entry_symbol, definition, spec.launch)


def _need_gpu(solution: Solution) -> None:
    if not torch.cuda.is_available():
        targets = ", ".join(solution.spec.target_hardware)
        raise KernelLoadError(
            f"{solution.name} runs on a GPU (target {targets}), and this worker sees no CUDA device "
            "(a CPU-only torch, no driver, or CUDA_VISIBLE_DEVICES hides it)"
        )
