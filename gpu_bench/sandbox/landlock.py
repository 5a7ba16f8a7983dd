"""Landlock for the Python host and the worker: files may be written, made or removed only beneath the
folders it is given, and no TCP port bound or connected, for the process and everything it starts
(``restrict_writes``). Landlock holds the calling thread and the threads it starts later, so it is applied
while a process has one thread (the worker: before numpy or torch load; ``threads_now`` tells).

A Python candidate may need a compiler and caches (``load_inline``, ``torch.compile``), so its host cannot
hold the whole file system read-only as the native host does. It gets its own run-time build folders
(``extension_dirs``), a temporary folder of its own and ``/dev/shm``; the rest (the shared build cache, other
solutions' build folders, the worker's folder, the user's files where no sandbox runs) can be read, not
changed. Writing to device files under ``/dev`` (``/dev/null``) stays allowed; making files there does not.
The native host does the same in C (``native_host.cpp``) with no writable folder at all.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Sequence
from pathlib import Path

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
"""The Landlock syscalls (the same numbers on x86-64 and aarch64)."""
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = sum(1 << bit for bit in range(6, 13))
"""MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM."""
MAKE_SYM = 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1


def handled(abi: int) -> int:
    """The file-system accesses the ruleset governs at Landlock ABI ``abi``: every way to change a file."""
    access = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if abi >= 2:
        access |= REFER
    if abi >= 3:
        access |= TRUNCATE
    return access


def threads_now() -> int:
    """How many threads this process has (each one started before ``restrict_writes`` stays unrestricted)."""
    try:
        return sum(1 for _ in Path("/proc/self/task").iterdir())
    except OSError:
        return 1


def version() -> int:
    """The Landlock ABI this Linux kernel offers; 0 where it has none (before 5.13, or not enabled)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, int(libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)))


def restrict_writes(
    writable: Sequence[Path], devices: Path = Path("/dev"), links: bool = True, lasting: Sequence[Path] = ()
) -> bool:
    """Restricts this process (and what it starts) to changing files only beneath ``writable`` (each made if
    missing; symbolic links made there too unless ``links`` is False), to making and writing files beneath
    ``lasting`` but never removing, renaming or linking one there (a shared folder of lock files: what others
    hold stays), and to writing existing files under ``devices``; TCP closed where the ABI has it (4 and
    later). False where the kernel has no Landlock; OSError when it refuses the ruleset."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = version()
    if abi < 1:
        return False
    access = handled(abi)
    attr = struct.pack("<QQ", access, NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else struct.pack("<Q", access)
    ruleset = int(libc.syscall(CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "cannot create the Landlock ruleset")
    try:
        beneath = access if links else access & ~MAKE_SYM
        kept = access & ~(REMOVE_FILE | REMOVE_DIR | REFER | MAKE_SYM)
        rules = [*((Path(w), beneath) for w in writable), *((Path(k), kept) for k in lasting)]
        for folder, allowed in [*rules, (devices, WRITE_FILE | (access & TRUNCATE))]:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("<Qi", allowed, fd)  # struct landlock_path_beneath_attr is packed
                if libc.syscall(ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"cannot allow writes beneath {folder}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot restrict the host with Landlock")
    finally:
        os.close(ruleset)
    return True
