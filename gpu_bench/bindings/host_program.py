"""The native host program that runs a C ABI kernel outside the worker: its source, built once per signature.

The host (``native_host.cpp``) is a small C++ program with no Python in it. It is generated for one
entry-point signature (pointers, ``double`` and ``int64_t`` in definition order), so the call is plain C
with no argument marshalling. At start it arranges to die with the worker, restricts itself with Landlock
where the kernel has it (no file may be written, made or removed, no TCP port bound or connected: the build
cache and the rest of the file system are read-only to the kernel), becomes non-dumpable, gives up every
capability, installs the seccomp program the worker sends as its first message (``confine.py``, x86-64 and
aarch64: starting a process, exec, ptrace and cross-process memory access kill the host with SIGSYS;
signalling, rescheduling or limiting any other process is refused), and only then loads the candidate's
library. It then serves the worker over a sequenced-packet socket (its fd is the last argument): ``B`` maps
a binding's buffers (memfds passed with SCM_RIGHTS) and records its arguments, ``C`` calls the kernel on one
binding and answers its return code with the call's nonce, ``F`` unmaps a binding. The worker (``host.py``)
never reads a verdict from it: outputs are read from the shared buffers, and time is the worker's own clock.

The executable is kept in a sealed memfd of the worker (write, grow and shrink sealed), so nothing a
candidate does to the file system can change the host that the next candidate runs in. So is the empty
kernel (``empty_library``) whose round trip, in a host of its own, is the overhead that timing subtracts.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from evoteam.gpu_bench.bindings import KernelLoadError
from evoteam.gpu_bench.build.builder import cxx_compiler

KINDS = {"p": "void*", "d": "double", "i": "int64_t"}
"""Argument kinds of a signature: a buffer pointer, a double scalar, an int64 scalar or axis."""

_TEMPLATE = Path(__file__).with_name("native_host.cpp")


def source(signature: str) -> str:
    """The host's C++ source for a signature such as ``"ppp i"`` (one kind letter per argument)."""
    kinds = [k for k in signature if k in KINDS]
    params = ", ".join(KINDS[k] for k in kinds) or "void"
    field = {"p": "p", "d": "d", "i": "i"}
    call = ", ".join(f"s[{n}].{field[k]}" for n, k in enumerate(kinds))
    return _TEMPLATE.read_text().replace("@PARAMS@", params).replace("@NARGS@", str(len(kinds))).replace("@CALL@", call)


EMPTY_SYMBOL = "evoteam_empty"
"""The entry point of ``empty_library``: it returns 0 and touches nothing (extra arguments are ignored)."""


@functools.cache
def executable(signature: str) -> int:
    """A sealed memfd holding the host built for ``signature`` (built once per worker and signature); run it
    as ``/proc/self/fd/N`` with the fd passed on."""
    text = source(signature)
    return _build(text, "host", [], ["-ldl"], "the native host")


@functools.cache
def empty_library() -> int:
    """A sealed memfd holding a shared library whose ``EMPTY_SYMBOL`` does nothing: a host running it times
    the round trip alone. Load it as ``/proc/self/fd/N`` with the fd passed on."""
    text = f'extern "C" int {EMPTY_SYMBOL}(void) {{ return 0; }}\n'
    return _build(text, "empty.so", ["-shared", "-fPIC"], [], "the empty kernel")


def _build(text: str, name: str, flags: list[str], libraries: list[str], what: str) -> int:
    """Compiles ``text`` into a sealed memfd (write, grow and shrink sealed)."""
    with tempfile.TemporaryDirectory(prefix="evoteam-host-") as folder:
        src = Path(folder) / "source.cpp"
        out = Path(folder) / name
        src.write_text(text)
        command = [cxx_compiler(), "-O2", "-std=c++17", *flags, "-o", str(out), str(src), *libraries]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise KernelLoadError(f"cannot build {what}: {done.stderr.strip()[-2000:]}")
        data = out.read_bytes()
    fd = os.memfd_create(f"evoteam-{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}", os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    return fd
