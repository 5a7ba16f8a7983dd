"""Code actions over stdio: "Accept winning kernel" replaces the file's text by the winner's, and "Create
evoteam.toml entry for this kernel" scaffolds a task that loads (as a WorkspaceEdit that creates files, or, for a
client that cannot create files in an edit, as a command that writes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsp_support import _plain, lsp_session, sample_repo
from lsprotocol import types as lsp
from pygls.uris import to_fs_path

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient
from test_server_commands import apply_edits, tuned_repo

from conftest import git, init_repo
from evoteam.gpu_bench.task import load_tasks
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.records import CandidateRecord
from evoteam.supervisor.state import fold

pytestmark = pytest.mark.integration

OTHER = """#include <cstdint>
// out = x * x, not yet a task
extern "C" int square(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i];
  return 0;
}
"""


@pytest.fixture
def tuned(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return tuned_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


def best_record(repo: Path, run: str) -> CandidateRecord:
    state = fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events())
    assert state.best is not None
    record = state.candidates[state.best].record
    assert record is not None
    return record


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    language = {".py": "python", ".cu": "cuda"}.get(path.suffix, "cpp")
    item = lsp.TextDocumentItem(uri=uri, language_id=language, version=version, text=text or path.read_text())
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    return uri


async def actions(client: LanguageClient, uri: str, only: list[str] | None = None) -> list[lsp.CodeAction]:
    """The code actions offered at the top of ``uri`` (asserting there are no bare commands among them)."""
    found = await offered(client, uri, only)
    assert all(isinstance(a, lsp.CodeAction) for a in found)
    return [a for a in found if isinstance(a, lsp.CodeAction)]


async def offered(
    client: LanguageClient, uri: str, only: list[str] | None = None
) -> list[lsp.CodeAction | lsp.Command]:
    found = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
            context=lsp.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return list(found or [])


def apply_to_disk(edit: lsp.WorkspaceEdit) -> None:
    """What an editor does with the scaffold's edit: create the files (never over existing ones), then edit."""
    for change in edit.document_changes or []:
        if isinstance(change, lsp.CreateFile):
            Path(to_fs_path(change.uri) or "").open("x").close()
        elif isinstance(change, lsp.TextDocumentEdit):
            path = Path(to_fs_path(change.text_document.uri) or "")
            edits = [e for e in change.edits if isinstance(e, lsp.TextEdit)]
            path.write_text(apply_edits(path.read_text(), edits))
        else:
            raise AssertionError(f"unexpected change {change!r}")


async def test_accept_action_replaces_the_text_with_the_winner(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    kernel = repo / "kernel.cpp"
    async with lsp_session(repo) as client:
        uri = open_file(client, kernel)
        [accept] = await actions(client, uri)
        [summary] = _plain(
            await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="evoteam.runs"))
        )
        winner = git(repo, "show", f"evoteam/{run}/best:kernel.cpp")
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=winner)],
            )
        )
        after = await actions(client, uri)  # the file is the winner now: nothing to accept
        none_wanted = await actions(client, uri, only=[lsp.CodeActionKind.QuickFix])
    lo, hi = best_record(repo, run).geomean_ci or (0.0, 0.0)
    speed = f"{summary['bestSpeedup']:.2f}x [{lo:.2f}, {hi:.2f}] over the start"
    assert accept.title == f"Accept winning kernel ({speed}, round 1)"
    assert accept.kind == lsp.CodeActionKind.RefactorRewrite and accept.is_preferred
    assert accept.edit is not None and accept.edit.changes is not None
    assert list(accept.edit.changes) == [uri]
    assert apply_edits(kernel.read_text(), list(accept.edit.changes[uri])) == winner != kernel.read_text()
    assert after == [] and none_wanted == []


async def test_a_task_without_runs_and_a_non_kernel_file_get_no_action(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("nothing to do\n")
    async with lsp_session(repo) as client:
        on_task = await actions(client, open_file(client, repo / "kernel.cpp"))
        on_text = await actions(client, open_file(client, repo / "notes.txt"))
    assert on_task == [] and on_text == []


async def test_create_entry_appends_a_task_that_loads(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    other = repo / "ops" / "square.cpp"
    other.parent.mkdir()
    other.write_text(OTHER)
    before = (repo / "evoteam.toml").read_text()
    async with lsp_session(repo) as client:
        uri = open_file(client, other)
        [create] = await actions(client, uri)
        assert create.title == "Create evoteam.toml entry for this kernel" and create.edit is not None
        apply_to_disk(create.edit)
        after = await actions(client, uri)  # a task now: the server reads the new evoteam.toml
    tasks = {t.name: t for t in load_tasks(repo / "evoteam.toml")}
    assert sorted(tasks) == ["scale_add", "square"]
    square = tasks["square"]
    assert square.source == other and square.entry == "square" and square.baseline == "source"
    assert square.language == "cpp" and square.binding == "c"
    definition = square.load_definition()
    assert definition.name == "square" and "TODO" in definition.description
    [workload] = square.load_workloads()
    assert set(workload.axes) == set(definition.var_axes())
    assert (repo / "evoteam.toml").read_text().startswith(before)  # appended; the other entry untouched
    assert square.definition.parent == other.parent and square.workloads.parent == other.parent
    assert after == []


async def test_without_file_creation_in_edits_a_command_writes_the_scaffold(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (tmp_path / "home").mkdir()
    kernel = repo / "gpu" / "square.cu"
    kernel.parent.mkdir()
    kernel.write_text(OTHER.replace('extern "C" int', '__global__ void square_kernel();\nextern "C" int'))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a CUDA kernel")
    async with lsp_session(repo, capabilities="emacs") as client:  # documentChanges but no resource operations
        uri = open_file(client, kernel)
        [create] = await offered(client, uri)
        assert isinstance(create, lsp.Command) and create.title == "Create evoteam.toml entry for this kernel"
        assert create.command == "evoteam.createTaskEntry" and list(create.arguments or []) == [uri]
        written = _plain(
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command=create.command, arguments=list(create.arguments or []))
            )
        )
        after = await offered(client, uri)
    config = kernel.parent / "evoteam.toml"
    assert written["config"] == str(config) and len(written["files"]) == 3
    [task] = load_tasks(config)
    assert task.source == kernel and task.language == "cuda" and task.entry == "square" and task.target == "sm_90a"
    assert task.load_definition().name == "square" and len(task.load_workloads()) == 1
    assert after == []


async def test_create_entry_in_a_new_evoteam_toml_with_file_creation(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (tmp_path / "home").mkdir()
    kernel = repo / "my kernel.py"
    kernel.write_text("import torch\n\n\ndef my_op(x):\n    return x * 2\n")
    async with lsp_session(repo) as client:
        [create] = await actions(client, open_file(client, kernel))
    assert create.edit is not None and create.edit.document_changes is not None
    created = [c.uri for c in create.edit.document_changes if isinstance(c, lsp.CreateFile)]
    assert (repo / "evoteam.toml").as_uri() in created and len(created) == 3
    apply_to_disk(create.edit)
    [task] = load_tasks(repo / "evoteam.toml")
    assert task.name == "my_kernel" and task.source == kernel and task.entry == "my_op"
    assert (task.language, task.binding) == ("python", "python")
    assert task.load_definition().reference.startswith("import torch")


async def test_a_preview_says_what_the_scaffold_would_write_and_writes_nothing(tmp_path: Path) -> None:
    """What "Evolve this kernel" asks first: is the file a task, and if not, what adding it would write."""
    repo = init_repo(tmp_path / "repo")
    (tmp_path / "home").mkdir()
    kernel = repo / "gpu" / "square.cu"
    kernel.parent.mkdir()
    kernel.write_text(OTHER.replace('extern "C" int', '__global__ void square_kernel();\nextern "C" int'))

    async def create(uri: str, preview: bool) -> dict[str, Any]:
        params = lsp.ExecuteCommandParams(command="evoteam.createTaskEntry", arguments=[uri, preview])
        return dict(_plain(await client.workspace_execute_command_async(params)))

    async with lsp_session(repo) as client:
        uri = open_file(client, kernel)
        preview = await create(uri, True)
        config = kernel.parent / "evoteam.toml"
        assert not config.exists() and not preview["written"] and not preview["existing"]
        assert not preview["configExists"]
        assert preview["config"] == str(config) and len(preview["files"]) == 3
        assert set(preview["texts"]) == set(preview["files"]) and "[[kernel]]" in preview["texts"][str(config)]
        assert not any(Path(p).exists() for p in preview["files"])
        written = await create(uri, False)
        assert written["written"] and written["texts"] == preview["texts"]
        assert {p: Path(p).read_text() for p in written["files"]} == preview["texts"]
        again = await create(uri, True)
    assert again["existing"] and again["name"] == "square" and again["files"] == [] and not again["written"]
