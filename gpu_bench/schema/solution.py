"""FlashInfer-Bench ``Solution``: the sources of a candidate and how to build and call it."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import Field, model_validator

from evoteam.gpu_bench.schema._base import Model, NonEmptyStr


class Language(StrEnum):
    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    TILELANG = "tilelang"


class Binding(StrEnum):
    """How the harness calls the entry point.

    ``tvm-ffi`` and ``torch`` are FlashInfer-Bench's; ``c`` (evoteam's plain C ABI called through ctypes) and
    ``python`` (a function on torch tensors) are evoteam's.
    """

    TVM_FFI = "tvm-ffi"
    TORCH = "torch"
    C = "c"
    PYTHON = "python"
    PYCUDA = "pycuda"
    """evoteam's: an ``extern "C" __global__`` kernel loaded from the nvcc-built cubin and launched with pycuda."""


class LaunchSpec(Model):
    """evoteam extension for the ``pycuda`` binding: grid and block as expressions over the definition's
    axes (integers, + - * // %, ``ceil_div(a, b)``, ``min``, ``max``), and dynamic shared memory in bytes."""

    grid: list[NonEmptyStr] = Field(min_length=1, max_length=3)
    block: list[NonEmptyStr] = Field(min_length=1, max_length=3)
    shared_bytes: NonEmptyStr = "0"


class SourceFile(Model):
    path: NonEmptyStr
    content: str

    @model_validator(mode="after")
    def _relative(self) -> SourceFile:
        path = PurePosixPath(self.path)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"source path must be relative and stay inside the solution: {self.path!r}")
        return self


class BuildSpec(Model):
    language: Language
    target_hardware: list[NonEmptyStr] = Field(min_length=1)
    entry_point: NonEmptyStr
    dependencies: list[NonEmptyStr] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Binding | None = None
    # evoteam extension: compiler flags for cpp/cuda builds (FlashInfer-Bench has none).
    compile_flags: list[str] | None = None
    # evoteam extension: launch geometry for the pycuda binding.
    launch: LaunchSpec | None = None

    @model_validator(mode="after")
    def _entry(self) -> BuildSpec:
        if self.entry_point.count("::") != 1 or not all(self.entry_point.split("::")):
            raise ValueError(f"entry_point must be '<file>::<symbol>', got {self.entry_point!r}")
        return self

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_symbol(self) -> str:
        return self.entry_point.split("::")[1]

    def resolved_binding(self) -> Binding:
        """The binding in force: the one given, else the language's default."""
        if self.binding is not None:
            return self.binding
        if self.language in (Language.PYTHON, Language.TRITON, Language.TILELANG):
            return Binding.PYTHON
        return Binding.TVM_FFI


class Solution(Model):
    name: NonEmptyStr
    definition: NonEmptyStr
    author: NonEmptyStr
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str = ""

    @model_validator(mode="after")
    def _sources(self) -> Solution:
        paths = [s.path for s in self.sources]
        if len(set(paths)) != len(paths):
            raise ValueError(f"duplicate source paths in {paths}")
        if self.spec.entry_file not in paths:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources {paths}")
        return self

    def content_hash(self) -> str:
        """A digest of everything that changes what is built and called (not name or author)."""
        h = hashlib.sha256()
        h.update(self.spec.model_dump_json().encode())
        for source in sorted(self.sources, key=lambda s: s.path):
            h.update(b"\0" + source.path.encode() + b"\0" + source.content.encode())
        return h.hexdigest()
