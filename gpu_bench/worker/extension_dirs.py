"""Where torch and Triton build what Python candidates compile at run time, one folder per solution, and the
audit that keeps one candidate's builds from being another's.

torch's C++/CUDA extensions (``load_inline``, ``cpp_extension.load``), Inductor's compiled graphs
(``torch.compile``) and Triton's kernels reuse what they find on disk: ninja sees an up-to-date ``.so`` and
torch loads it, Inductor and Triton find an artifact by its hash. A candidate that plants one where another
solution's build will look has that solution run its code. So each worker keeps these builds in its own
private folder (removed with it, never shared with another worker), and within it each solution gets a folder
of its own, named by its content hash (``folder_for``; the worker points ``TORCH_EXTENSIONS_DIR``,
``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` there before it loads or runs the solution).

In its Python host (CPU) a candidate may write only its own folders (``sandbox/landlock.py``), but a Python
candidate in the worker (on a GPU, or with ``--no-isolate``) can write anywhere the worker can, so the
worker's owner, out of its reach, audits the folders after every request (``ExtensionAudit``): a solution's
folder may change only in a request for that solution (as its candidate, or its incumbent); a folder
changed or made in any other request was written by someone else, and is removed (its solution builds again
when it next runs) and reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

EXTENSIONS = "torch_extensions"
INDUCTOR = "torchinductor"
TRITON = "triton"
_VARIABLES = {EXTENSIONS: "TORCH_EXTENSIONS_DIR", INDUCTOR: "TORCHINDUCTOR_CACHE_DIR", TRITON: "TRITON_CACHE_DIR"}
KINDS = tuple(_VARIABLES)


def folder_name(content_hash: str) -> str:
    return content_hash[:16]


def folder_for(root: Path, kind: str, content_hash: str) -> Path:
    return root / kind / folder_name(content_hash)


def use(root: Path | None, content_hash: str) -> None:
    """In the worker, before a request (before its process state is read: a change of the environment during
    a request is a candidate's doing): torch's builds go to this solution's folders under ``root``."""
    if root is None:
        return
    for kind, variable in _VARIABLES.items():
        os.environ[variable] = str(folder_for(root, kind, content_hash))


@contextlib.contextmanager
def using(root: Path | None, content_hash: str) -> Iterator[None]:
    """In the worker, while another solution of the request loads (its incumbent): its folders, then the
    environment as it was."""
    saved = {variable: os.environ.get(variable) for variable in _VARIABLES.values()}
    use(root, content_hash)
    try:
        yield
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            elif os.environ.get(variable) != value:
                os.environ[variable] = value


def root_from_environment() -> Path | None:
    """The worker's root of these folders, from the ``TORCH_EXTENSIONS_DIR`` its owner set (``<root>/
    torch_extensions``); None where it was not set."""
    value = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(value).parent if value else None


ENTRY_LIMIT = 100_000
"""The most entries (files, folders, links) the audit looks at in one folder of a kind or below one solution's
folder: a candidate can make millions in its time limit, and the owner would hold a list of them all. A
solution's folder with more is removed (its solution builds again); a folder of a kind with more, with all
it holds."""


def _digest(folder: Path) -> str | None:
    """SHA-256 over every file below ``folder`` (empty folders do not count): its path, and for a file its size,
    inode and modification and change times; for a link, its target. None when there are more than
    ``ENTRY_LIMIT`` entries below it.

    The change time (``st_ctime``) is the kernel's: a write, a truncation, a ``chmod`` or a ``utime`` (which
    sets the modification time back) moves it, and no process can set it, so a file changed in any way shows.
    Contents are not read: they are the candidate's, and a file of any size costs it nothing (a sparse one).
    Until 2026-12-07 each file was read whole, and a Python candidate that left a sparse 6 GiB file in its own
    Inductor folder made the owner (the CLI, or the editor's language server) read 6 GiB into memory after the
    request: 49 s, and a resident size of 6.4 GB where it had 0.2 GB; a larger one would have ended it."""
    found: list[tuple[str, str]] = []
    seen = 0
    todo = [folder]
    while todo:
        current = todo.pop()
        try:
            listing = os.scandir(current)
        except OSError:
            found.append((current.relative_to(folder).as_posix(), "unreadable"))
            continue
        with listing:
            for entry in listing:
                seen += 1
                if seen > ENTRY_LIMIT:
                    return None
                name = Path(entry.path).relative_to(folder).as_posix()
                try:
                    if entry.is_symlink():
                        found.append((name, f"link {Path(entry.path).readlink()}"))
                    elif entry.is_dir():
                        todo.append(Path(entry.path))
                    elif entry.is_file():
                        st = entry.stat(follow_symlinks=False)
                        found.append((name, f"file {st.st_size} {st.st_ino} {st.st_mtime_ns} {st.st_ctime_ns}"))
                except OSError:
                    found.append((name, "unreadable"))
    h = hashlib.sha256()
    for name, what in sorted(found):
        h.update(name.encode() + b"\0" + what.encode() + b"\0")
    return h.hexdigest()


def _listing(base: Path) -> list[Path] | None:
    """What ``base`` holds, sorted; None when it holds more than ``ENTRY_LIMIT`` entries."""
    found: list[Path] = []
    with os.scandir(base) as listing:
        for entry in listing:
            if len(found) >= ENTRY_LIMIT:
                return None
            found.append(Path(entry.path))
    return sorted(found)


class ExtensionAudit:
    """The owner's record of every solution folder under one worker's root, as its own requests left it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: dict[Path, str] = {}

    def after(self, owners: Iterable[str]) -> list[str]:
        """After a request for the solutions whose content hashes are ``owners``: their folders are recorded
        as they are now; any other folder that differs from its record (or is new) is removed. Returns what
        was removed, for the request's log."""
        owned = {folder_name(h) for h in owners}
        removed: list[str] = []
        for kind in KINDS:
            base = self.root / kind
            if not base.is_dir():
                continue
            held = _listing(base)
            if held is None:
                _remove(base)
                self._known = {k: v for k, v in self._known.items() if k.parent != base}
                removed.append(f"{kind} (all of it: more than {ENTRY_LIMIT} entries)")
                continue
            for path in held:
                if not path.is_dir() or path.is_symlink():  # a stray file or link
                    _remove(path)
                    removed.append(f"{kind}/{path.name}")
                    continue
                digest = _digest(path)
                if path.name in owned and digest is not None:
                    self._known[path] = digest
                    continue
                if digest is None or self._known.get(path) != digest:
                    _remove(path)
                    self._known.pop(path, None)
                    too_many = f" (more than {ENTRY_LIMIT} entries)" if digest is None else ""
                    removed.append(f"{kind}/{path.name}{too_many}")
        return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
