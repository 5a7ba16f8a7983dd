"""The seccomp filter of a host process: what a candidate may do to processes, its own or others'.

A host runs one candidate beside the worker's other hosts (the incumbent's, the empty kernels') under the same
user, so by default its code could signal them, renice them, pin them to one CPU, lower their limits or read
and write their memory, and change their verdicts. The worker builds one classic-BPF program per host, for the
host's own pid, and sends it as the host's first message; the host installs it on all its threads (TSYNC)
before any candidate code is loaded, after making itself non-dumpable and giving up every capability (a host
run by root would keep CAP_SYS_PTRACE and CAP_KILL), so no other host may open its memory either. Under the
program:

- any syscall that names another process is refused with EPERM: signals (``kill``, ``tgkill``, ``tkill``,
  ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo``), scheduling (``setpriority``, ``sched_setaffinity``,
  ``sched_setscheduler``, ``sched_setparam``, ``sched_setattr``, ``ioprio_set``) and ``prlimit64`` are
  allowed only on the host itself (pid 0 or its own; ``kill`` also its own process group), never on a user;
  ``pidfd_open`` only on itself; ``pidfd_send_signal``, ``pidfd_getfd``, ``process_madvise`` and
  ``process_mrelease`` not at all;
- ``ptrace`` and cross-process memory access (``process_vm_readv``/``writev``) kill a native host with
  SIGSYS, and are refused in a Python host (EPERM);
- no process may join another process group than a new one of its own or the host's (``setpgid``), nor
  start a session (``setsid``): refused with EPERM, and in the native host, which starts no process,
  ``setpgid`` not at all. The worker stops a host by its process group, so a host that joined the worker's
  group ran on between calls (a thread the kernel left finished its outputs after the answer, where the stop
  would have frozen it), and ``kill(0, ...)``, its own group, would have reached the worker;
- in the native host (``processes=False``) starting a process (``fork``, ``vfork``, ``clone`` without
  ``CLONE_THREAD``) or ``exec`` kills it with SIGSYS. A Python host may start processes (a compiler for
  ``load_inline``); what it starts inherits the program, and stays the host's to stop: its descendant
  (the host is a child subreaper), so ``clone`` with ``CLONE_PARENT``, which makes the new process the
  *worker's* child, the host's sibling, is refused with EPERM. Such a process was neither in the host's
  group once it left it nor among its descendants: it ran on between calls, finishing outputs after the
  answer or burning the CPU while the other kernel of the pair was timed. In both hosts ``clone3``, whose
  flags the program cannot read (they are in memory), reports ENOSYS, so glibc falls back to ``clone``;
- no host makes memory that no mapping holds: ``memfd_create``, ``shmget`` and ``msgget`` are refused with
  EPERM (the host's buffers are the worker's memfds). A memfd filled with ``write`` is counted by no
  address-space limit and by no process's OOM score, and lasts as long as the host, which may live on between
  requests: a Python candidate under a 6 GiB limit held 2 GiB that way with a resident size of 232 MiB, and
  could have held the whole machine's memory, where the OOM killer, which scores a process by what it has
  resident, ends larger programs first (the editor's). A detached SysV segment outlives the host: it lasts
  until its IPC namespace ends (the sandbox's; without one, the machine's);
- ``io_uring_setup`` is refused with EPERM: io_uring runs work on kernel threads of its own. From Linux 5.12
  they are threads of the host and stop with it (checked on 6.18); before, they were kernel threads that no
  stop of the host reached, where work handed to them would have run on between calls;
- ``fallocate`` with ``FALLOC_FL_KEEP_SIZE`` is refused with EOPNOTSUPP: it takes disk space past a file's
  end, which the worker's limit on each file's size does not count (``worker/disk.py``).

One consequence for honest kernels: a thread's affinity is the host's own to set only through pid 0 (each
thread for itself, ``sched_setaffinity(0, ...)``); setting another thread's by its id is refused too, and
OpenMP binds each new thread that way, so a host's environment (``environment``) leaves out the variables that
ask OpenMP to bind threads. The worker's thread policy still keeps every host on its CPUs. Only x86-64 and
aarch64 have a program; elsewhere ``program`` returns no instruction and the host runs unconfined.
"""

from __future__ import annotations

import ctypes
import platform
import struct
from collections.abc import Callable, Iterator, Mapping

INSTRUCTION = struct.Struct("<HBBI")
"""One ``struct sock_filter``: code, jump if true, jump if false, constant."""

LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RET = 0x06  # BPF_RET | BPF_K

KILL_PROCESS = 0x80000000
ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
EPERM, ENOSYS, EOPNOTSUPP = 1, 38, 95

NR_OFFSET, ARCH_OFFSET, ARGS_OFFSET = 0, 4, 16
"""Offsets in ``struct seccomp_data``: the syscall number, the audit arch, the six 64-bit arguments."""

CLONE_PARENT, CLONE_THREAD = 0x8000, 0x10000
FALLOC_FL_KEEP_SIZE = 0x01
PRIO_PROCESS, PRIO_PGRP = 0, 1
IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP = 1, 2

_X86_64 = {
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "kill": 62, "tkill": 200, "tgkill": 234,
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "setpriority": 141, "sched_setparam": 142,
    "sched_setscheduler": 144, "sched_setaffinity": 203, "sched_setattr": 314, "prlimit64": 302,
    "ioprio_set": 251, "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "process_madvise": 440, "process_mrelease": 448, "setpgid": 109, "setsid": 112, "memfd_create": 319,
    "shmget": 29, "msgget": 68, "io_uring_setup": 425, "fallocate": 285,
}  # fmt: skip
_AARCH64 = {
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
    "rt_tgsigqueueinfo": 240, "setpriority": 140, "sched_setparam": 118, "sched_setscheduler": 119,
    "sched_setaffinity": 122, "sched_setattr": 274, "prlimit64": 261, "ioprio_set": 30, "pidfd_open": 434,
    "pidfd_send_signal": 424, "pidfd_getfd": 438, "process_madvise": 440, "process_mrelease": 448,
    "setpgid": 154, "setsid": 157, "memfd_create": 279, "shmget": 194, "msgget": 186, "io_uring_setup": 425,
    "fallocate": 47,
}  # fmt: skip
ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
"""Machine name -> (its AUDIT_ARCH value, the syscall numbers the program names)."""
SECCOMP = {"x86_64": 317, "aarch64": 277}
"""The number of the ``seccomp`` syscall itself, per machine."""

SELF_ONLY = ("tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "tgkill", "sched_setaffinity", "sched_setscheduler",
             "sched_setparam", "sched_setattr", "prlimit64", "pidfd_open")  # fmt: skip
"""Syscalls whose first argument names a process: allowed on 0 (where that means the caller) or the host."""
REFUSED = ("pidfd_send_signal", "pidfd_getfd", "process_madvise", "process_mrelease")
"""Syscalls that act on a process through a pidfd (which a /proc/PID folder can be): refused."""
MEMORY = ("ptrace", "process_vm_readv", "process_vm_writev")
UNCOUNTED = ("memfd_create", "shmget", "msgget")
"""Syscalls that make memory no mapping holds (a memfd written with ``write``, a detached SysV segment, a
message queue): no address-space limit counts it, nor the OOM killer's score of any process, and it lasts as
long as the host (SysV's, as long as the IPC namespace). Refused (EPERM): hosts get their buffers from the
worker."""
DEFERRED = ("io_uring_setup",)
"""io_uring hands work to kernel threads: refused (EPERM), so no work runs outside the host's own threads."""


THREAD_BINDING = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")
"""Variables that make OpenMP runtimes pin each thread they create by its id (libgomp then fails to create
threads under the program): not passed to hosts."""


def environment(base: Mapping[str, str]) -> dict[str, str]:
    """A host's environment: ``base`` without ``THREAD_BINDING``."""
    return {key: value for key, value in base.items() if key not in THREAD_BINDING}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k & 0xFFFFFFFF)


def _arg(index: int) -> tuple[int, int, int, int]:
    """Loads the low 32 bits of argument ``index`` (pids and the like are ``int``: the kernel reads no more)."""
    return _op(LD_ABS, ARGS_OFFSET + 8 * index)


def _require(values: tuple[int, ...]) -> Iterator[tuple[int, int, int, int]]:
    """The accumulator is one of ``values``: go on to the next instruction; else EPERM."""
    for n, value in enumerate(values):
        yield _op(JEQ, value, jt=len(values) - n)
    yield _op(RET, _ERRNO | EPERM)


def _keeping_size() -> list[tuple[int, int, int, int]]:
    """``fallocate(fd, mode, offset, len)`` with ``FALLOC_FL_KEEP_SIZE`` in ``mode``: refused with EOPNOTSUPP
    (what a file system without it says; glibc's ``posix_fallocate``, which does not ask for it, is unaffected).
    It allocates past a file's end without growing the file, the one way to take disk space that the file size
    limit (``RLIMIT_FSIZE``, ``worker/disk.py``) does not count: 100 MiB under a 1 MiB limit, checked."""
    return [_arg(1), _op(JSET, FALLOC_FL_KEEP_SIZE, jf=1), _op(RET, _ERRNO | EOPNOTSUPP), _op(RET, ALLOW)]


def _rule(name: str, pid: int, processes: bool) -> list[tuple[int, int, int, int]] | None:
    """The instructions run for syscall ``name`` (each path ends in a return); None: allowed as it is."""
    own = (0, pid)
    if name == "fallocate":
        return _keeping_size()
    if name in ("fork", "vfork", "execve", "execveat"):
        return None if processes else [_op(RET, KILL_PROCESS)]
    if name == "clone3":
        return [_op(RET, _ERRNO | ENOSYS)]
    if name == "clone":  # (flags, ...)
        if processes:
            return [_arg(0), _op(JSET, CLONE_PARENT, jf=1), _op(RET, _ERRNO | EPERM), _op(RET, ALLOW)]
        return [_arg(0), _op(JSET, CLONE_THREAD, jt=1), _op(RET, KILL_PROCESS), _op(RET, ALLOW)]
    if name in MEMORY:
        return [_op(RET, _ERRNO | EPERM if processes else KILL_PROCESS)]
    if name in (*REFUSED, *UNCOUNTED, *DEFERRED):
        return [_op(RET, _ERRNO | EPERM)]
    if name == "kill":
        return [_arg(0), *_require((*own, -pid)), _op(RET, ALLOW)]
    if name in SELF_ONLY:
        return [_arg(0), *_require(own), _op(RET, ALLOW)]
    if name == "setsid":
        return [_op(RET, _ERRNO | EPERM)]
    if name == "setpgid":  # (pid, pgid): a group of its own (0) or the host's, where processes may be started
        return [_arg(1), *_require((0, pid)), _op(RET, ALLOW)] if processes else [_op(RET, _ERRNO | EPERM)]
    if name in ("setpriority", "ioprio_set"):  # (which, who): a process or a group, never a user
        kinds = (PRIO_PROCESS, PRIO_PGRP) if name == "setpriority" else (IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP)
        return [_arg(0), *_require(kinds), _arg(1), *_require(own), _op(RET, ALLOW)]
    return None


def _worker_rule(name: str) -> list[tuple[int, int, int, int]] | None:
    """The worker's own rules: what it starts stays its descendant, and no file takes space past its end
    (``worker_instructions``)."""
    if name == "fallocate":
        return _keeping_size()
    if name == "clone3":
        return [_op(RET, _ERRNO | ENOSYS)]
    if name == "clone":
        return [_arg(0), _op(JSET, CLONE_PARENT, jf=1), _op(RET, _ERRNO | EPERM), _op(RET, ALLOW)]
    return None


def _assemble(
    rule: Callable[[str], list[tuple[int, int, int, int]] | None], machine: str | None
) -> list[tuple[int, int, int, int]]:
    """A program that runs ``rule``'s instructions for each syscall it names; empty on an unknown machine."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return []
    audit, numbers = arch
    program = [_op(LD_ABS, ARCH_OFFSET), _op(JEQ, audit, jt=1), _op(RET, KILL_PROCESS), _op(LD_ABS, NR_OFFSET)]
    if audit == ARCHES["x86_64"][0]:  # the x32 numbers (bit 30) would bypass every rule below
        program += [_op(JGE, 0x40000000, jf=1), _op(RET, KILL_PROCESS)]
    for name, nr in numbers.items():
        body = rule(name)
        if body is not None:
            program += [_op(JEQ, nr, jf=len(body)), *body]
    program.append(_op(RET, ALLOW))
    return program


def instructions(pid: int, processes: bool, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The program for the host whose pid is ``pid`` as (code, jt, jf, k); empty on an unknown machine."""
    return _assemble(lambda name: _rule(name, pid, processes), machine)


def worker_instructions(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The worker's own program. A candidate that runs in the worker's process (a CUDA kernel, a Python
    candidate on a GPU, anything with ``--no-isolate``) may start processes, and the worker, a child
    subreaper, kills every descendant after each request; ``clone`` with ``CLONE_PARENT`` made the new process
    the worker's *sibling*, beyond that kill: it ran on through later requests (EPERM now; ``clone3``, whose
    flags cannot be read, reports ENOSYS). A ``fallocate`` that keeps the file's size is refused, as in the
    hosts. Nothing else is refused: the worker signals, moves and limits its hosts, and makes the memfds they
    share."""
    return _assemble(_worker_rule, machine)


def _pack(ops: list[tuple[int, int, int, int]]) -> bytes:
    return b"".join(INSTRUCTION.pack(*op) for op in ops)


def program(pid: int, processes: bool, machine: str | None = None) -> bytes:
    """The program as the bytes of a ``struct sock_filter`` array (what a host receives)."""
    return _pack(instructions(pid, processes, machine))


def worker_program(machine: str | None = None) -> bytes:
    """``worker_instructions`` as bytes, for ``install_filter``."""
    return _pack(worker_instructions(machine))


_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 4, 38, 24, 47
_PR_CAP_AMBIENT_CLEAR_ALL, _CAPABILITY_VERSION_3, _LAST_CAPABILITY = 4, 0x20080522, 63
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def drop_capabilities(libc: ctypes.CDLL) -> None:
    """Gives up every capability, now and for any program run later (the ambient and bounding sets too): a
    host run by root would otherwise still open other processes' memory (CAP_SYS_PTRACE) and signal them
    (CAP_KILL). A process without capabilities keeps its own."""
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3: none to clear
    for capability in range(_LAST_CAPABILITY + 1):  # EINVAL past the kernel's last; EPERM: none to drop
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice (capabilities 0-31, 32-63)
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop the host's capabilities")


def install(code: bytes) -> bool:
    """Makes this process non-dumpable, drops its capabilities and installs ``code`` (``program``'s bytes) on
    every thread; False when there is no program for this machine. Raises OSError when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot make the host non-dumpable")
    drop_capabilities(libc)
    return install_filter(code)


def install_filter(code: bytes) -> bool:
    """Installs ``code`` on every thread of this process (and what it starts from now on), with no_new_privs;
    False when there is no program for this machine. Raises OSError when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not code:
        return False
    if len(code) % INSTRUCTION.size or len(code) // INSTRUCTION.size > 4096:
        raise OSError(0, f"a malformed seccomp program ({len(code)} bytes)")
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Program(len(code) // INSTRUCTION.size, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
    flags = _SECCOMP_FILTER_FLAG_TSYNC
    done = libc.syscall(SECCOMP[platform.machine()], _SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(fprog))
    if done != 0:  # -1 and errno, or the id of a thread that could not be synchronized
        raise OSError(ctypes.get_errno(), f"cannot install the seccomp filter ({done})")
    return True
