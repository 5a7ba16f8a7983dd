"""Loads a built solution as a ``Kernel`` for its binding."""

from __future__ import annotations

from evoteam.gpu_bench.bindings import Kernel, KernelLoadError
from evoteam.gpu_bench.bindings.c_abi import CKernel
from evoteam.gpu_bench.bindings.python_fn import PythonKernel
from evoteam.gpu_bench.bindings.tvm_ffi import TvmFfiKernel
from evoteam.gpu_bench.schema import Binding, Definition, Solution


def load_kernel(solution: Solution, artifact: str, definition: Definition) -> Kernel:
    spec = solution.spec
    binding = spec.resolved_binding()
    if binding in (Binding.C, Binding.TVM_FFI) and not spec.destination_passing_style:
        raise KernelLoadError(f"the {binding.value} binding is destination-passing only")
    if binding == Binding.C:
        return CKernel(artifact, spec.entry_symbol, definition)
    if binding == Binding.TVM_FFI:
        return TvmFfiKernel(artifact, spec.entry_symbol, definition)
    if binding == Binding.PYTHON:
        return PythonKernel(artifact, spec.entry_file, spec.entry_symbol, definition, spec.destination_passing_style)
    raise KernelLoadError(f"binding {binding.value!r} is not supported by this evaluator")
