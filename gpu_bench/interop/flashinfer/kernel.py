"""The starting kernel of an imported FlashInfer Trace definition: its reference, or a given Solution.

An evoteam task calls its source in destination-passing style (``run(*inputs, *outputs)``), so a
value-returning Python entry point (every definition's reference, or a Solution with
``destination_passing_style: false``) is written with a small wrapper appended: the original function is
kept under ``_value_returning_<entry>`` and ``<entry>`` copies its results into the output tensors.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from evoteam.gpu_bench.build.cuda.nvcc import resolve_arch
from evoteam.gpu_bench.schema import Binding, Definition, Language, LaunchSpec, Solution


class KernelImportError(ValueError):
    """A given solution cannot become an evoteam task; the message says why."""


@dataclass
class StartingKernel:
    """Files (paths relative to the task folder) and the ``[[kernel]]`` fields that call them."""

    files: dict[str, str]
    source: str
    language: Language
    binding: Binding
    entry: str
    target: str
    extra_sources: list[str] = field(default_factory=list)
    flags: list[str] | None = None
    launch: LaunchSpec | None = None


def reference_kernel(definition: Definition, target: str = "cpu") -> StartingKernel:
    """``kernels/<definition>.py``: the reference with a destination-passing ``run``."""
    path = f"kernels/{definition.name}.py"
    header = (
        f"# Starting solution for {definition.name}: the definition's reference, imported from FlashInfer Trace.\n"
        "# evoteam calls run(*inputs, *outputs) and times it against the reference; make it faster.\n\n"
    )
    content = header + dps_wrapper(definition.reference, "run", definition)
    return StartingKernel({path: content}, path, Language.PYTHON, Binding.PYTHON, "run", target)


def solution_kernel(solution: Solution, definition: Definition, target: str | None = None) -> StartingKernel:
    """The solution's sources under ``kernels/<definition>/``, with the fields of its build spec."""
    if solution.definition != definition.name:
        raise KernelImportError(f"solution {solution.name!r} is for {solution.definition!r}, not {definition.name!r}")
    spec = solution.spec
    binding = spec.resolved_binding()
    if binding == Binding.TORCH:
        raise KernelImportError(f"solution {solution.name!r} uses the torch binding, which evoteam cannot call")
    if spec.language == Language.CUDA and binding not in (Binding.C, Binding.PYCUDA):
        raise KernelImportError(
            f"solution {solution.name!r} is CUDA with the {binding.value} binding; evoteam runs CUDA with the c "
            "or pycuda binding"
        )
    if not spec.destination_passing_style and binding != Binding.PYTHON:
        raise KernelImportError(f"solution {solution.name!r} returns its outputs, which only the python binding allows")
    nested = [s.path for s in solution.sources if len(PurePosixPath(s.path).parts) != 1]
    if nested:
        raise KernelImportError(
            f"solution {solution.name!r} has sources in subfolders {nested}; an evoteam task keeps them in one folder"
        )
    folder = f"kernels/{definition.name}"
    files = {}
    for source in solution.sources:
        content = source.content
        if source.path == spec.entry_file and not spec.destination_passing_style:
            content = dps_wrapper(content, spec.entry_symbol, definition)
        files[f"{folder}/{source.path}"] = content
    return StartingKernel(
        files=files,
        source=f"{folder}/{spec.entry_file}",
        language=spec.language,
        binding=binding,
        entry=spec.entry_symbol,
        target=target or target_of(spec.target_hardware),
        extra_sources=[f"{folder}/{s.path}" for s in solution.sources if s.path != spec.entry_file],
        flags=spec.compile_flags,
        launch=spec.launch,
    )


def target_of(target_hardware: list[str]) -> str:
    """evoteam's target for FlashInfer-Bench's ``target_hardware``: ``cpu``, or a CUDA architecture."""
    return resolve_arch(target_hardware) or "cpu"


def dps_wrapper(source: str, symbol: str, definition: Definition) -> str:
    """``source`` whose value-returning ``symbol`` is replaced by a destination-passing one."""
    inputs, outputs = list(definition.inputs), list(definition.outputs)
    names = [*inputs, *outputs]
    plain = all(n.isidentifier() and not keyword.iskeyword(n) for n in names) and len(set(names)) == len(names)
    kept = f"_value_returning_{symbol}"
    if plain:
        signature, call_args, targets = ", ".join(names), ", ".join(inputs), ", ".join(outputs)
        targets_tuple = f"({targets},)" if len(outputs) == 1 else f"({targets})"
    else:
        signature, call_args, targets_tuple = "*args", f"*args[:{len(inputs)}]", f"args[{len(inputs)}:]"
    return (
        source.rstrip()
        + "\n\n\n"
        + f"{kept} = {symbol}\n\n\n"
        + f"def {symbol}({signature}):\n"
        + '    """Destination-passing entry point: inputs then outputs in definition order."""\n'
        + "    import torch as _torch\n\n"
        + f"    result = {kept}({call_args})\n"
        + "    if isinstance(result, dict):\n"
        + f"        result = tuple(result[name] for name in {outputs!r})\n"
        + "    elif not isinstance(result, (tuple, list)):\n"
        + "        result = (result,)\n"
        + f"    for target, value in zip({targets_tuple}, result, strict=True):\n"
        + "        target.copy_(_torch.as_tensor(value))\n"
    )
