"""CPU kernels run in a host process of their own: ``ProcessHost``, what every host shares, and ``HostKernel``,
C ABI kernels in the native host (``host_program.py``); Python candidates have the Python host
(``python_host.py``).

The worker holds the reference outputs and decides every verdict; the candidate's code never runs in its
address space. A binding moves the tensors it is given into memfds (in place: the worker's tensors keep
their identity, only their storage moves) and passes the fds to the host, which maps them; the kernel's
outputs are read by the worker from that shared memory. A call is timed by the worker's own clock around
the round trip, less the fastest round trip of an empty kernel in a host of the worker's own. A host stops
itself (SIGSTOP, every thread) right after it answers, the call ends when that stop is done, and the worker
continues it only for the next call: a kernel that returns early and finishes its work in a thread does that
work on the clock or is frozen with its outputs unfinished, and the checks see them so. An answer with the
wrong nonce, or a message the worker did not ask for, is a ``KernelIntegrityError``: the candidate wrote to
the control socket itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import mmap
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch

from evoteam.gpu_bench.bindings import Call, KernelCallError, KernelIntegrityError, KernelLoadError, confine
from evoteam.gpu_bench.bindings.dtypes import c_scalar_type
from evoteam.gpu_bench.bindings.host_program import EMPTY_SYMBOL, empty_library, executable
from evoteam.gpu_bench.schema import Definition, DType
from evoteam.gpu_bench.verify.inputs import Value
from evoteam.gpu_bench.worker.memory import oom_kills

_ARG = struct.Struct("<IIQqd")
_CALL = struct.Struct("<cxxxIQ")
_ANSWER = struct.Struct("<cBxxiQ")
ROUND_TRIP_CALLS = 64
"""Calls of the empty kernel whose fastest is the round trip subtracted from timed calls (a quarter of them
where the same round trip was measured before in this worker: the fastest of all of them counts)."""
REFRESH_EVERY = 4
"""Once measured, the round trip of a key is measured again on every ``REFRESH_EVERY``-th request for it; the
others take the fastest yet as it is (a lower bound either way; binding the empty host and calling it cost
a Python host's workload about 3 ms)."""
_FASTEST: dict[tuple[object, ...], float] = {}
"""The fastest empty call yet, in ms, per round-trip key: still a lower bound of every later call's round trip."""
_ASKED: dict[tuple[object, ...], int] = {}
_FOLLOW = False
"""Whether hosts follow the worker's CPU (``follow_caller``)."""
_LIBC = ctypes.CDLL(None)
_SCHED_GETCPU = getattr(_LIBC, "sched_getcpu", None)
if _SCHED_GETCPU is not None:
    _SCHED_GETCPU.argtypes, _SCHED_GETCPU.restype = [], ctypes.c_int


def follow_caller(enabled: bool) -> bool:
    """With ``enabled`` (a worker whose kernels use one thread), each host is moved before a call to the CPU
    the worker's thread is on, where it is not there already: the worker waits while the host runs, so the
    two take turns on one CPU, and a call wakes no other CPU. On a 2-core VM that took an empty call of a
    Python host from about 65 µs (median) to 20 µs, and the slowest tenth of an empty native call from
    about 70 µs to 12 µs. Kernels allowed several threads keep the worker's CPUs: the threads a host starts
    inherit its CPUs. Returns whether hosts follow (not where the platform cannot tell the CPU)."""
    global _FOLLOW
    _FOLLOW = enabled and _SCHED_GETCPU is not None and hasattr(os, "sched_setaffinity")
    return _FOLLOW


@contextlib.contextmanager
def on_one_cpu() -> Iterator[None]:
    """Where hosts follow the worker (``follow_caller``): keeps the calling thread on the CPU it is on for
    the block, so the hosts it calls stay there with it (left free, the scheduler woke the worker on the
    other, idle CPU after many calls, and the host was moved after it). Its CPUs are given back after the
    block, unless something in it changed them (a kernel in the worker's process: the worker reports
    that)."""
    cpu = int(_SCHED_GETCPU()) if _FOLLOW and _SCHED_GETCPU is not None else -1
    if cpu < 0:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:  # the CPU went (a cpuset changed): the request runs where the scheduler puts it
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.sched_getaffinity(0) == {cpu}:
                os.sched_setaffinity(0, before)


class _Map(mmap.mmap):
    """An mmap that can be weakly referenced (the registry of shared storages follows its lifetime)."""


_SHARED: dict[int, tuple[weakref.ref[_Map], int, int]] = {}
"""Storage address -> (its mapping, its memfd, its size) for every storage moved into shared memory."""


def share(tensor: torch.Tensor) -> tuple[int, int, int]:
    """(memfd, size, byte offset) of ``tensor``'s storage, moving the storage into a memfd first if needed."""
    storage = tensor.untyped_storage()
    entry = _SHARED.get(storage.data_ptr())
    if entry is None or entry[0]() is None or entry[2] != max(storage.nbytes(), 1):
        entry = _move(tensor)
        storage = tensor.untyped_storage()
    return entry[1], entry[2], tensor.data_ptr() - storage.data_ptr()


def _move(tensor: torch.Tensor) -> tuple[weakref.ref[_Map], int, int]:
    old = tensor.untyped_storage()
    size = max(old.nbytes(), 1)
    fd = os.memfd_create("evoteam-buffer", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    mapping = _Map(fd, size)
    raw = torch.frombuffer(mapping, dtype=torch.uint8)
    if old.nbytes():
        raw[: old.nbytes()].copy_(torch.empty(0, dtype=torch.uint8).set_(old, 0, (old.nbytes(),), (1,)))
    with torch.no_grad():
        tensor.set_(raw.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())
    base = tensor.untyped_storage().data_ptr()
    entry = (weakref.ref(mapping), fd, size)
    _SHARED[base] = entry
    weakref.finalize(mapping, _forget, base, fd)
    return entry


def _forget(base: int, fd: int) -> None:
    _SHARED.pop(base, None)
    with contextlib.suppress(OSError):
        os.close(fd)


class ProcessHost:
    """What every host shares: its process (argv from ``_command``), the stop between calls, the call over the
    socket with its nonce, and the reports (process state, CPU time, the round trip of an empty kernel).
    A ``persistent`` host outlives a request (a Python host costs an interpreter's start); the others end
    with it (``release``)."""

    destination_passing = True
    device = "cpu"
    persistent = False
    processes = False
    """Whether the kernel may start processes and run programs (``confine.py``): a Python candidate may."""
    name = "the native host"
    start_s = 30.0
    """How long the host may take to start and load the kernel."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._stopped = False
        self._cpu: int | None = None
        """The CPU the host was last moved to (``_follow``); None until then."""
        self._generation = 0
        self._started: dict[str, str] = {}
        self._changed: list[str] = []
        self._oom_kills: int | None = None
        self._since: int | None = None
        """When the host process last started (``start_ticks``)."""
        self.files_confined = False
        """Whether Landlock confines the kernel's writes (false where the Linux kernel lacks it): the native
        host holds the whole file system read-only, the Python host allows its own folders only."""
        _HOSTS.add(self)
        self._start()  # a kernel that does not load fails here, as the in-process binding does
        if self.persistent:
            self._stop()
        else:
            self.release()

    def _command(self, sock: int) -> tuple[list[str], tuple[int, ...], dict[str, str] | None]:
        """The host's argv (``sock`` is its end of the control socket), the fds it inherits, its environment
        (None: the worker's)."""
        raise NotImplementedError

    def _empty_host(self) -> ProcessHost:
        """A host of the same kind whose kernel does nothing, bound in this kernel's order: its round trip is
        what timing subtracts."""
        raise NotImplementedError

    def _load_error(self, text: str) -> KernelLoadError:
        return KernelLoadError(f"{self.name} cannot run the kernel: {text}")

    def _failure(self, rc: int, text: str) -> KernelCallError:
        """The error of a call that answered ``rc`` (not 0), with the text the host sent after its answer."""
        return KernelCallError(f"entry point returned {rc} (0 means success)")

    def pids(self) -> list[int]:
        """The host's process and its descendants (none when no host runs)."""
        process = self._process
        if process is None or process.poll() is not None:
            return []
        return [process.pid]

    def _bound(self, sock: socket.socket, message: bytes, fds: list[int], binding: int) -> Call:
        """Sends one binding (its buffers' fds with it) and returns its call."""
        generation = self._generation
        self._follow()
        self._continue()
        self._send(lambda: socket.send_fds(sock, [message], fds))
        answer = self._receive(sock)
        self._stop()  # until the call: a thread the kernel started gets no time between calls, nor before one
        if not answer.startswith(b"K"):
            raise KernelCallError(f"{self.name} refused the binding: {answer[1:].decode(errors='replace')}")

        def call() -> None:
            if self._generation != generation or self._socket is None:
                raise KernelCallError(f"{self.name} was restarted after this call was prepared")
            self._expect_quiet(self._socket)
            self._follow()
            self._continue()
            nonce = secrets.randbits(64)
            sock = self._socket
            self._send(lambda: sock.send(_CALL.pack(b"C", binding, nonce)))
            answer = self._answer(sock)
            self._stop()  # the worker's own: its group (the host stopped itself), and what left it
            if len(answer) < _ANSWER.size:
                raise KernelIntegrityError(f"{self.name}'s answer was malformed (the kernel wrote to its socket)")
            kind, fp_changed, rc, echoed = _ANSWER.unpack(answer[: _ANSWER.size])
            if fp_changed and "the floating-point state (rounding, flush-to-zero)" not in self._changed:
                self._changed.append("the floating-point state (rounding, flush-to-zero)")
            if kind != b"R" or echoed != nonce:
                raise KernelIntegrityError(f"{self.name}'s answer did not match the call (the kernel forged it)")
            if rc != 0:
                raise self._failure(rc, answer[_ANSWER.size :].decode(errors="replace"))

        weakref.finalize(call, self._free, binding, generation)
        return call

    def changed_state(self) -> list[str]:
        """What the kernel changed of its host's process state since the host started (each once), then
        forgotten: signal handlers, CPU affinity, priority, resource limits, the floating-point state. It dies
        with the host; the worker reports it."""
        self._read_changes()
        if self._process is not None:
            self._started = host_state(self._process.pid)  # what was reported is the state from now on
        changed, self._changed = self._changed, []
        return changed

    def cpu_seconds(self) -> float | None:
        """CPU time of every thread of the host's processes (the kernel's work; preemption by other processes
        on a busy machine does not count); None when no host runs."""
        pids = self.pids()
        if not pids:
            return None
        total = 0.0
        for pid in pids:
            try:
                total += time.clock_gettime(_process_cpu_clock(pid))
            except OSError:
                if pid == pids[0]:
                    return None
        return total

    def round_trip_ms(
        self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]
    ) -> float:
        """The fastest call of an empty kernel in a host of this kind bound to the same buffers, in milliseconds
        (``ROUND_TRIP_CALLS`` calls, a quarter of them on every ``REFRESH_EVERY``-th request once this worker
        has measured the same key, none on the others; the fastest of every such call counts): the same
        messages, signals and wake-ups as a call of this kernel, with no kernel. That host is ours alone (the
        candidate's code never runs in it), so a candidate cannot make it slow."""
        key = self._round_trip_key(outputs)
        known = _FASTEST.get(key)
        _ASKED[key] = asked = _ASKED.get(key, 0) + 1
        if known is not None and asked % REFRESH_EVERY:
            return known
        call = self._empty_host().bind(inputs, outputs, axes)
        fastest = float("inf") if known is None else known
        for _ in range(ROUND_TRIP_CALLS if known is None else ROUND_TRIP_CALLS // 4):
            start = time.perf_counter_ns()
            call()
            fastest = min(fastest, (time.perf_counter_ns() - start) / 1e6)
        _FASTEST[key] = fastest
        return fastest

    def _round_trip_key(self, outputs: Mapping[str, torch.Tensor]) -> tuple[object, ...]:
        """What the empty kernel's round trip depends on: calls of the same key share their fastest."""
        return (type(self).__name__,)

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        raise NotImplementedError

    def release(self) -> None:
        """Ends the host process with SIGKILL (the next binding starts a fresh one): its output is in the log
        already (the native host flushes it after every call, the Python host runs unbuffered), and
        killed, it is gone in about 0.1 ms where ending on its own took 1.2 ms. The empty kernel's host, the
        worker's own, lives on."""
        self._read_changes()
        process, started = self._detach()
        if process is None:
            return
        pidfds = _pidfds(started)  # what the host started dies with it, gone when this returns
        _kill([*started, process.pid])
        process.wait()
        _wait_for(pidfds, timeout_s=2.0)

    def _detach(self) -> tuple[subprocess.Popen[bytes] | None, list[int]]:
        """Forgets the host, its socket closed (the next binding starts a fresh one): its process (None when
        none ran) and the processes it started."""
        pids = self.pids()
        process, sock = self._process, self._socket
        self._process, self._socket, self._stopped = None, None, False
        if sock is not None:
            sock.close()
        return process, pids[1:]

    def _orphans(self, host: int) -> list[int]:
        """What the ended host ``host`` started that outlived it, to be killed with it: none for a host that
        starts no process."""
        return []

    def _read_changes(self) -> None:
        if self._process is not None:
            now = host_state(self._process.pid)
            self._changed += [what for what in _differences(self._started, now) if what not in self._changed]

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    def _ensure(self) -> socket.socket:
        if self._socket is None or self._process is None or self._process.poll() is not None:
            self.release()
            self._start()
        assert self._socket is not None
        return self._socket

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv, fds, env = self._command(theirs.fileno())
            process = subprocess.Popen(
                argv, pass_fds=(*fds, theirs.fileno()), stdin=subprocess.DEVNULL, env=env, process_group=0
            )
        finally:
            theirs.close()
        self._process, self._socket, self._stopped, self._cpu = process, ours, False, None
        self._since = start_ticks(process.pid)  # read now: once it has ended and been waited for, it is gone
        with contextlib.suppress(OSError):  # a host that died at once says why when its answer is read
            ours.send(b"P" + confine.program(process.pid, processes=self.processes))
        self._oom_kills = oom_kills()  # a SIGKILL while this count rises is the OOM killer's
        self._generation += 1
        ours.settimeout(self.start_s)
        try:
            answer = self._receive(ours)
        finally:
            ours.settimeout(None)
        self.files_confined = answer == b"KL"
        self._started = host_state(process.pid)
        if not answer.startswith(b"K"):
            self.release()
            raise self._load_error(answer[1:].decode(errors="replace"))

    def _receive(self, sock: socket.socket) -> bytes:
        try:
            answer = sock.recv(65536)
        except TimeoutError:
            raise KernelLoadError(f"{self.name} did not start within {self.start_s:.0f} s") from None
        except OSError:
            answer = b""
        if answer:
            return answer
        raise self._crashed()

    def _send(self, send: Callable[[], object]) -> None:
        """Sends a message to the host; one that ended since its last answer (killed while stopped, or by a
        thread of the kernel's the moment it was continued) is a crash with the reason, not a broken pipe."""
        try:
            send()
        except OSError:
            raise self._crashed() from None

    def _answer(self, sock: socket.socket) -> bytes:
        """A call's answer, read once the host has stopped: a host sends its answer and then stops itself,
        its group and every thread with it, so the call ends, on the worker's clock, when the stop does. Work
        a kernel handed to a thread of its own is done before that, on the clock, or waits for the next call;
        before, such a thread ran on in the moment between the answer and the worker's stop. A host that
        stopped without an answer (the kernel stopped it) is continued and waited for again."""
        process = self._process
        while process is not None:
            try:  # not reaped (WNOWAIT): ``_death`` reads how it ended
                os.waitid(os.P_PID, process.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                break
            try:
                answer = sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if process.poll() is not None:  # gone, its socket held open by a process it started
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGCONT)
                continue
            except OSError:
                break
            if answer:
                return answer
            break
        raise self._crashed()

    def _crashed(self) -> KernelCallError:
        """The error of a call whose host ended: the kernel crashed it, and how (``_death``)."""
        return KernelCallError(f"the kernel crashed {self.name} ({self._death()})")

    def _death(self) -> str:
        """Why the host stopped answering, once what it started is killed and it is waited for."""
        process, started = self._detach()
        _kill(started)
        if process is None:
            return "it is gone"
        _kill(self._orphans(process.pid))
        try:
            code = process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            return "it stopped answering"
        if code == -signal.SIGSYS:
            return (
                "killed by SIGSYS: it started a process, ran a program, or traced or read another process, "
                f"which {self.name} forbids (a syscall its seccomp filter kills for)"
            )
        if code == -signal.SIGKILL and self._oom_kills is not None:
            now = oom_kills()
            if now is not None and now > self._oom_kills:
                return (
                    "killed by SIGKILL from the kernel's OOM killer: out of memory (the machine's OOM kill count "
                    f"rose from {self._oom_kills} to {now} while it ran)"
                )
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"it exited with status {code}"

    def _expect_quiet(self, sock: socket.socket) -> None:
        """Nothing may wait on the socket between calls: the host answers only what it is asked."""
        try:
            extra = sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            extra = b""
        if extra:
            raise KernelIntegrityError(f"{self.name} sent a message nobody asked for (the kernel wrote to it)")

    def _follow(self) -> None:
        """Moves the host to the CPU this thread is on (``follow_caller``), where it is not there already.
        What the kernel changed of the host's state is read first, so moving it hides no change the kernel
        made to its own CPUs; the moved state is the one later changes are measured from."""
        if not _FOLLOW or self._process is None or _SCHED_GETCPU is None:
            return
        cpu = int(_SCHED_GETCPU())
        if cpu < 0 or cpu == self._cpu:
            return
        self._read_changes()
        try:
            os.sched_setaffinity(self._process.pid, {cpu})
        except OSError:  # gone (its answer says so), or the CPU is not the host's to have
            return
        self._cpu = cpu
        self._started = host_state(self._process.pid)

    def _stop(self) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGSTOP)  # its group: what it started too
                self._stopped = True

    def _continue(self) -> None:
        if self._stopped and self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGCONT)
            self._stopped = False

    def _free(self, binding: int, generation: int) -> None:
        if self._generation == generation and self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.send(struct.pack("<cxxxIQ", b"F", binding, 0), socket.MSG_DONTWAIT)


_HOSTS: weakref.WeakSet[ProcessHost] = weakref.WeakSet()
"""Every host of this worker, native and Python, the empty kernels' too."""


def running_host_pids() -> set[int]:
    """The process of every host of this worker that runs, and the processes each started."""
    return {pid for host in list(_HOSTS) for pid in host.pids()}


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``); None when it is gone."""
    try:
        return int(_stat(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


_EMPTY: dict[str, HostKernel] = {}
"""The empty kernel's native host per signature: the worker's own, kept between requests (no candidate's code
runs in it, and no host can reach it), so a request starts only its kernel's host."""


def empty_host_pids() -> list[int]:
    """The running empty native hosts of this worker: the worker's stray killing spares them between requests."""
    return [pid for host in _EMPTY.values() for pid in host.pids()]


class HostKernel(ProcessHost):
    """A C ABI kernel in the native host (``native_host.cpp``, built by ``host_program.py``)."""

    def __init__(self, library: str, symbol: str, definition: Definition, library_fd: int | None = None) -> None:
        self._library = library
        self._library_fd = library_fd
        self._symbol = symbol
        self._definition = definition
        kinds = ["p" if spec.shape is not None else _scalar_kind(spec.dtype) for spec in definition.inputs.values()]
        kinds += ["p"] * len(definition.outputs) + ["i"] * len(definition.var_axes())
        self._signature = "".join(kinds)
        super().__init__()

    def _command(self, sock: int) -> tuple[list[str], tuple[int, ...], dict[str, str] | None]:
        program = executable(self._signature)
        argv = [f"/proc/self/fd/{program}", self._library, self._symbol, str(os.getpid()), str(sock)]
        return (
            argv,
            (program, *([self._library_fd] if self._library_fd is not None else [])),
            confine.environment(os.environ),
        )

    def _load_error(self, text: str) -> KernelLoadError:
        if text == "not exported":
            return KernelLoadError(
                f'entry point {self._symbol!r} is not exported by the library (is it declared extern "C"?)'
            )
        return KernelLoadError(f"the native host cannot run {self._library}: {text}")

    def _round_trip_key(self, outputs: Mapping[str, torch.Tensor]) -> tuple[object, ...]:
        return ("native", self._signature)

    def _empty_host(self) -> ProcessHost:
        empty = _EMPTY.get(self._signature)
        if empty is None:  # a host that died is started again when it binds
            fd = empty_library()
            empty = _EMPTY[self._signature] = HostKernel(
                f"/proc/self/fd/{fd}", EMPTY_SYMBOL, self._definition, library_fd=fd
            )
        empty._definition = self._definition  # shared by every definition of the signature: bound in its order
        return empty

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        sock = self._ensure()
        fds: list[int] = []
        sizes: list[int] = []
        args: list[bytes] = []

        def pointer(name: str, tensor: torch.Tensor) -> bytes:
            if not tensor.is_contiguous():
                raise KernelCallError(f"tensor {name!r} is not contiguous; the C ABI takes dense row-major buffers")
            if tensor.device.type != "cpu":
                raise KernelCallError(f"tensor {name!r} is on {tensor.device}; the native host runs CPU kernels")
            fd, size, offset = share(tensor)
            fds.append(fd)
            sizes.append(size)
            return _ARG.pack(0, len(fds) - 1, offset, 0, 0.0)

        for name, spec in self._definition.inputs.items():
            value = inputs[name]
            if isinstance(value, torch.Tensor):
                args.append(pointer(name, value))
            elif _scalar_kind(spec.dtype) == "d":
                args.append(_ARG.pack(1, 0, 0, 0, float(value)))
            else:
                args.append(_ARG.pack(2, 0, 0, int(value), 0.0))
        args += [pointer(name, outputs[name]) for name in self._definition.outputs]
        args += [_ARG.pack(2, 0, 0, int(axes[name]), 0.0) for name in self._definition.var_axes()]
        binding = next(self._ids)
        header = struct.pack("<cxxxIII", b"B", binding, len(fds), len(args))
        message = header + b"".join(struct.pack("<Q", s) for s in sizes) + b"".join(args)
        return self._bound(sock, message, fds, binding)


_STATE = {
    "SigCgt": "signal handlers",
    "SigIgn": "ignored signals",
    "Cpus_allowed_list": "the CPU affinity",
    "nice": "the scheduling priority",
    "limits": "resource limits",
}


_GLIBC_SIGNALS = (1 << 31) | (1 << 32)
"""SIGCANCEL and SIGSETXID (32 and 33, bits 31 and 32 of the masks): glibc installs them for threads."""


def host_state(pid: int) -> dict[str, str]:
    """What ``/proc`` shows of a host's process state (empty where it cannot be read)."""
    state: dict[str, str] = {}
    with contextlib.suppress(OSError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("SigCgt", "SigIgn"):  # glibc's own handlers (signals 32, 33) come with the first thread
                state[key] = f"{int(value, 16) & ~_GLIBC_SIGNALS:x}"
            elif key in _STATE:
                state[key] = value.strip()
        state["nice"] = _stat(pid)[16]
        state["limits"] = Path(f"/proc/{pid}/limits").read_text()
    return state


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name, the state first (nice is [16], the start time
    [19]); OSError where the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _kill(pids: list[int]) -> None:
    """SIGKILL to each of ``pids`` that is still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _pidfds(pids: list[int]) -> list[int]:
    """A pidfd of each process still there (not our children: their end is seen through these)."""
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
    return fds


def _wait_for(pidfds: list[int], timeout_s: float) -> None:
    """Waits until every process of ``pidfds`` has ended (or ``timeout_s``), and closes them."""
    deadline = time.monotonic() + timeout_s
    try:
        for fd in pidfds:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        for fd in pidfds:
            os.close(fd)


def _process_cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (what clock_getcpuclockid(3) returns on Linux)."""
    return (~pid << 3) | 2  # CPUCLOCK_SCHED of the whole process


def _differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [what for key, what in _STATE.items() if key in before and key in after and before[key] != after[key]]


def _scalar_kind(dtype: DType) -> str:
    return "d" if c_scalar_type(dtype) is ctypes.c_double else "i"
