"""The ``python`` binding: a function on torch tensors, ``run(*inputs, *outputs)`` or ``run(*inputs)``.

Its tensors live on the CPU when the solution targets ``cpu``, and on the GPU otherwise (Triton, CUDA Python).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from evoteam.gpu_bench.bindings import Call, KernelLoadError
from evoteam.gpu_bench.schema import Definition
from evoteam.gpu_bench.verify.inputs import Value


class PythonKernel:
    def __init__(
        self, folder: str, entry_file: str, symbol: str, definition: Definition, dps: bool, device: str = "cpu"
    ) -> None:
        self.destination_passing = dps
        self.device = device
        self._definition = definition
        self._fn = load_function(Path(folder), entry_file, symbol)

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        args = [inputs[n] for n in self._definition.inputs]
        if self.destination_passing:
            args += [outputs[n] for n in self._definition.outputs]
        fn = self._fn
        return lambda: fn(*args)


def load_function(folder: Path, entry_file: str, symbol: str) -> Callable[..., Any]:
    """Imports ``entry_file`` of ``folder`` (the folder on ``sys.path`` while it imports) and returns its ``symbol``."""
    path = folder / entry_file
    module_name = f"evoteam_solution_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise KernelLoadError(f"cannot import {entry_file}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    # Registered while it runs, as an import would: dataclasses, pickling and inspect look the module up by name.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise KernelLoadError(f"importing {entry_file} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(folder))
    fn = getattr(module, symbol, None)
    if not callable(fn):
        raise KernelLoadError(f"{entry_file} defines no function {symbol!r}")
    return fn  # type: ignore[no-any-return]
