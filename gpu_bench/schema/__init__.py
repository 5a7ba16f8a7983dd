"""FlashInfer-Bench's data model (exact JSON field names and statuses), plus evoteam's REJECTED status."""

from evoteam.gpu_bench.schema.compile import Diagnostic, KernelResources, Related, Severity
from evoteam.gpu_bench.schema.definition import AxisConst, AxisVar, Definition, DType, TensorSpec
from evoteam.gpu_bench.schema.solution import Binding, BuildSpec, Language, LaunchSpec, Solution, SourceFile
from evoteam.gpu_bench.schema.trace import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    Trace,
)
from evoteam.gpu_bench.schema.workload import (
    Fill,
    FillInput,
    GeneratedInput,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Workload,
)

__all__ = [
    "AxisConst",
    "AxisVar",
    "Binding",
    "BuildSpec",
    "Correctness",
    "DType",
    "Definition",
    "Diagnostic",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "Fill",
    "FillInput",
    "GeneratedInput",
    "KernelResources",
    "Language",
    "LaunchSpec",
    "Performance",
    "RandomInput",
    "Related",
    "SafetensorsInput",
    "ScalarInput",
    "Severity",
    "Solution",
    "SourceFile",
    "TensorSpec",
    "Trace",
    "Workload",
]
