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
