"""The ``patch`` tool: unified diffs applied all or nothing, moved hunks found, and errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoteam.roles.tools.patch import PatchError, PatchInput, PatchTool, parse
from evoteam.roles.workspace import Workspace

pytestmark = pytest.mark.unit

KERNEL = "".join(f"line {n}\n" for n in range(1, 31))


@pytest.fixture
def tool(tmp_path: Path) -> PatchTool:
    (tmp_path / "kernel.cpp").write_text(KERNEL)
    (tmp_path / "util.h").write_text("#pragma once\nint lanes = 4;\n")
    return PatchTool(Workspace(tmp_path))


def run(tool: PatchTool, diff: str) -> tuple[str, bool]:
    result = tool.run(PatchInput(diff=diff))
    return result.content, result.is_error


def test_a_diff_of_two_files_is_applied_and_summed_up(tool: PatchTool) -> None:
    diff = """--- a/kernel.cpp
+++ b/kernel.cpp
@@ -3,3 +3,4 @@
 line 3
-line 4
+line four
+line four and a half
 line 5
@@ -20,2 +21,2 @@ a section heading
 line 20
-line 21
+line twenty-one
--- a/util.h
+++ b/util.h
@@ -2 +2 @@
-int lanes = 4;
+int lanes = 16;
"""
    content, error = run(tool, diff)
    assert not error, content
    assert content == "patched kernel.cpp (2 hunks: +3 -2), util.h (1 hunk: +1 -1)"
    text = (tool.workspace.root / "kernel.cpp").read_text()
    assert "line 3\nline four\nline four and a half\nline 5\n" in text and "line 20\nline twenty-one\nline 22" in text
    assert text.endswith("line 30\n") and (tool.workspace.root / "util.h").read_text().endswith("lanes = 16;\n")


def test_a_hunk_whose_lines_moved_is_applied_where_they_are_now(tool: PatchTool) -> None:
    (tool.workspace.root / "kernel.cpp").write_text("new first line\nnew second line\n" + KERNEL)
    content, error = run(tool, "--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -10,2 +10,2 @@\n line 10\n-line 11\n+eleven\n")
    assert not error, content
    assert "line 10\neleven\nline 12" in (tool.workspace.root / "kernel.cpp").read_text()


def test_a_hunk_that_does_not_apply_changes_no_file_and_says_where(tool: PatchTool) -> None:
    diff = (
        "--- a/util.h\n+++ b/util.h\n@@ -2 +2 @@\n-int lanes = 4;\n+int lanes = 8;\n"
        "--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -5,2 +5,2 @@\n line 5\n-line six\n+line 6!\n"
    )
    content, error = run(tool, diff)
    assert error
    assert content == (
        "hunk 1 of kernel.cpp does not apply: its lines occur nowhere in the file; at line 6 it expects "
        "'line six' but the file has 'line 6' (view the file and make the diff from what it holds now)"
    )
    assert (tool.workspace.root / "util.h").read_text() == "#pragma once\nint lanes = 4;\n"  # all or nothing
    assert (tool.workspace.root / "kernel.cpp").read_text() == KERNEL


def test_a_new_file_comes_from_dev_null(tool: PatchTool) -> None:
    content, error = run(tool, "--- /dev/null\n+++ b/src/tile.h\n@@ -0,0 +1,2 @@\n+#pragma once\n+int tile = 64;\n")
    assert not error, content
    assert (tool.workspace.root / "src" / "tile.h").read_text() == "#pragma once\nint tile = 64;\n"
    again, error = run(tool, "--- /dev/null\n+++ b/util.h\n@@ -0,0 +1 @@\n+x\n")
    assert error and "exists already" in again


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        ("just some text", "no hunk found: give a unified diff"),
        ("@@ -1 +1 @@\n-a\n+b\n", "a hunk before any '--- a/PATH'"),
        ("--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+two\n", "its header says 3 old"),
        ("--- a/kernel.cpp\n+++ b/kernel.cpp\n@@ -1,2 +1,2 @@\n line 1\n*line 2\n", "starts with neither"),
        ("--- a/kernel.cpp\n+++ /dev/null\n@@ -1 +0,0 @@\n-line 1\n", "deleting a file (kernel.cpp) is not done"),
    ],
)
def test_a_diff_that_cannot_be_read_is_one_clear_error(tool: PatchTool, diff: str, message: str) -> None:
    content, error = run(tool, diff)
    assert error and message in content, content
    assert (tool.workspace.root / "kernel.cpp").read_text() == KERNEL


def test_paths_outside_the_workspace_are_refused(tool: PatchTool) -> None:
    content, error = run(tool, "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-a\n+b\n")
    assert error and not (tool.workspace.root.parent / "outside.txt").exists(), content
    content, error = run(tool, "--- /dev/null\n+++ b/../made.txt\n@@ -0,0 +1 @@\n+a\n")
    assert error and not (tool.workspace.root.parent / "made.txt").exists(), content


def test_no_newline_markers_and_a_missing_count_are_read() -> None:
    [patch] = parse(
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"
    )
    assert patch.hunks[0].old == ["a"] and patch.hunks[0].new == ["b"]
    with pytest.raises(PatchError):
        parse("")
