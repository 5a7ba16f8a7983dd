"""The hosts' seccomp program (``bindings/confine.py``), run by a small classic-BPF interpreter: a host may act
on itself and nothing else; the native host starts no process; the numbers are the kernel's."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from evoteam.gpu_bench.bindings import confine

pytestmark = pytest.mark.unit

PID = 4242
OTHER = 777
EPERM = 0x00050000 | confine.EPERM
ENOSYS = 0x00050000 | confine.ENOSYS
KILL, ALLOW = confine.KILL_PROCESS, confine.ALLOW


def decide(
    machine: str, nr: int, *args: int, processes: bool = False, arch: int | None = None, worker: bool = False
) -> int:
    """What the program (a host's; ``worker``: the worker's own) returns for one syscall: a classic-BPF
    interpreter of the opcodes it uses."""
    audit = confine.ARCHES[machine][0] if arch is None else arch
    words = [a & 0xFFFFFFFFFFFFFFFF for a in args] + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, audit, 0, *words)
    program = confine.worker_instructions(machine) if worker else confine.instructions(PID, processes, machine)
    assert 0 < len(program) <= 4096
    pc, acc = 0, 0
    for _ in range(len(program)):
        code, jt, jf, k = program[pc]
        assert jt <= 255 and jf <= 255
        if code == confine.LD_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == confine.RET:
            return k
        else:
            taken = {confine.JEQ: acc == k, confine.JGE: acc >= k, confine.JSET: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)
    raise AssertionError("the program ran off its end")


def nr(machine: str, name: str) -> int:
    return confine.ARCHES[machine][1][name]


MACHINES = sorted(confine.ARCHES)


@pytest.mark.parametrize("machine", MACHINES)
def test_signals_reach_only_the_host_itself(machine: str) -> None:
    kill = nr(machine, "kill")
    assert decide(machine, kill, PID, 9) == ALLOW
    assert decide(machine, kill, 0, 9) == ALLOW  # its own process group
    assert decide(machine, kill, -PID, 9) == ALLOW
    assert decide(machine, kill, OTHER, 0) == EPERM  # even the permission probe
    assert decide(machine, kill, -1, 9) == EPERM  # every process the user may signal
    assert decide(machine, kill, -OTHER, 9) == EPERM
    assert decide(machine, nr(machine, "tgkill"), PID, 5000, 6) == ALLOW  # raise(), pthread_kill()
    assert decide(machine, nr(machine, "tgkill"), OTHER, OTHER, 9) == EPERM
    for name in ("tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        assert decide(machine, nr(machine, name), OTHER, 9) == EPERM
    assert decide(machine, nr(machine, "pidfd_send_signal"), 3, 9) == EPERM  # a pidfd may be any /proc/PID


@pytest.mark.parametrize("machine", MACHINES)
def test_scheduling_and_limits_of_other_processes_are_refused(machine: str) -> None:
    for name in ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64"):
        assert decide(machine, nr(machine, name), 0, 8) == ALLOW, name
        assert decide(machine, nr(machine, name), PID, 8) == ALLOW, name
        assert decide(machine, nr(machine, name), OTHER, 8) == EPERM, name
    setpriority = nr(machine, "setpriority")
    assert decide(machine, setpriority, confine.PRIO_PROCESS, 0, 19) == ALLOW  # nice(2)
    assert decide(machine, setpriority, confine.PRIO_PGRP, PID, 19) == ALLOW
    assert decide(machine, setpriority, confine.PRIO_PROCESS, OTHER, 19) == EPERM
    assert decide(machine, setpriority, 2, 1000, 19) == EPERM  # PRIO_USER: every process of the user
    ioprio = nr(machine, "ioprio_set")
    assert decide(machine, ioprio, confine.IOPRIO_WHO_PROCESS, 0, 0) == ALLOW
    assert decide(machine, ioprio, confine.IOPRIO_WHO_PROCESS, OTHER, 0) == EPERM
    assert decide(machine, ioprio, 3, 1000, 0) == EPERM  # IOPRIO_WHO_USER
    assert decide(machine, nr(machine, "pidfd_open"), PID, 0) == ALLOW
    assert decide(machine, nr(machine, "pidfd_open"), OTHER, 0) == EPERM
    for name in ("pidfd_getfd", "process_madvise", "process_mrelease"):
        assert decide(machine, nr(machine, name), 3, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_the_native_host_starts_no_process_and_reads_no_memory_but_its_own(machine: str) -> None:
    clone = nr(machine, "clone")
    assert decide(machine, clone, 0x3D0F00) == ALLOW  # pthread_create's flags (CLONE_THREAD among them)
    assert decide(machine, clone, 17) == KILL  # fork() through clone: SIGCHLD only
    assert decide(machine, nr(machine, "clone3"), 0, 88) == ENOSYS  # threads fall back to clone
    for name in ("execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev"):
        assert decide(machine, nr(machine, name), OTHER) == KILL, name
    if machine == "x86_64":
        assert decide(machine, nr(machine, "fork")) == KILL
        assert decide(machine, nr(machine, "vfork")) == KILL


@pytest.mark.parametrize("machine", MACHINES)
def test_a_python_host_may_start_processes_but_not_trace_others(machine: str) -> None:
    for name in ("clone", "execve", "execveat"):
        assert decide(machine, nr(machine, name), 17, processes=True) == ALLOW, name
    assert decide(machine, nr(machine, "clone"), 0x3D0F00, processes=True) == ALLOW  # pthread_create
    assert decide(machine, nr(machine, "clone3"), 0, 88, processes=True) == ENOSYS  # glibc falls back to clone
    for name in ("ptrace", "process_vm_readv", "process_vm_writev"):
        assert decide(machine, nr(machine, name), OTHER, processes=True) == EPERM, name
    assert decide(machine, nr(machine, "kill"), OTHER, 9, processes=True) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_other_syscalls_pass_and_other_architectures_are_killed(machine: str) -> None:
    assert decide(machine, 0, 3, 0, 10) == ALLOW  # read (x86-64) / io_setup (aarch64): not named
    assert decide(machine, 63, 3) == ALLOW
    assert decide(machine, 0, arch=0x40000003) == KILL  # i386
    if machine == "x86_64":
        assert decide(machine, 0x40000000 | 62, OTHER, 9) == KILL  # x32's kill would bypass the rules


def test_an_unknown_machine_has_no_program() -> None:
    assert confine.program(PID, False, "riscv64") == b""
    assert len(confine.program(PID, False, "x86_64")) == 8 * len(confine.instructions(PID, False, "x86_64"))


@pytest.mark.parametrize(
    ("machine", "header"),
    [
        ("x86_64", Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")),
        ("aarch64", Path("/usr/include/asm-generic/unistd.h")),
    ],
)
def test_the_syscall_numbers_are_the_kernel_headers(machine: str, header: Path) -> None:
    if not header.exists():
        pytest.skip(f"no {header} here")
    text = header.read_text()
    numbers = {**confine.ARCHES[machine][1], "seccomp": confine.SECCOMP[machine]}
    for name, number in numbers.items():
        found = re.search(rf"#define __NR(?:3264)?_{name}\s+(\d+)\b", text)
        assert found is not None and int(found.group(1)) == number, name


def test_a_host_s_environment_asks_openmp_to_bind_no_thread() -> None:
    base = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores", "GOMP_CPU_AFFINITY": "0-1", "OMP_NUM_THREADS": "2"}
    assert confine.environment(base) == {"OMP_NUM_THREADS": "2"}


@pytest.mark.parametrize("machine", MACHINES)
def test_no_process_joins_another_group_or_starts_a_session(machine: str) -> None:
    """The worker stops a host by its process group: the host may not leave it for another (the worker's),
    and nothing it starts may start a session; a process it starts may lead a group of its own (ninja runs
    each command so) or join the host's."""
    setpgid, setsid = nr(machine, "setpgid"), nr(machine, "setsid")
    assert decide(machine, setsid, processes=True) == EPERM
    assert decide(machine, setsid) == EPERM
    assert decide(machine, setpgid, 0, OTHER, processes=True) == EPERM  # the worker's group
    assert decide(machine, setpgid, PID, OTHER, processes=True) == EPERM
    assert decide(machine, setpgid, 0, 0, processes=True) == ALLOW  # a group of its own
    assert decide(machine, setpgid, 0, PID, processes=True) == ALLOW  # the host's
    assert decide(machine, setpgid, 0, 0) == EPERM  # the native host starts no process to place


@pytest.mark.parametrize("machine", MACHINES)
def test_what_a_python_host_starts_stays_its_descendant(machine: str) -> None:
    """``CLONE_PARENT`` would make the new process the worker's child, beyond the host's stop."""
    clone = nr(machine, "clone")
    assert decide(machine, clone, confine.CLONE_PARENT | 17, processes=True) == EPERM
    assert decide(machine, clone, confine.CLONE_PARENT | 0x3D0F00, processes=True) == EPERM
    assert decide(machine, clone, 0x4111, processes=True) == ALLOW  # vfork's flags through clone


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("processes", [False, True])
def test_no_host_makes_memory_that_no_mapping_holds_or_hands_work_to_io_uring(machine: str, processes: bool) -> None:
    """A memfd filled with ``write``, a detached SysV segment and a message queue escape the address-space
    limit and every OOM score; io_uring's workers were kernel threads beyond a stop before Linux 5.12."""
    for name in ("memfd_create", "shmget", "msgget", "io_uring_setup"):
        assert decide(machine, nr(machine, name), 0, 0, processes=processes) == EPERM, name
    assert decide(machine, nr(machine, "msgget") + 1, 0, processes=processes) == ALLOW  # the next: not named


@pytest.mark.parametrize("machine", MACHINES)
def test_what_the_worker_starts_stays_its_descendant_and_nothing_else_is_refused(machine: str) -> None:
    """The worker kills its descendants after each request: a candidate in its process may not make a process
    its sibling. The worker signals, moves and limits its hosts and makes their memfds: all allowed."""
    clone = nr(machine, "clone")
    assert decide(machine, clone, confine.CLONE_PARENT | 17, worker=True) == EPERM
    assert decide(machine, clone, 17, worker=True) == ALLOW  # fork
    assert decide(machine, clone, 0x3D0F00, worker=True) == ALLOW  # pthread_create
    assert decide(machine, nr(machine, "clone3"), 0, 88, worker=True) == ENOSYS
    for name in ("kill", "sched_setaffinity", "setpriority", "prlimit64", "memfd_create", "setsid", "execve"):
        assert decide(machine, nr(machine, name), OTHER, 9, worker=True) == ALLOW, name
    assert decide(machine, 0, arch=0x40000003, worker=True) == KILL  # i386
    assert confine.worker_program("riscv64") == b""


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("processes", "worker"), [(False, False), (True, False), (False, True)])
def test_no_file_takes_disk_space_past_its_end(machine: str, processes: bool, worker: bool) -> None:
    """``fallocate`` with ``FALLOC_FL_KEEP_SIZE`` allocates past a file's end, beyond the file size limit (100
    MiB under a 1 MiB ``RLIMIT_FSIZE``, checked): refused with EOPNOTSUPP in every program; a ``fallocate``
    that grows the file (``posix_fallocate``, counted by the limit) is allowed."""
    fallocate = nr(machine, "fallocate")
    refused = 0x00050000 | confine.EOPNOTSUPP
    for mode in (confine.FALLOC_FL_KEEP_SIZE, 0x03, 0x11):  # alone, punching a hole, with FALLOC_FL_ZERO_RANGE
        assert decide(machine, fallocate, 3, mode, 0, 1 << 40, processes=processes, worker=worker) == refused
    assert decide(machine, fallocate, 3, 0, 0, 1 << 20, processes=processes, worker=worker) == ALLOW
    assert decide(machine, fallocate, 3, 0x10, 0, 1 << 20, processes=processes, worker=worker) == ALLOW
