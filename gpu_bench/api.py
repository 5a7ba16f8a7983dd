"""The evaluator's public API: the one module that code outside ``gpu_bench/`` imports.

``roles/``, ``supervisor/``, ``server/``, ``cli/`` and ``benchmarks/`` reach the evaluator only through these
names (``tests/test_layout.py`` checks it); the stage folders behind them (``build/``, ``bindings/``,
``worker/``, ``verify/``, ``timing/``, ``profile/``, ``interop/``, ``remote/``, ``sandbox/``) may change
shape without their callers noticing. Grouped by the pipeline: data model → task → build → evaluate → time →
profile → runners → interop with public benchmarks.
"""

from __future__ import annotations

from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.bindings.c_abi import CKernel
from evoteam.gpu_bench.build.builder import BuildResult, build
from evoteam.gpu_bench.build.check import CheckResult, check_file, check_solution
from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.build.cuda.instruction_classes import CLASSES as INSTRUCTION_CLASSES
from evoteam.gpu_bench.build.cuda.instruction_classes import checkable, downgrades, instruction_classes, lost_classes
from evoteam.gpu_bench.build.cuda.nvcc import DEFAULT_ARCH, is_arch, resolve_arch
from evoteam.gpu_bench.build.cuda.resources import demangle
from evoteam.gpu_bench.build.listing import Listing, listing
from evoteam.gpu_bench.build.listing import View as ListingView
from evoteam.gpu_bench.build.summary import build_summary
from evoteam.gpu_bench.environment import cpu_name
from evoteam.gpu_bench.interop.flashinfer.dataset import (
    DatasetError,
    dataset_path,
    dataset_solutions,
    dataset_workloads,
    load_definitions,
    select,
)
from evoteam.gpu_bench.interop.flashinfer.emit import emit_dataset
from evoteam.gpu_bench.interop.flashinfer.export import (
    ExportError,
    append_traces,
    check_exportable,
    export_flashinfer,
    to_flashinfer_solution,
)
from evoteam.gpu_bench.interop.flashinfer.importer import FlashInferImportError, import_flashinfer, matched_ratio
from evoteam.gpu_bench.interop.flashinfer.importer import ImportOptions as FlashInferImportOptions
from evoteam.gpu_bench.interop.kernelbench.problem import ImportOptions as KernelBenchImportOptions
from evoteam.gpu_bench.interop.kernelbench.problem import (
    KernelBenchError,
    compiled_baseline,
    fitting_scale,
    import_problem,
)
from evoteam.gpu_bench.interop.kernelbench.source import SourceError, parse_override
from evoteam.gpu_bench.interop.kernelbench.write import write_task
from evoteam.gpu_bench.interop.size_cap import cap_for
from evoteam.gpu_bench.interop.synth.axes import workload_bytes
from evoteam.gpu_bench.machine import MachineFacts, machine_facts
from evoteam.gpu_bench.profile.ncu import (
    DEFAULT_SECTIONS,
    LocalHost,
    ProfileHost,
    ProfileReport,
    ProfileRequest,
    ProfileUnavailable,
    profile_workload,
    require_profiler,
)
from evoteam.gpu_bench.profile.ncu_csv import KernelProfile
from evoteam.gpu_bench.profile.perf import PerfHost, PerfRunner, perf_profile, require_perf
from evoteam.gpu_bench.profile.sanitizer import (
    LocalSanitizerHost,
    SanitizerReport,
    SanitizerTool,
    require_sanitizer,
    sanitize_workload,
)
from evoteam.gpu_bench.profile.sanitizer import render as render_sanitizer
from evoteam.gpu_bench.remote.gpu_queue import Factory, FnJob, GpuQueue
from evoteam.gpu_bench.remote.queue_runner import QueueRunner
from evoteam.gpu_bench.remote.scheduling import Utilization
from evoteam.gpu_bench.remote.select import make_runner, parse_runner
from evoteam.gpu_bench.result import CandidateResult, WorkloadResult, fast_p, overall_status, summarize
from evoteam.gpu_bench.runner import (
    BenchInputError,
    LocalRunner,
    Runner,
    WorkerStartError,
    WorkloadRun,
    default_memory_limit_mb,
)
from evoteam.gpu_bench.sandbox import Sandbox, SandboxUnavailable, agent_sandbox
from evoteam.gpu_bench.sandbox import current as current_sandbox
from evoteam.gpu_bench.schema import (
    AxisConst,
    Binding,
    BuildSpec,
    Definition,
    Diagnostic,
    EvaluationStatus,
    Fill,
    FillInput,
    GeneratedInput,
    KernelResources,
    Language,
    RandomInput,
    SafetensorsInput,
    Severity,
    Solution,
    SourceFile,
    Workload,
)
from evoteam.gpu_bench.task import (
    CONFIG_NAME,
    KernelTask,
    TaskError,
    Tolerance,
    dataset_root,
    find_config,
    find_task,
    load_definition,
    load_solution,
    load_tasks,
    load_workloads,
)
from evoteam.gpu_bench.timing.cpu import time_call
from evoteam.gpu_bench.timing.statistics import TimingConfig, TimingStats
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.__main__ import add_arguments as add_worker_arguments
from evoteam.gpu_bench.worker.__main__ import run as run_worker
from evoteam.gpu_bench.worker.evaluate import EvalConfig
from evoteam.gpu_bench.worker.threads import ThreadPolicy, parse_cpus
from evoteam.gpu_bench.worker.threads import default_policy as thread_policy

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_ARCH",
    "DEFAULT_SECTIONS",
    "INSTRUCTION_CLASSES",
    "AxisConst",
    "BenchInputError",
    "Binding",
    "BuildResult",
    "BuildSpec",
    "CKernel",
    "CandidateResult",
    "CheckResult",
    "Constraints",
    "DatasetError",
    "Definition",
    "Diagnostic",
    "EvalConfig",
    "EvaluationStatus",
    "Evaluator",
    "ExportError",
    "Factory",
    "Fill",
    "FillInput",
    "FlashInferImportError",
    "FlashInferImportOptions",
    "FnJob",
    "GeneratedInput",
    "GpuQueue",
    "KernelBenchError",
    "KernelBenchImportOptions",
    "KernelProfile",
    "KernelResources",
    "KernelTask",
    "Language",
    "Listing",
    "ListingView",
    "LocalHost",
    "LocalRunner",
    "LocalSanitizerHost",
    "MachineFacts",
    "PerfHost",
    "PerfRunner",
    "ProfileHost",
    "ProfileReport",
    "ProfileRequest",
    "ProfileUnavailable",
    "QueueRunner",
    "RandomInput",
    "Runner",
    "SafetensorsInput",
    "Sandbox",
    "SandboxUnavailable",
    "SanitizerReport",
    "SanitizerTool",
    "Severity",
    "Solution",
    "SourceError",
    "SourceFile",
    "TaskError",
    "ThreadPolicy",
    "TimingConfig",
    "TimingStats",
    "Tolerance",
    "Utilization",
    "WorkerStartError",
    "Workload",
    "WorkloadResult",
    "WorkloadRun",
    "add_worker_arguments",
    "agent_sandbox",
    "append_traces",
    "build",
    "build_summary",
    "cap_for",
    "check_exportable",
    "check_file",
    "check_solution",
    "checkable",
    "compiled_baseline",
    "cpu_name",
    "current_sandbox",
    "dataset_path",
    "dataset_root",
    "dataset_solutions",
    "dataset_workloads",
    "default_memory_limit_mb",
    "demangle",
    "downgrades",
    "emit_dataset",
    "export_flashinfer",
    "fast_p",
    "find_config",
    "find_task",
    "fitting_scale",
    "import_flashinfer",
    "import_problem",
    "instruction_classes",
    "is_arch",
    "listing",
    "load_definition",
    "load_definitions",
    "load_solution",
    "load_tasks",
    "load_workloads",
    "lost_classes",
    "machine_facts",
    "make_runner",
    "matched_ratio",
    "overall_status",
    "parse_cpus",
    "parse_override",
    "parse_runner",
    "perf_profile",
    "profile_workload",
    "reference_solution",
    "render_sanitizer",
    "require_perf",
    "require_profiler",
    "require_sanitizer",
    "resolve_arch",
    "run_worker",
    "sanitize_workload",
    "select",
    "summarize",
    "thread_policy",
    "time_call",
    "to_flashinfer_solution",
    "workload_bytes",
    "write_task",
]
