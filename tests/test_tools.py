"""The agent tools one by one: file tools confined to the workspace, compile, evaluate, profile, knowledge, submit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conftest import KERNELS, scale_add_task
from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.build.check import CheckResult, check_solution
from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.result import CandidateResult, WorkloadResult, summarize
from evoteam.gpu_bench.schema import Diagnostic, EvaluationStatus, KernelResources, Language, Severity, Solution
from evoteam.roles.agent_api import Submission
from evoteam.roles.builtin import builtin_roles
from evoteam.roles.knowledge import Kind, KnowledgeStore
from evoteam.roles.tools import TOOL_NAMES, Author, Toolbox
from evoteam.roles.tools import files as file_tools
from evoteam.roles.tools.candidate import seed_workspace, workspace_solution
from evoteam.roles.tools.compiler import FakeChecker
from evoteam.roles.tools.evaluation import EvaluationCache, FakeEvaluations, scripted_result
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.tools.profiling import FakeProfiler, ProfileReport, TimingProfiler, WorkloadProfile
from evoteam.roles.tools.submit import candidate_name
from evoteam.roles.workspace import Workspace

AUTHOR = Author(role="Optimizer", agent_id="opt-1", round=2)


class Kit:
    """A seeded workspace, fake services and the full toolbox over them."""

    def __init__(
        self,
        tmp_path: Path,
        checker: FakeChecker | None = None,
        profiler: FakeProfiler | None = None,
        timing_only: bool = False,
    ):
        self.task = scale_add_task(constraints={"max_registers": 64})
        self.workspace = seed_workspace(self.task, tmp_path / "ws")
        self.fake = FakeEvaluations(lambda s: scripted_result(s.name, {"small": 1.5, "large": 0.8}))
        self.knowledge = KnowledgeStore(tmp_path / "repo", "scale_add")
        self.checker = checker or FakeChecker(CheckResult(ok=True))
        self.submissions: list[Submission] = []
        evaluations = EvaluationCache(self.fake)
        services = ToolServices(
            definition=self.task.load_definition(),
            evaluations=evaluations,
            knowledge=self.knowledge,
            checker=self.checker,
            profiler=TimingProfiler(evaluations) if timing_only else profiler,
        )
        self.toolbox = build_toolbox(self.task, self.workspace, services, AUTHOR, self.submissions)

    def call(self, name: str, **args: object) -> tuple[str, bool, dict[str, Any] | None]:
        result = self.toolbox.call(name, args)
        return result.content, result.is_error, result.data


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


# -- file tools -------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_view_numbers_lines_and_shows_a_range(kit: Kit) -> None:
    content, error, _ = kit.call("view", path="honest.cpp")
    assert not error
    assert content.splitlines()[0] == "    1\t#include <cstdint>"
    content, error, _ = kit.call("view", path="honest.cpp", start_line=3, end_line=4)
    assert not error
    assert [line.split("\t")[0].strip() for line in content.splitlines()] == ["3", "4"]
    assert "out[i] = 2.0f * x[i] + y[i]" in content


@pytest.mark.unit
def test_view_errors_are_results(kit: Kit, tmp_path: Path) -> None:
    assert kit.call("view", path="nope.cpp")[:2] == ("'nope.cpp' does not exist", True)
    assert kit.call("view", path=".")[1]
    assert "past the end" in kit.call("view", path="honest.cpp", start_line=99)[0]
    (kit.workspace.root / "blob.bin").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in kit.call("view", path="blob.bin")[0]
    (kit.workspace.root / "big.txt").write_text("x" * (file_tools.MAX_READ_BYTES + 1))
    content, error, _ = kit.call("view", path="big.txt")
    assert error and "more than" in content


@pytest.mark.unit
@pytest.mark.parametrize("tool", ["view", "write", "str_replace", "list"])
@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt", "escape/secret.txt"])
def test_every_file_tool_refuses_paths_out_of_the_workspace(kit: Kit, tmp_path: Path, tool: str, path: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("hidden words\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("hidden words\n")
    (kit.workspace.root / "escape").symlink_to(tmp_path / "elsewhere")
    args: dict[str, object] = {"path": path}
    if tool == "write":
        args["content"] = "overwritten"
    if tool == "str_replace":
        args.update(old="hidden", new="stolen")
    result = kit.toolbox.call(tool, args)
    assert result.is_error
    assert "outside the workspace" in result.content or "absolute" in result.content
    assert "hidden words" not in result.content
    assert outside.read_text() == "hidden words\n"
    assert (tmp_path / "elsewhere" / "secret.txt").read_text() == "hidden words\n"


@pytest.mark.unit
def test_list_shows_files_with_sizes_and_folders(kit: Kit) -> None:
    (kit.workspace.root / "notes").mkdir()
    content, error, data = kit.call("list")
    assert not error
    size = (kit.workspace.root / "honest.cpp").stat().st_size
    assert content.splitlines() == [f"honest.cpp  {size} bytes", "notes/"]
    assert data == {"path": ".", "entries": 2}
    assert kit.call("list", path="honest.cpp")[1]


@pytest.mark.unit
def test_write_creates_folders_and_replaces_content(kit: Kit) -> None:
    content, error, data = kit.call("write", path="variants/v1.cpp", content="int a;\nint b;\n")
    assert not error and content == "wrote variants/v1.cpp (2 lines, 14 bytes)"
    assert data == {"path": "variants/v1.cpp", "bytes": 14}
    assert (kit.workspace.root / "variants" / "v1.cpp").read_text() == "int a;\nint b;\n"
    kit.call("write", path="variants/v1.cpp", content="int c;")
    assert (kit.workspace.root / "variants" / "v1.cpp").read_text() == "int c;"
    assert "is a folder" in kit.call("write", path="variants", content="x")[0]
    big = "x" * (file_tools.MAX_WRITE_BYTES + 1)
    assert kit.call("write", path="big.txt", content=big)[1]
    assert not (kit.workspace.root / "big.txt").exists()


@pytest.mark.unit
def test_str_replace_needs_exactly_one_match(kit: Kit) -> None:
    path = kit.workspace.root / "honest.cpp"
    before = path.read_text()
    content, error, _ = kit.call("str_replace", path="honest.cpp", old="no such text", new="x")
    assert error and "matches 0 times" in content
    content, error, _ = kit.call("str_replace", path="honest.cpp", old="i", new="j")
    assert error and f"matches {before.count('i')} times" in content
    kit.call("write", path="twice.txt", content="ab\nab\n")
    content, error, _ = kit.call("str_replace", path="twice.txt", old="ab", new="cd")
    assert error and "matches 2 times" in content
    assert (kit.workspace.root / "twice.txt").read_text() == "ab\nab\n"
    assert path.read_text() == before
    content, error, data = kit.call("str_replace", path="honest.cpp", old="2.0f * x[i]", new="x[i] + x[i]")
    assert not error and data == {"path": "honest.cpp", "line": 3}
    assert "x[i] + x[i] + y[i]" in path.read_text()
    assert "replaced 1 occurrence in honest.cpp at line 3" in content


@pytest.mark.unit
def test_malformed_input_is_an_error_result_naming_the_problem(kit: Kit) -> None:
    missing = kit.toolbox.call("str_replace", {"path": "honest.cpp"})
    assert missing.is_error and "old: Field required" in missing.content and "new: Field required" in missing.content
    extra = kit.toolbox.call("view", {"path": "honest.cpp", "lines": "all"})
    assert extra.is_error and "lines: Extra inputs are not permitted" in extra.content
    wrong = kit.toolbox.call("view", {"path": "honest.cpp", "start_line": "first"})
    assert wrong.is_error and "start_line" in wrong.content
    not_a_dict = kit.toolbox.call("write", ["honest.cpp", "x"])
    assert not_a_dict.is_error and "invalid input for write" in not_a_dict.content
    unknown = kit.toolbox.call("shell", {"cmd": "ls"})
    assert unknown.is_error and "no tool named 'shell'" in unknown.content


# -- compile ----------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_compile_renders_diagnostics_resources_and_violations(tmp_path: Path) -> None:
    report = CheckResult(
        ok=False,
        diagnostics=[
            Diagnostic(
                file="honest.cpp", line=3, column=14, severity=Severity.ERROR, message="'z' undeclared", tool="host"
            ),
            Diagnostic(file="honest.cpp", line=0, severity=Severity.WARNING, message="odd flag", tool="gcc"),
        ],
        resources=[
            KernelResources(name="scale_add_kernel", arch="sm_90a", registers=80, spill_stores=8, shared_bytes=0)
        ],
        violations=["kernel scale_add_kernel uses 80 registers, more than the limit of 64"],
        log="full log",
        seconds=0.4,
    )
    kit = Kit(tmp_path, checker=FakeChecker(report))
    content, error, data = kit.call("compile")
    assert not error  # a failed compile is a result, not a failed tool call
    lines = content.splitlines()
    assert lines[0] == "FAILED in 0.4 s: 1 error(s), 1 warning(s)"
    assert "honest.cpp:3:14: error: 'z' undeclared" in lines
    assert "honest.cpp: warning: odd flag" in lines
    assert "scale_add_kernel (sm_90a): 80 regs, spills 8 B stored / 0 B loaded, smem 0 B" in lines
    assert any("more than the limit of 64" in line for line in lines)
    assert data == report.model_dump(mode="json")
    solution, constraints = kit.checker.calls[0]
    assert constraints == Constraints(max_registers=64)
    assert solution.spec.entry_point == "honest.cpp::scale_add"
    assert solution.sources[0].content == (KERNELS / "honest.cpp").read_text()


@pytest.mark.unit
def test_compile_a_variant_file_as_the_entry(kit: Kit) -> None:
    kit.call("write", path="v2.cpp", content="// variant\n")
    content, error, _ = kit.call("compile", path="v2.cpp")
    assert not error and content.startswith("compiled")
    solution, _ = kit.checker.calls[0]
    assert solution.spec.entry_point == "v2.cpp::scale_add"
    assert [s.path for s in solution.sources] == ["v2.cpp"]
    content, error, _ = kit.call("compile", path="missing.cpp")
    assert error and "not in the workspace" in content
    assert kit.call("compile", path="../honest.cpp")[1]


@pytest.mark.integration
def test_compile_with_the_real_checker_reports_gcc_diagnostics(tmp_path: Path) -> None:
    task = scale_add_task()
    workspace = seed_workspace(task, tmp_path / "ws")
    cache = tmp_path / "cache"
    services = ToolServices(
        definition=task.load_definition(),
        evaluations=EvaluationCache(FakeEvaluations(lambda s: scripted_result(s.name, {"w": 1.0}))),
        knowledge=KnowledgeStore(tmp_path, "scale_add"),
        checker=lambda solution, constraints: check_solution(solution, constraints, cache),
    )
    toolbox = build_toolbox(task, workspace, services, AUTHOR, [])
    ok = toolbox.call("compile", {})
    assert not ok.is_error and ok.content.startswith("compiled"), ok.content
    (workspace.root / "honest.cpp").write_text((KERNELS / "compile_error.cpp").read_text())
    failed = toolbox.call("compile", {})
    assert failed.content.startswith("FAILED"), failed.content
    assert failed.data is not None and failed.data["ok"] is False
    errors = [d for d in failed.data["diagnostics"] if d["severity"] == "error"]
    assert errors, failed.content
    first = errors[0]
    assert f"honest.cpp:{first['line']}:" in failed.content and first["line"] > 0


# -- evaluate, profile, submit -----------------------------------------------------------------------------------


@pytest.mark.unit
def test_evaluate_reports_status_speedups_failures_and_caches_by_content(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.fake = FakeEvaluations(
        lambda s: scripted_result(s.name, {"small": 1.5, "large": 0.8}, {"odd": "max abs err 3"})
    )
    kit.toolbox = build_toolbox(
        kit.task,
        kit.workspace,
        ToolServices(kit.task.load_definition(), EvaluationCache(kit.fake), kit.knowledge, kit.checker),
        AUTHOR,
        kit.submissions,
    )
    content, error, data = kit.call("evaluate")
    assert not error
    lines = content.splitlines()
    assert lines[0] == "status: INCORRECT_NUMERICAL; 1/3 workloads faster than baseline 'reference' (2 passed)"
    assert "  - odd {}: INCORRECT_NUMERICAL: max abs err 3" in lines
    assert lines.index("slowest workloads:") < lines.index("  - large {}: 0.800x (median 1.25 ms vs baseline 1 ms)")
    assert data is not None and data["status"] == "INCORRECT_NUMERICAL" and data["total"] == 3
    assert data["failures"] == [{"uuid": "odd", "status": "INCORRECT_NUMERICAL", "reason": "max abs err 3"}]
    kit.call("evaluate")
    assert len(kit.fake.calls) == 1  # same content: evaluated once
    kit.call("str_replace", path="honest.cpp", old="2.0f * x[i]", new="x[i] + x[i]")
    kit.call("evaluate")
    assert len(kit.fake.calls) == 2


@pytest.mark.unit
def test_evaluate_of_a_passing_kernel_shows_the_geomean(kit: Kit) -> None:
    content, _, data = kit.call("evaluate")
    assert content.splitlines()[0].startswith("status: PASSED — geomean 1.095x, mean 1.150x; 1/2 workloads faster")
    assert data is not None and data["geomean_speedup"] == pytest.approx((1.5 * 0.8) ** 0.5)


@pytest.mark.unit
def test_evaluate_without_the_kernel_file_is_an_error(kit: Kit) -> None:
    (kit.workspace.root / "honest.cpp").unlink()
    content, error, _ = kit.call("evaluate")
    assert error and "'honest.cpp' is not in the workspace" in content
    assert kit.fake.calls == []


@pytest.mark.unit
def test_the_timing_profiler_shows_timing_spread_per_workload(tmp_path: Path) -> None:
    kit = Kit(tmp_path, timing_only=True)
    content, error, data = kit.call("profile")
    assert not error
    assert content.splitlines()[0] == "profile (timing): PASSED"
    small = next(line for line in content.splitlines() if line.startswith("small"))
    assert small == "small {} | 0.6667 | 0.66..0.6733 | 0.5% | 10 | 1 | 1.500x"
    assert data is not None and [w["uuid"] for w in data["workloads"]] == ["small", "large"]


@pytest.mark.unit
def test_profiler_is_pluggable(tmp_path: Path) -> None:
    report = ProfileReport(
        profiler="ncu",
        status=EvaluationStatus.PASSED,
        workloads=[
            WorkloadProfile(uuid="w", status=EvaluationStatus.PASSED, median_ms=0.1, metrics={"dram_pct": 91.0})
        ],
    )
    kit = Kit(tmp_path, profiler=FakeProfiler(report))
    content, _, _ = kit.call("profile")
    assert "profile (ncu): PASSED" in content and "dram_pct=91" in content
    assert kit.fake.calls == []


@pytest.mark.unit
def test_submit_snapshots_the_workspace_and_reuses_the_evaluation(kit: Kit) -> None:
    kit.call("str_replace", path="honest.cpp", old="2.0f * x[i]", new="x[i] + x[i]")
    kit.call("evaluate")
    content, error, data = kit.call("submit_candidate", rationale="replace the multiply by an add")
    assert not error, content
    [sub] = kit.submissions
    name = candidate_name(2, "opt-1", sub.solution)  # the journal's id too: one name everywhere
    assert sub.solution.name == name and re.fullmatch(r"r02-opt-1-[0-9a-f]{10}", name)
    assert content.startswith(f"submitted {name} (1 submission(s) so far)\nstatus: PASSED")
    assert len(kit.fake.calls) == 1  # the evaluation of the same content was reused
    [sub] = kit.submissions
    assert (sub.role, sub.agent_id, sub.rationale) == ("Optimizer", "opt-1", "replace the multiply by an add")
    assert sub.solution.sources[0].content == (kit.workspace.root / "honest.cpp").read_text()
    assert sub.solution.description == "replace the multiply by an add"
    assert sub.evaluation is not None and sub.evaluation["status"] == "PASSED"
    assert sub.evaluation["content_hash"] == sub.solution.content_hash()
    assert sub.evaluation["solution"] == sub.solution.name
    assert data is not None and data["solution"] == name


@pytest.mark.unit
@pytest.mark.parametrize("rationale", ["", "   ", "two\nlines", "x" * 401])
def test_submit_needs_a_one_line_rationale(kit: Kit, rationale: str) -> None:
    result = kit.toolbox.call("submit_candidate", {"rationale": rationale})
    assert result.is_error and "rationale" in result.content
    assert kit.submissions == [] and kit.fake.calls == []


@pytest.mark.unit
def test_snapshot_keeps_the_task_build_spec(kit: Kit) -> None:
    solution = workspace_solution(kit.task, kit.workspace, "scale_add_f32", name="n", author="a")
    reference = kit.task.source_solution(kit.task.load_definition())
    assert isinstance(solution, Solution)
    assert solution.spec == reference.spec and solution.sources == reference.sources
    assert solution.spec.language == Language.CPP


# -- knowledge tools ---------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_write_note_then_read_it_back(kit: Kit) -> None:
    content, error, data = kit.call(
        "write_note",
        kind="hardware",
        title="L2 is 2 MB per core pair",
        body="lscpu says so",
        evidence={"numbers": {"l2_mb": 2.0}},
    )
    assert not error and content.startswith("recorded hardware note ")
    [entry] = kit.knowledge.entries()
    assert (entry.role, entry.agent, entry.round, entry.kind) == ("Optimizer", "opt-1", 2, Kind.HARDWARE)
    assert data == {"id": entry.id, "kind": "hardware"}
    content, _, _ = kit.call("read_knowledge", kind="hardware", query="l2")
    assert content == f"{entry.id} [hardware] L2 is 2 MB per core pair (Optimizer, round 2) [l2_mb=2]: lscpu says so"
    kit.call("write_note", kind="plan", title="the long plan", body="step " * 100)
    content, _, _ = kit.call("read_knowledge", kind="plan")
    assert content.count("step") == 100  # the long body once, whole, below its line (not also cut in the line)
    assert content.splitlines()[0].endswith("[plan] the long plan (Optimizer, round 2)")
    assert kit.call("read_knowledge", kind="strategy")[0] == "no entries match"
    assert kit.call("write_note", kind="role_record", title="x")[1]  # role records are the supervisor's


@pytest.mark.unit
def test_a_strategy_that_matches_a_failed_attempt_is_flagged(kit: Kit) -> None:
    kit.call(
        "write_note",
        kind="failed_attempt",
        title="Unroll the inner loop by 8",
        body="no gain: the loop is memory bound",
        evidence={"candidate": "c7", "status": "PASSED", "numbers": {"geomean_speedup": 0.98}},
    )
    content, error, data = kit.call("write_note", kind="strategy", title="unrolling the inner loop 8 times")
    assert not error
    assert "matches a recorded failed attempt" in content and "c7, PASSED, geomean_speedup=0.98" in content
    assert data is not None and "known_failure" in data
    content, _, data = kit.call("write_note", kind="strategy", title="use float4 vector loads")
    assert "failed attempt" not in content and data is not None and "known_failure" not in data
    [failed] = kit.knowledge.query(Kind.FAILED_ATTEMPT)
    cited = f"unrolling the inner loop by 4, unlike {failed.id} (by 8), keeps the loads in flight"
    content, _, data = kit.call("write_note", kind="strategy", title=cited)
    assert "failed attempt" not in content and data is not None and "known_failure" not in data


def with_interval(result: CandidateResult, low: float, high: float) -> CandidateResult:
    return result.model_copy(update={"summary": result.summary.model_copy(update={"geomean_ci": (low, high)})})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("asked", "interval", "stored"),
    [
        ("strategy", (1.04, 1.12), Kind.STRATEGY),
        ("strategy", (0.97, 1.08), Kind.INCONCLUSIVE),  # a "win" the timing noise could have made
        ("failed_attempt", (0.97, 1.08), Kind.INCONCLUSIVE),  # a "loss" likewise: it may be retried
        ("failed_attempt", (1.04, 1.12), Kind.STRATEGY),  # the measurement decides, not the note
        ("strategy", (0.80, 0.95), Kind.FAILED_ATTEMPT),
    ],
)
def test_a_note_on_a_candidate_is_stored_as_its_measurement_over_its_parent_shows(
    tmp_path: Path, asked: str, interval: tuple[float, float], stored: Kind
) -> None:
    """The candidate is timed against the round's start (the parent, a best of an earlier round), paired, and
    that measurement, with its interval, is the note's standing."""
    task = scale_add_task()
    workspace = seed_workspace(task, tmp_path / "ws")
    definition = task.load_definition()
    parent = workspace_solution(task, workspace, definition.name, name="best-r01", author="Optimizer")
    (workspace.root / task.source.name).write_text(parent.sources[0].content + "\n// unrolled by 4\n")
    candidate = workspace_solution(task, workspace, definition.name, name="scale_add-opt-1-eval3", author="Optimizer")
    fake = FakeEvaluations(
        lambda s: scripted_result(s.name, {"small": 1.3}),
        versus=lambda s, base: with_interval(scripted_result(s.name, {"small": 1.07}), *interval),
    )
    cache = EvaluationCache(fake)
    cache.evaluate(candidate)  # the agent evaluated it: its name is what the evaluation reported
    store = KnowledgeStore(tmp_path / "repo", "scale_add")
    services = ToolServices(definition=definition, evaluations=cache, knowledge=store, parent=parent)
    toolbox = build_toolbox(task, workspace, services, AUTHOR, [])
    evidence = {"candidate": candidate.name, "numbers": {"geomean_speedup": 1.3}}
    result = toolbox.call("write_note", {"kind": asked, "title": "unroll by 4", "evidence": evidence})
    assert not result.is_error
    [entry] = store.entries()
    assert entry.kind == stored and entry.evidence is not None
    assert (entry.evidence.speedup, entry.evidence.ci) == (1.07, interval) and entry.evidence.status == "PASSED"
    assert entry.evidence.over == "its parent best-r01" and fake.baselines[-1] == parent
    assert f"measured 1.070x [{interval[0]:.3f}, {interval[1]:.3f}] over its parent best-r01" in result.content
    assert (f"stored as {stored.value}, not {asked}" in result.content) == (stored.value != asked)
    assert ("Inconclusive (not told apart from noise):" in store.summary()) == (stored == Kind.INCONCLUSIVE)
    again = toolbox.call("write_note", {"kind": asked, "title": "unroll by 4, again", "evidence": evidence})
    assert not again.is_error and len(fake.calls) == 2  # the pair was timed once


@pytest.mark.unit
def test_a_failing_candidate_is_a_failed_attempt_and_an_unknown_one_is_not_measured(kit: Kit) -> None:
    failing = FakeEvaluations(lambda s: scripted_result(s.name, {"small": 1.2}, failed={"large": "NaN at (3,)"}))
    cache = EvaluationCache(failing)
    solution = workspace_solution(kit.task, kit.workspace, "scale_add_f32", name="cand-9", author="Optimizer")
    cache.evaluate(solution)
    services = ToolServices(definition=kit.task.load_definition(), evaluations=cache, knowledge=kit.knowledge)
    toolbox = build_toolbox(kit.task, kit.workspace, services, AUTHOR, [])
    toolbox.call("write_note", {"kind": "strategy", "title": "fast path", "evidence": {"candidate": "cand-9"}})
    result = toolbox.call("write_note", {"kind": "strategy", "title": "other", "evidence": {"candidate": "nope"}})
    first, second = kit.knowledge.entries()
    assert first.kind == Kind.FAILED_ATTEMPT and first.evidence is not None
    assert first.evidence.status == "INCORRECT_NUMERICAL" and first.evidence.over == "the start"
    assert second.kind == Kind.STRATEGY and second.evidence is not None and second.evidence.speedup is None
    assert "not measured (no evaluated candidate is named 'nope'" in result.content
    assert "Inconclusive" not in kit.knowledge.summary()


# -- factory -----------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_toolbox_has_every_tool_and_narrows_to_each_builtin_role(kit: Kit) -> None:
    assert tuple(kit.toolbox.names) == TOOL_NAMES
    for role in builtin_roles().values():
        narrowed = kit.toolbox.only(role.tools)
        assert narrowed.names == role.tools
        assert [s.name for s in narrowed.specs()] == role.tools
    with pytest.raises(ValueError, match="unknown tools"):
        kit.toolbox.only(["view", "bash"])


@pytest.mark.unit
def test_tool_schemas_forbid_extra_fields_and_describe_every_field(kit: Kit) -> None:
    for spec in kit.toolbox.specs():
        schema = spec.input_schema
        assert schema.get("additionalProperties") is False, spec.name
        for field, prop in schema.get("properties", {}).items():
            assert prop.get("description") or "$ref" in str(prop), (spec.name, field)
        assert spec.description


@pytest.mark.unit
def test_a_toolbox_over_a_workspace_copy_never_touches_the_repository(kit: Kit) -> None:
    kit.call("write", path="honest.cpp", content="// changed\n")
    assert (KERNELS / "honest.cpp").read_text().startswith("#include <cstdint>")
    assert isinstance(kit.toolbox, Toolbox) and isinstance(kit.workspace, Workspace)


@pytest.mark.unit
def test_rejected_result_shows_the_violations(kit: Kit) -> None:
    rejected = [WorkloadResult(uuid="w", axes={}, status=EvaluationStatus.REJECTED, reason="constraint violated")]
    result = CandidateResult(
        status=EvaluationStatus.REJECTED,
        solution="s",
        baseline="reference",
        summary=summarize(rejected),
        traces=[],
        workloads=rejected,
        build=BuildResult(ok=True),
        violations=["required instruction 'wgmma.mma_async' does not appear"],
    )
    kit.fake = FakeEvaluations(lambda s: result)
    evaluations = EvaluationCache(kit.fake)
    toolbox = build_toolbox(
        kit.task, kit.workspace, ToolServices(kit.task.load_definition(), evaluations, kit.knowledge), AUTHOR, []
    )
    content = toolbox.call("evaluate", {}).content
    assert "constraint violations (nothing ran):" in content and "wgmma.mma_async" in content


@pytest.mark.unit
def test_a_policy_requiring_citations_refuses_a_verdict_without_its_candidate(kit: Kit) -> None:
    services = ToolServices(
        definition=kit.task.load_definition(),
        evaluations=EvaluationCache(kit.fake),
        knowledge=kit.knowledge,
        require_citations=True,
    )
    toolbox = build_toolbox(kit.task, kit.workspace, services, AUTHOR, [])
    bare = toolbox.call("write_note", {"kind": "strategy", "title": "tiles of 64"})
    unknown = toolbox.call("write_note", {"kind": "failed_attempt", "title": "x", "evidence": {"candidate": "c1"}})
    observation = toolbox.call("write_note", {"kind": "hardware", "title": "L2 is 2 MB"})
    assert bare.is_error and "requires a strategy or failed attempt to name the candidate" in bare.content
    assert unknown.is_error and "no evaluated candidate is named 'c1'" in unknown.content
    assert not observation.is_error  # observations and plans are not verdicts
    assert [e.kind for e in kit.knowledge.entries()] == [Kind.HARDWARE]
