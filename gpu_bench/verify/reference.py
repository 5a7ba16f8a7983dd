"""Turns a definition's reference source into a solution, so the reference is timed like any candidate."""

from __future__ import annotations

from evoteam.gpu_bench.schema import Binding, BuildSpec, Definition, Language, Solution, SourceFile

REFERENCE_FILE = "reference.py"


def reference_solution(definition: Definition, target: str = "cpu") -> Solution:
    """The definition's ``run`` as a value-returning Python solution."""
    return Solution(
        name=f"{definition.name}__reference",
        definition=definition.name,
        author="flashinfer-trace",
        spec=BuildSpec(
            language=Language.PYTHON,
            target_hardware=[target],
            entry_point=f"{REFERENCE_FILE}::run",
            destination_passing_style=False,
            binding=Binding.PYTHON,
        ),
        sources=[SourceFile(path=REFERENCE_FILE, content=definition.reference)],
        description="The definition's reference implementation.",
    )


def is_reference(solution: Solution, definition: Definition) -> bool:
    """Whether ``solution`` is the definition's own reference (its one source is the definition's ``run``):
    the task's ground truth, trusted, not a candidate to test for cheating."""
    return (
        solution.spec.language == Language.PYTHON
        and len(solution.sources) == 1
        and solution.sources[0].content == definition.reference
    )
