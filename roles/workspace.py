"""An agent's workspace: a folder that its tools may read and write, and nothing outside it."""

from __future__ import annotations

import os
from pathlib import Path


class WorkspaceError(ValueError):
    """A path that leaves the workspace, or a file that is not there; the message is shown to the model."""


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, relative: str) -> Path:
        """The absolute path of ``relative`` inside the workspace; refuses absolute paths, ``..`` that
        climbs out, and symlinks whose target is outside."""
        if not relative or "\0" in relative:
            raise WorkspaceError(f"invalid path {relative!r}")
        candidate = Path(relative)
        if candidate.is_absolute():
            raise WorkspaceError(f"{relative!r} is absolute; paths are relative to the workspace")
        full = Path(os.path.realpath(self.root / candidate))
        if full != self.root and self.root not in full.parents:
            raise WorkspaceError(f"{relative!r} is outside the workspace")
        return full

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()
