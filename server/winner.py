"""A run's candidate as files: its kernel sources read from its commit, and the WorkspaceEdit that puts them in
the editor (whole-document replacements, so the editor's undo takes it back). Shared by ``evoteam.accept`` and
the "Accept winning kernel" code action; it must not import the supervisor's loop or setup (they pull in the
evaluator and torch, which the server never loads)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import Workspace

from evoteam.gpu_bench.api import KernelTask, TaskError
from evoteam.server.convert import whole_document
from evoteam.server.project import Project
from evoteam.server.run_index import RunEntry
from evoteam.supervisor.git_store import GitStore, GitStoreError
from evoteam.supervisor.state import Candidate, task_config


class WinnerError(ValueError):
    """The candidate's files cannot be read (no commit, its task gone from evoteam.toml, not in git)."""


@dataclass(frozen=True)
class CandidateFiles:
    run: str
    candidate: Candidate
    files: dict[Path, str]
    """Absolute path → the text at the candidate's commit, entry source first."""


def run_task(project: Project, entry: RunEntry) -> KernelTask:
    """The task a run evolves, as its evoteam.toml says now."""
    config = entry.state.config
    assert config is not None
    path = run_config(project.root, Path(config.config))
    try:
        tasks = project.tasks(path)
    except TaskError as exc:
        raise WinnerError(str(exc)) from None
    for task in tasks:
        if task.name == config.kernel:
            return task
    raise WinnerError(f"{path} has no kernel named {config.kernel!r} any more")


def run_config(root: Path, journaled: Path) -> Path:
    """The evoteam.toml of a run in repository ``root`` (``supervisor.state.task_config``)."""
    return task_config(root, journaled)


def kernel_paths(git: GitStore, task: KernelTask) -> list[str]:
    """The repository paths of the task's files, entry source first (as the supervisor commits them)."""
    try:
        return [git.relative(p) for p in [task.source, *task.extra_sources]]
    except GitStoreError as exc:
        raise WinnerError(str(exc)) from None


class FileCache:
    """Candidate files by commit: a commit never changes, so what was read once is kept (the newest few)."""

    def __init__(self, size: int = 32) -> None:
        self._size = size
        self._files: dict[tuple[str, tuple[str, ...]], dict[Path, str]] = {}
        self._lock = threading.Lock()

    def read(self, project: Project, entry: RunEntry, candidate: Candidate) -> CandidateFiles:
        """Blocking (git): run it on the server's executor."""
        if candidate.sha is None:
            raise WinnerError(f"candidate {candidate.id} of run {entry.run} has no commit")
        task = run_task(project, entry)
        try:
            git = GitStore(project.root, entry.run)
        except GitStoreError as exc:
            raise WinnerError(str(exc)) from None
        paths = kernel_paths(git, task)
        key = (candidate.sha, tuple(paths))
        with self._lock:
            cached = self._files.get(key)
        if cached is None:
            try:
                cached = {git.root / p: git.read(candidate.sha, p).decode() for p in paths}
            except (GitStoreError, UnicodeDecodeError) as exc:
                raise WinnerError(f"cannot read candidate {candidate.id}: {exc}") from None
            with self._lock:
                self._files[key] = cached
                while len(self._files) > self._size:
                    del self._files[next(iter(self._files))]
        return CandidateFiles(entry.run, candidate, dict(cached))


def current_text(workspace: Workspace, uri: str) -> str | None:
    """The editor's text of ``uri`` when it is open, else the file on disk (None when there is none)."""
    try:
        return workspace.get_text_document(uri).source
    except (OSError, UnicodeDecodeError):
        return None


def open_uris(workspace: Workspace) -> dict[Path, str]:
    """Resolved path → the URI the client uses for each open document."""
    found = {}
    for uri in workspace.text_documents:
        path = to_fs_path(uri)
        if path:
            found[Path(path).resolve()] = uri
    return found


def replace_edit(workspace: Workspace, files: Mapping[Path, str]) -> tuple[lsp.WorkspaceEdit, list[Path]]:
    """The edit replacing each file's whole text by ``files[path]``, for the files whose text differs (the
    editor's text when open), and those files."""
    uris = open_uris(workspace)
    changes: dict[str, list[lsp.TextEdit]] = {}
    changed = []
    for path, new in files.items():
        uri = uris.get(path.resolve()) or from_fs_path(str(path)) or path.as_uri()
        old = current_text(workspace, uri)
        if old == new:
            continue
        changes[uri] = [lsp.TextEdit(range=whole_document(old or ""), new_text=new)]
        changed.append(path)
    return lsp.WorkspaceEdit(changes=changes), changed
