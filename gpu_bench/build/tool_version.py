"""The version line a compiler prints, cached per executable (part of every build key)."""

from __future__ import annotations

import functools
import subprocess


@functools.cache
def version_line(tool: str, last: bool = False) -> str:
    """The first (or last) non-empty line of ``tool --version``; the error when it cannot run."""
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool}: unavailable ({exc})"
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if not lines:
        return tool
    return lines[-1] if last else lines[0]
