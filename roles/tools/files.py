"""File tools confined to the workspace: ``view``, ``list``, ``write``, ``str_replace``.

Every path goes through ``Workspace.resolve``; a refused path, a missing file or a too-large read is an error
result, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.tools.base import ToolResult
from evoteam.roles.workspace import Workspace, WorkspaceError

MAX_READ_BYTES = 512 * 1024
MAX_VIEW_CHARS = 60_000
MAX_WRITE_BYTES = 1024 * 1024
MAX_ENTRIES = 500


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _error(message: str) -> ToolResult:
    return ToolResult(content=message, is_error=True)


def _read(workspace: Workspace, relative: str) -> tuple[Path, str] | ToolResult:
    """The file's path and text, or an error result."""
    try:
        path = workspace.resolve(relative)
    except WorkspaceError as exc:
        return _error(str(exc))
    if path.is_dir():
        return _error(f"{relative!r} is a folder; use the list tool")
    if not path.is_file():
        return _error(f"{relative!r} does not exist")
    size = path.stat().st_size
    if size > MAX_READ_BYTES:
        return _error(f"{relative!r} is {size} bytes, more than the {MAX_READ_BYTES} bytes a tool may read")
    try:
        return path, path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return _error(f"{relative!r} is not UTF-8 text")
    except OSError as exc:
        return _error(f"cannot read {relative!r}: {exc.strerror}")


class ViewInput(_Input):
    path: str = Field(description="file path relative to the workspace root")
    start_line: int | None = Field(default=None, ge=1, description="first line to show (1-based); default 1")
    end_line: int | None = Field(default=None, ge=1, description="last line to show (inclusive); default the end")


class ViewTool:
    name = "view"
    description = "Show a text file of the workspace with line numbers, optionally only a range of lines."
    input_model = ViewInput

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, args: ViewInput) -> ToolResult:
        read = _read(self.workspace, args.path)
        if isinstance(read, ToolResult):
            return read
        lines = read[1].splitlines()
        first = args.start_line or 1
        last = min(args.end_line or len(lines), len(lines))
        if lines and first > len(lines):
            return _error(f"{args.path!r} has {len(lines)} lines; start_line {first} is past the end")
        if last < first and lines:
            return _error(f"end_line {last} is before start_line {first}")
        out: list[str] = []
        size = 0
        for number in range(first, last + 1):
            row = f"{number:>5}\t{lines[number - 1]}"
            size += len(row) + 1
            if size > MAX_VIEW_CHARS:
                out.append(f"... (cut at line {number - 1}; ask for start_line={number} to see more)")
                break
            out.append(row)
        body = "\n".join(out) if out else "(empty file)"
        data: dict[str, object] = {"path": args.path, "lines": len(lines)}
        if args.start_line is None and args.end_line is None:
            data["text"] = read[1]  # the exact file, for programs (the offline tuner); the model reads the lines
        return ToolResult(content=body, data=data)


class ListInput(_Input):
    path: str = Field(default=".", description="folder relative to the workspace root; default the root")


class ListTool:
    name = "list"
    description = "List the files and folders in a workspace folder (folders end with '/', files show their size)."
    input_model = ListInput

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, args: ListInput) -> ToolResult:
        try:
            folder = self.workspace.resolve(args.path)
        except WorkspaceError as exc:
            return _error(str(exc))
        if not folder.is_dir():
            return _error(f"{args.path!r} is not a folder")
        rows = []
        for child in sorted(folder.iterdir(), key=lambda p: p.name)[:MAX_ENTRIES]:
            if child.is_symlink():
                rows.append(f"{child.name} (link)")
            elif child.is_dir():
                rows.append(f"{child.name}/")
            else:
                rows.append(f"{child.name}  {child.stat().st_size} bytes")
        return ToolResult(content="\n".join(rows) or "(empty folder)", data={"path": args.path, "entries": len(rows)})


class WriteInput(_Input):
    path: str = Field(description="file path relative to the workspace root; folders are created as needed")
    content: str = Field(description="the whole new content of the file (it replaces what was there)")


class WriteTool:
    name = "write"
    description = "Create or overwrite a workspace file with the given content."
    input_model = WriteInput

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, args: WriteInput) -> ToolResult:
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            return _error(f"content is {len(data)} bytes, more than the {MAX_WRITE_BYTES} bytes a tool may write")
        try:
            path = self.workspace.resolve(args.path)
            if path.is_dir():
                return _error(f"{args.path!r} is a folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except WorkspaceError as exc:
            return _error(str(exc))
        except OSError as exc:
            return _error(f"cannot write {args.path!r}: {exc.strerror}")
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
        return ToolResult(
            content=f"wrote {args.path} ({lines} lines, {len(data)} bytes)",
            data={"path": args.path, "bytes": len(data)},
        )


class StrReplaceInput(_Input):
    path: str = Field(description="file path relative to the workspace root")
    old: str = Field(min_length=1, description="text to replace; must occur exactly once (include enough context)")
    new: str = Field(description="the replacement text")


class StrReplaceTool:
    name = "str_replace"
    description = (
        "Replace one exact occurrence of `old` with `new` in a workspace file. `old` must match exactly once, "
        "whitespace included; otherwise nothing changes and the result says how many times it matched."
    )
    input_model = StrReplaceInput

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, args: StrReplaceInput) -> ToolResult:
        read = _read(self.workspace, args.path)
        if isinstance(read, ToolResult):
            return read
        path, text = read
        count = text.count(args.old)
        if count != 1:
            hint = "it does not occur" if count == 0 else "add surrounding lines to make it unique"
            return _error(f"`old` matches {count} times in {args.path} (it must match exactly once): {hint}")
        at = text.index(args.old)
        updated = text[:at] + args.new + text[at + len(args.old) :]
        try:
            path.write_text(updated, encoding="utf-8")
        except OSError as exc:
            return _error(f"cannot write {args.path!r}: {exc.strerror}")
        first = text.count("\n", 0, at) + 1
        shown = updated.splitlines()[max(0, first - 3) : first + args.new.count("\n") + 2]
        snippet = "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(shown, max(1, first - 2)))
        return ToolResult(
            content=f"replaced 1 occurrence in {args.path} at line {first}:\n{snippet}",
            data={"path": args.path, "line": first},
        )


class DeleteInput(_Input):
    path: str = Field(description="file path relative to the workspace root")


class DeleteTool:
    name = "delete"
    description = (
        "Delete a file of the workspace (a scratch file, an old variant). The kernel's own files cannot be "
        "deleted: the candidate is built from them."
    )
    input_model = DeleteInput

    def __init__(self, workspace: Workspace, keep: Iterable[str] = ()) -> None:
        self.workspace = workspace
        self.keep = set(keep)

    def run(self, args: DeleteInput) -> ToolResult:
        try:
            path = self.workspace.resolve(args.path)
        except WorkspaceError as exc:
            return _error(str(exc))
        if self.workspace.relative(path) in self.keep:
            return _error(f"{args.path!r} is one of the kernel's files and cannot be deleted (write it instead)")
        if path.is_dir():
            return _error(f"{args.path!r} is a folder; delete its files one by one")
        if not path.is_file():
            return _error(f"{args.path!r} does not exist")
        try:
            path.unlink()
        except OSError as exc:
            return _error(f"cannot delete {args.path!r}: {exc.strerror}")
        return ToolResult(content=f"deleted {args.path}", data={"path": args.path})
