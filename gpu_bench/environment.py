"""Describes the machine and libraries an evaluation ran on (FlashInfer-Bench ``Environment``)."""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from pathlib import Path

from evoteam.gpu_bench.build import compiler_identity, cxx_compiler
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


def environment() -> Environment:
    libs = {"python": platform.python_version(), "cxx": compiler_identity(cxx_compiler())}
    for package in ("torch", "evoteam", "apache-tvm-ffi"):
        try:
            libs[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return Environment(hardware=f"CPU: {cpu_name()}", libs=libs)
