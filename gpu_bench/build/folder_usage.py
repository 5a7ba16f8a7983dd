"""What a folder takes on disk: the blocks allocated below it and its number of entries, in one walk that
stops past a limit of entries. The worker's owner measures the worker's folder with it (``worker/disk.py``),
the builder a build and the cache's entries (``cache_space.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Usage(NamedTuple):
    """What a folder holds: allocated bytes and entries. A walk stops past its limit of entries, so
    ``entries`` over that limit means "more than" and ``bytes`` is then what was seen."""

    bytes: int
    entries: int


def usage(root: Path, entry_limit: int) -> Usage:
    """The blocks allocated below ``root`` (links not followed, sparse files counted by what they take) and
    the number of entries, looking at ``entry_limit + 1`` entries at most."""
    total = entries = 0
    todo = [root]
    while todo:
        current = todo.pop()
        try:
            listing = os.scandir(current)
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                if entries > entry_limit:
                    return Usage(total, entries)
                try:
                    st = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(Path(entry.path))
                except OSError:
                    continue
                total += st.st_blocks * 512
    return Usage(total, entries)
