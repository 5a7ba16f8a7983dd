"""The ``patch`` tool: a unified diff applied to workspace files, all or nothing.

A model that rewrites a long kernel one small change at a time should not have to send the whole file (a
500-line kernel does not fit one reply's ``max_tokens``): it sends a diff. Each hunk's old lines (context and
removals) must be found in the file exactly, at the line the hunk header says or, the file having moved,
at the nearest place they match. When a hunk does not apply, nothing is written and the error names the
file, the hunk, the line it was looked for at and the first line that differs there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from evoteam.roles.tools.base import ToolResult
from evoteam.roles.tools.files import _error, _Input, _read
from evoteam.roles.workspace import Workspace, WorkspaceError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A diff that cannot be read or applied: the message says where and why."""


@dataclass
class Hunk:
    start: int
    """1-based line of the old text where the hunk begins (0 for an insertion into an empty file)."""
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0


@dataclass
class FilePatch:
    path: str
    create: bool = False
    hunks: list[Hunk] = field(default_factory=list)


def parse(diff: str) -> list[FilePatch]:
    """The file sections of a unified diff (``---``/``+++`` headers, ``@@`` hunks)."""
    files: list[FilePatch] = []
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _path(line[4:]), _path(lines[i + 1][4:])
            if new is None:
                raise PatchError(f"deleting a file ({old}) is not done by patch; write it empty or leave it")
            files.append(FilePatch(path=new, create=old is None))
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
            if not files:
                raise PatchError("a hunk before any '--- a/PATH' and '+++ b/PATH' header lines")
            hunk = Hunk(start=int(match.group(1)))
            old_count = int(match.group(2)) if match.group(2) is not None else 1
            new_count = int(match.group(4)) if match.group(4) is not None else 1
            i += 1
            while i < len(lines) and (len(hunk.old) < old_count or len(hunk.new) < new_count):
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                tag, text = (body[:1], body[1:]) if body else (" ", "")
                if tag == " ":
                    hunk.old.append(text)
                    hunk.new.append(text)
                elif tag == "-":
                    hunk.old.append(text)
                    hunk.removed += 1
                elif tag == "+":
                    hunk.new.append(text)
                    hunk.added += 1
                else:
                    raise PatchError(
                        f"hunk {len(files[-1].hunks) + 1} of {files[-1].path}: line {body!r} starts with neither "
                        "' ', '-' nor '+' (or the hunk header's line counts are wrong)"
                    )
                i += 1
            if len(hunk.old) != old_count or len(hunk.new) != new_count:
                raise PatchError(
                    f"hunk {len(files[-1].hunks) + 1} of {files[-1].path}: its header says {old_count} old and "
                    f"{new_count} new lines, the diff ends after {len(hunk.old)} and {len(hunk.new)}"
                )
            files[-1].hunks.append(hunk)
            continue
        i += 1
    if not files or not any(f.hunks for f in files):
        raise PatchError("no hunk found: give a unified diff ('--- a/PATH', '+++ b/PATH', '@@ -L,N +L,N @@' ...)")
    return files


def _path(text: str) -> str | None:
    name = text.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def apply(text: str, patch: FilePatch) -> str:
    """``text`` with every hunk of ``patch`` applied, in order."""
    lines = text.splitlines()
    ending = "\n" if text.endswith("\n") or not text else ""
    shift = 0
    for number, hunk in enumerate(patch.hunks, 1):
        at = _find(lines, hunk.old, max(0, hunk.start - 1 + shift))
        if at is None:
            raise PatchError(_mismatch(lines, hunk, number, patch.path, max(0, hunk.start - 1 + shift)))
        lines[at : at + len(hunk.old)] = hunk.new
        shift += len(hunk.new) - len(hunk.old)
    return "\n".join(lines) + (ending if lines else "")


def _find(lines: list[str], old: list[str], expected: int) -> int | None:
    """Where ``old`` occurs in ``lines``: at ``expected``, else at the nearest place."""
    if not old:
        return min(expected, len(lines))
    places = [i for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old]
    return min(places, key=lambda i: abs(i - expected)) if places else None


def _mismatch(lines: list[str], hunk: Hunk, number: int, path: str, expected: int) -> str:
    for k, want in enumerate(hunk.old):
        have = lines[expected + k] if expected + k < len(lines) else None
        if have != want:
            found = "the file ends there" if have is None else f"the file has {have!r}"
            return (
                f"hunk {number} of {path} does not apply: its lines occur nowhere in the file; at line "
                f"{expected + k + 1} it expects {want!r} but {found} (view the file and make the diff from what "
                "it holds now)"
            )
    return f"hunk {number} of {path} does not apply"


class PatchInput(_Input):
    diff: str = Field(
        min_length=1,
        description="a unified diff: '--- a/PATH' and '+++ b/PATH' lines, then '@@ -L,N +L,N @@' hunks whose lines "
        "begin with ' ' (context), '-' (removed) or '+' (added); paths relative to the workspace root",
    )


class PatchTool:
    name = "patch"
    description = (
        "Apply a unified diff to workspace files (several files and hunks at once): the way to change part of a "
        "long file without sending all of it. Each hunk's context and removed lines must match the file exactly; "
        "if any hunk does not apply, no file changes and the result says which hunk, where, and what differs."
    )
    input_model = PatchInput

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, args: PatchInput) -> ToolResult:
        try:
            files = parse(args.diff)
        except PatchError as exc:
            return _error(str(exc))
        updates: list[tuple[Path, str, str]] = []
        for patch in files:
            if patch.create:
                try:
                    target = self.workspace.resolve(patch.path)
                except WorkspaceError as exc:
                    return _error(str(exc))
                if target.exists():
                    return _error(f"the diff creates {patch.path} (from /dev/null), but it exists already")
                text = ""
            else:
                read = _read(self.workspace, patch.path)
                if isinstance(read, ToolResult):
                    return read
                target, text = read
            try:
                updates.append((target, patch.path, apply(text, patch)))
            except PatchError as exc:
                return _error(str(exc))
        for target, path, content in updates:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")
            except OSError as exc:
                return _error(f"cannot write {path!r}: {exc.strerror}")
        summary = ", ".join(
            f"{p.path} ({len(p.hunks)} hunk{'s' if len(p.hunks) != 1 else ''}: "
            f"+{sum(h.added for h in p.hunks)} -{sum(h.removed for h in p.hunks)})"
            for p in files
        )
        return ToolResult(content=f"patched {summary}", data={"paths": [p.path for p in files]})
