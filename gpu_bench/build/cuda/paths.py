"""Report a compiler's file paths relative to the build folder; string work only (POSIX paths)."""

from __future__ import annotations

import posixpath


def relative_path(path: str, build_dir: str | None) -> str:
    """``path`` relative to ``build_dir`` when it lies inside it, else unchanged (POSIX paths)."""
    if not build_dir or not posixpath.isabs(path):
        return path
    root = posixpath.normpath(build_dir)
    full = posixpath.normpath(path)
    if full == root or not full.startswith(root.rstrip("/") + "/"):
        return path
    return posixpath.relpath(full, root)
