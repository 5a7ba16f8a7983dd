"""Strict prompt templates: ``string.Template`` where an unknown or missing variable is an error, never blank.

Also builds the variables from a kernel task (definition summary, constraints, knowledge). Imports only
``evoteam.gpu_bench`` and the standard library.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

from evoteam.gpu_bench.api import AxisConst, Constraints, Definition, KernelTask, Workload, build_summary

KNOWN_VARIABLES: dict[str, str] = {
    "kernel": "the kernel task's name",
    "language": "the kernel's language (cpp, cuda, python, ...)",
    "target": "cpu or the CUDA architecture (sm_90a, ...)",
    "entry_file": "the workspace file that holds the entry point",
    "entry": "the exported symbol the harness calls",
    "definition_summary": "the operation: axes, inputs, outputs, reference code, workloads",
    "constraints": "the active constraints on generated code, one per line",
    "brief": "the supervisor's instructions for this round",
    "knowledge": "what the knowledge store holds for this kernel (a summary)",
    "role": "the role's name",
    "tools": "the tools this role may use, comma separated",
    "build": "the compiler (its version) and the flags candidates are built with",
    "tolerance": "atol and rtol, and how an output element fails",
    "baseline": "what candidates are timed against, and how",
    "workloads": "every workload, one per line: its axes and id",
    "machine": "the machine candidates run on: CPU, SIMD, caches, memory, GPU",
}
"""Every variable a template may use, with what it holds."""


class PromptError(ValueError):
    """A template uses a variable nobody knows, lacks a value for one, or has a stray ``$``."""


@cache
def package_prompt(name: str) -> str:
    """The template ``roles/prompts/<name>.md`` shipped with the package (``system``, ``task``, a role's)."""
    path = resources.files("evoteam.roles").joinpath("prompts", f"{name}.md")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"there is no packaged prompt named {name!r} (roles/prompts/{name}.md)") from None


def template_variables(template: str, where: str) -> list[str]:
    """The variables ``template`` uses; raises ``PromptError`` for a malformed ``$`` or an unknown name."""
    tpl = string.Template(template)
    if not tpl.is_valid():
        raise PromptError(f"{where}: {_first_invalid(template)}; write $$ for a literal dollar sign")
    names = tpl.get_identifiers()
    unknown = [n for n in names if n not in KNOWN_VARIABLES]
    if unknown:
        known = ", ".join(f"${k}" for k in KNOWN_VARIABLES)
        raise PromptError(f"{where}: unknown variable(s) {', '.join('$' + n for n in unknown)} (known: {known})")
    return names


def render(template: str, variables: Mapping[str, str], where: str = "template") -> str:
    """``template`` with every ``$name`` replaced; ``where`` names the template in errors."""
    names = template_variables(template, where)
    missing = [n for n in names if n not in variables]
    if missing:
        raise PromptError(f"{where}: no value for {', '.join('$' + n for n in missing)}")
    return string.Template(template).substitute({n: variables[n] for n in names})


def _first_invalid(template: str) -> str:
    for match in string.Template.pattern.finditer(template):
        if match.group("invalid") is not None:
            offset = match.start("invalid") - 1  # the group is empty, just after the "$"
            line = template.count("\n", 0, offset) + 1
            column = offset - (template.rfind("\n", 0, offset) + 1) + 1
            return f"line {line}, column {column}: a '$' not followed by a variable name"
    return "a '$' not followed by a variable name"


class TaskPrompt(BaseModel):
    """The task-side prompt variables of one kernel (everything but the role, its tools and the brief)."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    language: str
    target: str
    entry_file: str
    entry: str
    definition_summary: str
    constraints: str
    knowledge: str
    build: str = "(not described)"
    """The compiler and flags candidates are built with."""
    tolerance: str = "(not described)"
    baseline: str = "(not described)"
    """What candidates are timed against."""
    workloads: str = "(none listed)"
    """Every workload: its name and axes."""
    machine: str = "(not described)"
    """The machine candidates run on: CPU, SIMD, caches, memory, GPU."""

    def variables(self, role: str, tools: Sequence[str], brief: str) -> dict[str, str]:
        values = self.model_dump()
        values.update(role=role, tools=", ".join(tools), brief=brief or "(no brief this round)")
        return values


def task_prompt(
    task: KernelTask,
    definition: Definition,
    workloads: Sequence[Workload] = (),
    knowledge: str = "",
    constraints: Constraints | None = None,
    machine: str = "",
    incumbent: str = "the start kernel (the files as the run found them)",
    build: str | None = None,
) -> TaskPrompt:
    """The prompt variables of ``task``; ``constraints`` (the round's) default to the task's own; ``machine``:
    the facts of the machine candidates run on; ``incumbent``: what candidates are timed against; ``build``:
    how they are built (default: the compiler's name and the flags, without running it)."""
    tol = task.tolerance
    return TaskPrompt(
        kernel=task.name,
        language=task.language.value,
        target=task.target,
        entry_file=task.source.name,
        entry=task.entry,
        definition_summary=definition_summary(definition, workloads),
        constraints=constraints_text(constraints if constraints is not None else task.constraints),
        knowledge=knowledge or "(nothing recorded yet)",
        build=build if build is not None else build_summary(task.language.value, task.target, task.flags),
        tolerance=(
            f"atol {tol.atol:g}, rtol {tol.rtol:g}: an output element fails only when its absolute error is over "
            "atol AND its relative error over rtol"
            if tol.rule == "flashinfer"
            else f"atol {tol.atol:g}, rtol {tol.rtol:g}: an output element fails when its absolute error is over "
            "atol + rtol * |expected| (torch.allclose)"
        ),
        baseline=(
            f"{incumbent}; speedups are over it, timed in the same session, interleaved call by call (the task's "
            f"own baseline is {task.baseline!r})"
        ),
        workloads=workloads_table(workloads),
        machine=machine or "(not described)",
    )


def definition_summary(definition: Definition, workloads: Sequence[Workload] = ()) -> str:
    lines = [f"{definition.name} ({definition.op_type})"]
    if definition.description:
        lines.append(definition.description)
    axes = []
    for name, axis in definition.axes.items():
        axes.append(f"{name}={axis.value}" if isinstance(axis, AxisConst) else f"{name} (variable)")
    lines.append("axes: " + ", ".join(axes))
    for title, tensors in (("inputs", definition.inputs), ("outputs", definition.outputs)):
        parts = [
            f"{n}[{', '.join(t.shape)}] {t.dtype}" if t.shape is not None else f"{n} (scalar) {t.dtype}"
            for n, t in tensors.items()
        ]
        lines.append(f"{title}: " + ", ".join(parts))
    if definition.constraints:
        lines.append("axis constraints: " + "; ".join(definition.constraints))
    if workloads:
        lines.append(f"workloads: {len(workloads)} (listed below)")
    lines.append("reference (the ground truth; outputs must match it within tolerance):")
    lines.append("```python\n" + definition.reference.strip() + "\n```")
    return "\n".join(lines)


WORKLOAD_ROWS = 200
"""Workloads listed one per line up to this many; beyond, the count of the rest."""


def workloads_table(workloads: Sequence[Workload]) -> str:
    """One line per workload: its axes (what varies), then its id."""
    if not workloads:
        return "(none listed)"
    rows = []
    for w in list(workloads)[:WORKLOAD_ROWS]:
        axes = ", ".join(f"{k}={v}" for k, v in w.axes.items()) or "(no variable axes)"
        rows.append(f"- {axes} ({w.uuid})")
    if len(workloads) > WORKLOAD_ROWS:
        rows.append(f"- ... {len(workloads) - WORKLOAD_ROWS} more, of the same axes")
    return "\n".join(rows)


def constraints_text(constraints: Constraints) -> str:
    if constraints.is_empty():
        return "(none)"
    lines = [f"- must contain the instruction {p!r}" for p in constraints.require]
    lines += [f"- must not contain the instruction {p!r}" for p in constraints.forbid]
    if constraints.max_registers is not None:
        lines.append(f"- at most {constraints.max_registers} registers per thread")
    if constraints.no_spills:
        lines.append("- no register spills")
    return "\n".join(lines)
