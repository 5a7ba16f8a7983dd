"""``build_toolbox``: every tool of one agent, wired to its workspace and the run's shared services."""

from __future__ import annotations

from dataclasses import dataclass

from evoteam.gpu_bench.api import Constraints, Definition, KernelTask, Language, Solution
from evoteam.roles.agent_api import Submission
from evoteam.roles.knowledge import KnowledgeStore
from evoteam.roles.tools.assembly import AssemblyTool, Lister, default_lister
from evoteam.roles.tools.base import TOOL_NAMES, Author, Tool, Toolbox
from evoteam.roles.tools.candidate import kernel_files
from evoteam.roles.tools.compiler import Checker, CompileTool, default_checker
from evoteam.roles.tools.evaluation import EvaluateTool, EvaluationCache
from evoteam.roles.tools.files import DeleteTool, ListTool, StrReplaceTool, ViewTool, WriteTool
from evoteam.roles.tools.history import CandidateHistory, DiffTool, HistoryTool, NoHistory
from evoteam.roles.tools.notes import ReadKnowledgeTool, WriteNoteTool
from evoteam.roles.tools.patch import PatchTool
from evoteam.roles.tools.profiling import NcuProfiler, PerfProfiler, Profiler, ProfileTool, TimingProfiler
from evoteam.roles.tools.sanitize import Sanitizer, SanitizeTool, local_sanitizer
from evoteam.roles.tools.scratch import ScratchTestTool
from evoteam.roles.tools.submit import SubmitCandidateTool
from evoteam.roles.workspace import Workspace


@dataclass
class ToolServices:
    """What the tools of a run share. ``evaluations`` should be one ``EvaluationCache`` per run, so the same
    content is evaluated once whoever asks; ``constraints`` are the round's for the compile tool (default: the
    task's) — give the evaluation service the same ones (``TaskEvaluations(..., constraints=...)``)."""

    definition: Definition
    evaluations: EvaluationCache
    knowledge: KnowledgeStore
    checker: Checker = default_checker
    lister: Lister = default_lister
    sanitizer: Sanitizer = local_sanitizer
    profiler: Profiler | None = None
    """None: ``TimingProfiler`` over ``evaluations``, with ``NcuProfiler``'s counters for CUDA kernels and
    ``PerfProfiler``'s for C++ ones."""
    constraints: Constraints | None = None
    require_citations: bool = False
    """The supervisor's knowledge policy: a strategy or failed attempt must name an evaluated candidate."""
    history: CandidateHistory | None = None
    """The run's candidates for the history and diff tools; None: outside a run (none)."""
    parent: Solution | None = None
    """The round's start when it is not the incumbent ``evaluations`` time against (a best found in an earlier
    round): a candidate a note names is timed against it."""


def build_toolbox(
    task: KernelTask,
    workspace: Workspace,
    services: ToolServices,
    author: Author,
    submissions: list[Submission],
) -> Toolbox:
    """All tools, in ``TOOL_NAMES`` order; narrow it with ``toolbox.only(role.tools)``. ``submissions`` is the
    list the submit tool appends to (the one in the agent's ``AgentContext``)."""
    name = services.definition.name
    profiler = services.profiler or TimingProfiler(services.evaluations)
    if services.profiler is None and task.language == Language.CUDA:
        profiler = NcuProfiler(profiler, task)
    elif services.profiler is None and task.language == Language.CPP:
        profiler = PerfProfiler(profiler, task)
    history: CandidateHistory = services.history or NoHistory()
    tools: list[Tool] = [
        ViewTool(workspace),
        ListTool(workspace),
        HistoryTool(history),
        DiffTool(task, workspace, history),
        WriteTool(workspace),
        StrReplaceTool(workspace),
        PatchTool(workspace),
        DeleteTool(workspace, kernel_files(task)),
        CompileTool(task, workspace, name, author, services.checker, services.constraints),
        AssemblyTool(task, workspace, name, author, services.lister),
        ScratchTestTool(task, workspace, services.definition, services.evaluations, author),
        EvaluateTool(task, workspace, name, services.evaluations, author),
        ProfileTool(task, workspace, name, profiler, author),
        SanitizeTool(task, workspace, services.definition, author, services.sanitizer),
        ReadKnowledgeTool(services.knowledge),
        WriteNoteTool(services.knowledge, author, services.evaluations, services.parent, services.require_citations),
        SubmitCandidateTool(task, workspace, name, services.evaluations, author, submissions),
    ]
    assert tuple(t.name for t in tools) == TOOL_NAMES
    return Toolbox(tools)
