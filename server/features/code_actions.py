"""Code actions on a kernel file: "Accept winning kernel (1.34x, round 5)" (a WorkspaceEdit replacing the files'
text by the best candidate's, so undo works) and, on a kernel file that is not a task yet, "Create evoteam.toml
entry for this kernel" (the scaffold of ``server/scaffold.py`` as file creations and an append, or, for a client
that cannot create files in an edit, the command ``evoteam.createTaskEntry`` that writes them: ``CREATE_TASK_ENTRY``
of ``server/messages.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import from_fs_path

from evoteam.gpu_bench.api import TaskError
from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import over_start, whole_document
from evoteam.server.messages import CREATE_TASK_ENTRY, TaskEntryArgs, TaskEntryResult
from evoteam.server.scaffold import Scaffold, can_scaffold, config_for, scaffold_for, write
from evoteam.server.winner import FileCache, WinnerError, current_text, open_uris, replace_edit

log = logging.getLogger("evoteam.server")
ACCEPT_KIND = lsp.CodeActionKind.RefactorRewrite
CREATE_KIND = lsp.CodeActionKind.Refactor
CREATE_TITLE = "Create evoteam.toml entry for this kernel"


class CodeActions(Feature):
    name = "code_actions"

    def __init__(self) -> None:
        self.files = FileCache()

    def register(self, server: EvoteamServer) -> None:
        options = lsp.CodeActionOptions(code_action_kinds=[ACCEPT_KIND, CREATE_KIND], resolve_provider=False)

        @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, options)
        async def code_action(ls: EvoteamServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction | lsp.Command]:
            await ls.wait_ready()
            uri = params.text_document.uri
            path = ls.path_of(uri)
            if path is None:
                return []
            only = params.context.only
            found: list[lsp.CodeAction | lsp.Command | None] = [
                await self.accept_action(ls, uri, path) if _wanted(only, ACCEPT_KIND) else None,
                await self.create_action(ls, uri, path) if _wanted(only, CREATE_KIND) else None,
            ]
            return [action for action in found if action is not None]

        @server.command(CREATE_TASK_ENTRY.name)
        async def create_entry(ls: EvoteamServer, *args: Any) -> Any:
            return CREATE_TASK_ENTRY.answer(await self.create_entry(ls, CREATE_TASK_ENTRY.parse(args)))

    async def accept_action(self, ls: EvoteamServer, uri: str, path: Path) -> lsp.CodeAction | None:
        """The best candidate of the file's kernel, when its text differs from the editor's."""
        task = ls.project.task_for(path)
        found = ls.index.best_for(task.task.name) if task is not None else None
        if found is None:
            return None
        entry, candidate = found
        try:
            files = await ls.in_background(self.files.read, ls.project, entry, candidate)
        except WinnerError as exc:
            log.warning("no accept action for %s: %s", path, exc)
            return None
        mine = {p.resolve(): text for p, text in files.files.items()}.get(path.resolve())
        if mine is None or current_text(ls.workspace, uri) == mine:
            return None
        edit, _ = replace_edit(ls.workspace, files.files)
        if candidate.record is None:
            return None
        title = f"Accept winning kernel ({over_start(candidate.record)}, round {candidate.round})"
        return lsp.CodeAction(title=title, kind=ACCEPT_KIND, edit=edit, is_preferred=True)

    async def create_action(self, ls: EvoteamServer, uri: str, path: Path) -> lsp.CodeAction | lsp.Command | None:
        """The task scaffold, for a kernel file that is not a task (and no broken evoteam.toml governs it)."""
        scaffold = await self._scaffold(ls, uri, path)
        if scaffold is None:
            return None
        if not _can_create_files(ls):  # a bare Command: lsprotocol reads a CodeAction with a command as one anyway
            arguments = CREATE_TASK_ENTRY.arguments(TaskEntryArgs(uri=uri))
            return lsp.Command(title=CREATE_TITLE, command=CREATE_TASK_ENTRY.name, arguments=arguments)
        return lsp.CodeAction(title=CREATE_TITLE, kind=CREATE_KIND, edit=_creation_edit(ls, scaffold))

    async def create_entry(self, ls: EvoteamServer, args: TaskEntryArgs) -> TaskEntryResult:
        """``evoteam.createTaskEntry URI [PREVIEW]``: writes the scaffold to disk (for clients without file
        creation, and for "Evolve this kernel" on a file that is no task), or with ``preview`` only says what it
        would write."""
        await ls.wait_ready()
        name = CREATE_TASK_ENTRY.name
        path = ls.path_of(args.uri)
        if path is None:
            raise JsonRpcInvalidParams(f"{name}: uri: not a file URI: {args.uri!r}")
        if args.preview:
            existing = ls.project.task_for(path)
            if existing is not None:
                config = str(existing.config)
                return TaskEntryResult(name=existing.task.name, config=config, files=[], written=False, existing=True)
        scaffold = await self._scaffold(ls, args.uri, path, from_disk=True)
        if scaffold is None:
            raise JsonRpcInvalidParams(
                f"{name}: {path} is already a task, not a kernel file (.cpp, .cu, .py), or its evoteam.toml is invalid"
            )
        texts = {str(scaffold.config): scaffold.entry, **{str(p): t for p, t in scaffold.files.items()}}
        if args.preview:
            files = [str(p) for p in [scaffold.config, *scaffold.files]]
            return TaskEntryResult(
                name=scaffold.name,
                config=files[0],
                config_exists=scaffold.config_exists,
                files=files,
                texts=texts,
                written=False,
            )
        try:
            written = await ls.in_background(write, scaffold)
        except OSError as exc:
            raise JsonRpcException(f"{name}: {exc}", code=lsp.LSPErrorCodes.RequestFailed.value) from None
        return TaskEntryResult(
            name=scaffold.name,
            config=str(scaffold.config),
            config_exists=scaffold.config_exists,
            files=[str(p) for p in written],
            texts=texts,
        )

    async def _scaffold(self, ls: EvoteamServer, uri: str, path: Path, from_disk: bool = False) -> Scaffold | None:
        if not can_scaffold(path) or ls.project.task_for(path) is not None or ls.project.config_error(path):
            return None
        try:
            path.resolve().relative_to(ls.project.root)
        except ValueError:
            return None
        config = config_for(path, ls.project.root)
        config_text = None if from_disk else current_text(ls.workspace, _uri(ls, config))
        text = current_text(ls.workspace, uri) or ""
        try:
            return await ls.in_background(scaffold_for, path, text, ls.project.root, config_text)
        except (TaskError, OSError) as exc:
            log.warning("no task scaffold for %s: %s", path, exc)
            return None


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    return only is None or any(kind == o or kind.startswith(f"{o}.") for o in only)


def _can_create_files(ls: EvoteamServer) -> bool:
    workspace = ls.client_capabilities.workspace
    edit = workspace.workspace_edit if workspace else None
    return bool(edit and edit.document_changes and lsp.ResourceOperationKind.Create in (edit.resource_operations or []))


def _uri(ls: EvoteamServer, path: Path) -> str:
    return open_uris(ls.workspace).get(path.resolve()) or from_fs_path(str(path)) or path.as_uri()


def _creation_edit(ls: EvoteamServer, scaffold: Scaffold) -> lsp.WorkspaceEdit:
    changes: list[lsp.TextDocumentEdit | lsp.CreateFile | lsp.RenameFile | lsp.DeleteFile] = []
    new = dict(scaffold.files)
    if not scaffold.config_exists:
        new[scaffold.config] = scaffold.entry
    for path, text in new.items():
        uri = _uri(ls, path)
        changes.append(lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=False)))
        changes.append(_insert(uri, None, lsp.Position(0, 0), text))
    if scaffold.config_exists:
        uri = _uri(ls, scaffold.config)
        document = ls.workspace.text_documents.get(uri)
        end = whole_document(current_text(ls.workspace, uri) or "").end
        changes.append(_insert(uri, document.version if document else None, end, scaffold.entry))
    return lsp.WorkspaceEdit(document_changes=changes)


def _insert(uri: str, version: int | None, at: lsp.Position, text: str) -> lsp.TextDocumentEdit:
    return lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[lsp.TextEdit(range=lsp.Range(at, at), new_text=text)],
    )


FEATURE = CodeActions()
