"""Describes the machine and libraries an evaluation ran on (FlashInfer-Bench ``Environment``)."""

from __future__ import annotations

import functools
import platform
import sys
from importlib import metadata
from pathlib import Path

from evoteam.gpu_bench.build.builder import compiler_identity, cxx_compiler
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc, nvcc_identity
from evoteam.gpu_bench.schema import Environment


@functools.cache
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def gpu_name() -> str | None:
    """The name of the GPU this process sees, when torch is already loaded and a GPU is there."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        name: str = torch.cuda.get_device_name(0)
    except Exception:  # a broken driver is not a reason to lose the result
        return None
    return name


def environment() -> Environment:
    libs = {"python": platform.python_version(), "cxx": compiler_identity(cxx_compiler())}
    for package in ("torch", "evoteam", "apache-tvm-ffi", "pycuda"):
        try:
            libs[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    compiler = find_nvcc()
    if compiler is not None:
        libs["nvcc"] = nvcc_identity(compiler)
    gpu = gpu_name()
    hardware = f"GPU: {gpu} · CPU: {cpu_name()}" if gpu else f"CPU: {cpu_name()}"
    return Environment(hardware=hardware, libs=libs)
