"""The history, diff and delete tools: the run's candidates as an agent sees them, diffs between versions, and
scratch files removed while the kernel's own files stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import scale_add_task
from evoteam.gpu_bench.task import KernelTask
from evoteam.roles.tools.candidate import seed_workspace
from evoteam.roles.tools.files import DeleteInput, DeleteTool
from evoteam.roles.tools.history import DiffInput, DiffTool, HistoryEntry, HistoryInput, HistoryTool, NoHistory
from evoteam.roles.workspace import Workspace

pytestmark = pytest.mark.unit


class Scripted:
    """A run of two candidates: r01 from the start, r02 from r01 (the best)."""

    def __init__(self, start: str) -> None:
        self.start = start
        self.versions = {
            "start": {"honest.cpp": start},
            "r01-optimizer-0-aaaa": {"honest.cpp": start.replace("2.0f * x[i]", "x[i] + x[i]")},
            "r02-debugger-1-bbbb": {"honest.cpp": start.replace("2.0f * x[i]", "x[i] + x[i]") + "// tuned\n"},
        }

    def entries(self) -> list[HistoryEntry]:
        return [
            HistoryEntry(
                id="r01-optimizer-0-aaaa", round=1, role="Optimizer", parent="r00-start", status="PASSED",
                speedup=1.21, ci=(1.18, 1.25), rationale="add instead of multiply",
            ),
            HistoryEntry(
                id="r02-debugger-1-bbbb", round=2, role="Debugger", parent="r01-optimizer-0-aaaa", status="PASSED",
                speedup=1.3, ci=(1.27, 1.33), best=True, rationale="a comment",
            ),
        ]  # fmt: skip

    def files(self, version: str) -> dict[str, str] | None:
        return self.versions.get(version)


Setup = tuple[KernelTask, Workspace, Scripted]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    task = scale_add_task()
    workspace = seed_workspace(task, tmp_path / "ws")
    history = Scripted((workspace.root / "honest.cpp").read_text())
    return task, workspace, history


def test_history_lists_every_candidate_with_its_parent_and_speedup(setup: Setup) -> None:
    _, _, history = setup
    result = HistoryTool(history).run(HistoryInput())
    assert result.content.splitlines() == [
        "- r01-optimizer-0-aaaa: round 1, Optimizer from r00-start: PASSED 1.210x [1.180, 1.250]. add instead of "
        "multiply",
        "- r02-debugger-1-bbbb: round 2, Debugger from r01-optimizer-0-aaaa: PASSED 1.300x [1.270, 1.330] ★ best. "
        "a comment",
    ]
    assert result.data == {"candidates": 2, "best": "r02-debugger-1-bbbb"}
    assert HistoryTool(history).run(HistoryInput(round=2)).content.startswith("- r02-debugger-1-bbbb")
    assert HistoryTool(NoHistory()).run(HistoryInput()).content == "no candidates in this run yet"


def test_diff_compares_the_start_candidates_and_the_workspace(setup: Setup) -> None:
    task, workspace, history = setup
    tool = DiffTool(task, workspace, history)
    same = tool.run(DiffInput())
    assert same.content == "start and workspace: the kernel files are the same"
    one = tool.run(DiffInput(a="start", b="r01-optimizer-0-aaaa")).content
    assert "--- start/honest.cpp" in one and "+++ r01-optimizer-0-aaaa/honest.cpp" in one
    assert "-" in one and "x[i] + x[i]" in one
    (workspace.root / "honest.cpp").write_text(history.versions["r02-debugger-1-bbbb"]["honest.cpp"] + "// mine\n")
    mine = tool.run(DiffInput(a="r02-debugger-1-bbbb")).content
    assert mine.splitlines()[-1] == "+// mine"
    unknown = tool.run(DiffInput(a="r09-nobody"))
    assert (
        unknown.is_error
        and "unknown version 'r09-nobody'" in unknown.content
        and "r02-debugger-1-bbbb" in unknown.content
    )


def test_delete_removes_scratch_files_but_not_the_kernels_own(setup: Setup) -> None:
    _, workspace, _ = setup
    tool = DeleteTool(workspace, ["honest.cpp"])
    (workspace.root / "scratch.cpp").write_text("// try\n")
    assert tool.run(DeleteInput(path="scratch.cpp")).content == "deleted scratch.cpp"
    assert not (workspace.root / "scratch.cpp").exists()
    kept = tool.run(DeleteInput(path="honest.cpp"))
    assert kept.is_error and "one of the kernel's files" in kept.content and (workspace.root / "honest.cpp").exists()
    assert "does not exist" in tool.run(DeleteInput(path="scratch.cpp")).content
    assert tool.run(DeleteInput(path="../outside.txt")).is_error
