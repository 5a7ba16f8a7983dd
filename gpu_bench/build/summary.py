"""How a task's candidates are built, in one line for the agents' prompt: the compiler and the flags the
builder adds and the task gives (``evoteam.toml``'s ``flags``, else the defaults); with ``identify``, the
compiler's own version line (which runs it)."""

from __future__ import annotations

import functools

from evoteam.gpu_bench.build.builder import DEFAULT_CXX_FLAGS, compiler_identity, cxx_compiler
from evoteam.gpu_bench.build.cuda.nvcc import DEFAULT_NVCC_FLAGS, find_nvcc, nvcc_identity


def build_summary(language: str, target: str, flags: list[str] | None, identify: bool = False) -> str:
    """``language`` ``cpp``, ``cuda`` or ``python``; ``target`` ``cpu`` or the CUDA architecture."""
    if language == "python":
        return "Python: no compile step (the source is imported by the worker)"
    if language == "cuda":
        nvcc = find_nvcc()
        chosen = " ".join(flags if flags is not None else DEFAULT_NVCC_FLAGS)
        who = "nvcc (not found on this machine)" if nvcc is None else (_version(nvcc, True) if identify else nvcc)
        return f"{who}; flags: {chosen} for {target} (-gencode arch=compute_*,code=[{target},compute_*])"
    chosen = " ".join(flags if flags is not None else DEFAULT_CXX_FLAGS)
    who = _version(cxx_compiler(), False) if identify else cxx_compiler()
    return f"{who}; flags: -shared -fPIC {chosen}"


@functools.cache
def _version(compiler: str, nvcc: bool) -> str:
    """The compiler's version line, asked once per process."""
    return nvcc_identity(compiler) if nvcc else compiler_identity(compiler)
