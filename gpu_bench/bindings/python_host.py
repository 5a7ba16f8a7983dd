"""Python and tvm-ffi candidates on the CPU, run in a Python host process of their own
(``python_host_program.py``).

The same arrangement as the native host (``host.py``): the worker moves the tensors into memfds, the host maps
them as tensors and calls the candidate, the worker reads the outputs from shared memory, times each call by
its own clock around the round trip (less the fastest round trip of an empty kernel in a Python host of its
own) and stops the host between calls. The candidate's Python never shares the worker's interpreter: it
cannot patch the harness's modules, leave a torch mode on for the output check, hand back a tensor whose type
rewrites the comparison, or write to the worker's protocol pipe.

Unlike the native host, a Python host is kept from request to request (``persistent``: a new interpreter with
torch costs about two seconds), at most ``LIVE_HOSTS`` of them per worker, the least recently used ended
first; what a candidate changes of its host's process state ends the host after that request. It may start
processes (torch.compile runs a compiler): they stay its descendants (it is a child subreaper), are stopped
and continued with it around every call (in its group or not), count in its CPU time, and die with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
from collections.abc import Mapping

import torch

from evoteam.gpu_bench.bindings import Call, KernelCallError, KernelOutputError, KernelRaised, confine
from evoteam.gpu_bench.bindings.host import ProcessHost, running_host_pids, share, start_ticks
from evoteam.gpu_bench.schema import Definition, EvaluationStatus
from evoteam.gpu_bench.verify.inputs import Value
from evoteam.gpu_bench.worker.strays import children

LIVE_HOSTS = 3
"""Python hosts a worker keeps running at most (a candidate, its incumbent and one more), empty ones aside."""

_BIND = struct.Struct("<cxxxII")
_RC_STATUS = {2: EvaluationStatus.INCORRECT_SHAPE, 3: EvaluationStatus.INCORRECT_DTYPE}
_live: list[PythonHostKernel] = []
_empty: dict[bool, PythonHostKernel] = {}


class PythonHostKernel(ProcessHost):
    """A ``python``-binding candidate on the CPU, in a Python host. To the worker it is destination-passing:
    a value-returning candidate's result is copied into the shared outputs in its host."""

    persistent = True
    processes = True
    name = "the Python host"
    start_s = 1800.0  # its import may build an extension (load_inline); the request's own limit still holds

    kind = "python"
    """What the host loads: ``python`` (an entry file's function) or ``tvm-ffi`` (a module's export)."""

    def __init__(self, folder: str, entry_file: str, symbol: str, definition: Definition, dps: bool) -> None:
        self._folder, self._entry_file, self._symbol = folder, entry_file, symbol
        self._definition = definition
        self._dps = dps
        self._environment = dict(os.environ)  # the solution's own run-time build folders (extension_dirs)
        self._threads = torch.get_num_threads()
        self._temporary: str | None = None
        self._descendants: list[int] = []
        """The processes the host started, stopped by ``_stop`` one by one (and with its group): all of them
        while the host stays stopped."""
        super().__init__()
        self._touch()

    def _command(self, sock: int) -> tuple[list[str], tuple[int, ...], dict[str, str] | None]:
        module = "evoteam.gpu_bench.sandbox.host_start"  # confined before torch loads, then the host program
        flags = [str(os.getpid()), str(self._threads), "1" if self._dps else "0", self.kind]
        where = [self._folder, self._entry_file, self._symbol]
        # -B: no bytecode written into the build cache (its entries stay as built); -u: prints reach the log
        argv = [sys.executable, "-B", "-u", "-m", module, str(sock), *flags, *where]
        self._remove_temporary()
        self._temporary = tempfile.mkdtemp(prefix="evoteam-python-host-")  # its only writable folder but its builds
        return argv, (), {**confine.environment(self._environment), "TMPDIR": self._temporary}

    def _remove_temporary(self) -> None:
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def _empty_host(self) -> ProcessHost:
        if self._dps not in _empty:  # a host that died is started again when it binds
            _empty[self._dps] = PythonHostKernel("", "", "", self._definition, self._dps)
        empty = _empty[self._dps]
        empty._definition = self._definition  # shared by every definition: it binds in this one's order
        return empty

    def _round_trip_key(self, outputs: Mapping[str, torch.Tensor]) -> tuple[object, ...]:
        copied = 0 if self._dps else sum(t.numel() * t.element_size() for t in outputs.values())
        return ("python", self._dps, copied)  # a value-returning empty kernel's result is copied too

    def _failure(self, rc: int, text: str) -> KernelCallError:
        if rc in _RC_STATUS:
            return KernelOutputError(_RC_STATUS[rc], text)
        return KernelRaised(text or f"the kernel failed (code {rc})")

    def pids(self) -> list[int]:
        """As ``ProcessHost.pids``; while the host is stopped, the processes ``_stop`` found (stopped, none can
        start another), so the CPU time read around a call looks for them once."""
        if self._stopped and self._process is not None and self._process.poll() is None:
            return [self._process.pid, *self._descendants]
        return self._walk()

    def _walk(self) -> list[int]:
        found = super().pids()
        for pid in found:  # breadth first: the host, then what it started
            found += [child for child in children(pid) if child not in found]
        return found

    def _stop(self) -> None:
        """Stops the host's group, then every process the host started, one by one, until a look finds none
        not yet stopped: one that left the group (for a group of its own, or back into the host's after the
        group was stopped) is stopped all the same. The host is a child subreaper and may not start a session,
        so what it started stays its descendant wherever its group is."""
        super()._stop()
        if not self._stopped:
            return
        while found := [pid for pid in self._walk()[1:] if pid not in self._descendants]:
            for pid in found:  # a fork under way when it is stopped starts over, and stops
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGSTOP)
            self._descendants += found

    def _orphans(self, host: int) -> list[int]:
        """A Python host's processes that outlived it: once it has ended, its children are the worker's
        (both are child subreapers), so the worker's children started since it, less every running host and
        what each started. Without this they ran on until the request's end, among them one that left the
        host's group and could burn the CPU while the next workloads' other side was timed."""
        since = self._since
        if since is None:
            return []
        running = running_host_pids()
        return [
            pid for pid in children() if pid != host and pid not in running and (start_ticks(pid) or since - 1) >= since
        ]

    def _start(self) -> None:
        self._descendants = []  # of a host that ended: their pids may be anyone's now
        super()._start()

    def _continue(self) -> None:
        descendants, self._descendants = self._descendants, []
        for pid in descendants:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        super()._continue()

    def changed_state(self) -> list[str]:
        changed = super().changed_state()
        pids = self.pids()
        escaped = []
        for pid in pids[1:]:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) != pids[0]:
                    escaped.append(pid)
        if escaped:  # stopped one by one, as the host's group is
            changed.append(f"{len(escaped)} process(es) it started left its host's process group")
        return changed

    def release(self) -> None:
        super().release()  # not the empty host: shared by every Python host of this worker, it outlives this one
        self._remove_temporary()
        if self in _live:
            _live.remove(self)

    def _touch(self) -> None:
        """Counts this host as the most recently used, ending the least recently used beyond ``LIVE_HOSTS``."""
        if not self._folder:
            return  # an empty host: one per signature kind, never ended for room
        if self in _live:
            _live.remove(self)
        _live.append(self)
        for old in _live[:-LIVE_HOSTS]:
            old.release()

    def bind(self, inputs: Mapping[str, Value], outputs: Mapping[str, torch.Tensor], axes: Mapping[str, int]) -> Call:
        sock = self._ensure()  # (re)started first: a restart releases, which forgets its place
        self._touch()
        fds: list[int] = []

        def layout(name: str, tensor: torch.Tensor) -> list[object]:
            if tensor.device.type != "cpu":
                raise KernelCallError(f"tensor {name!r} is on {tensor.device}; the Python host runs CPU kernels")
            fd, _, offset = share(tensor)
            fds.append(fd)
            element = offset // tensor.element_size()
            return [len(fds) - 1, element, str(tensor.dtype), list(tensor.shape), list(tensor.stride())]

        args: list[dict[str, object]] = []
        for name in self._definition.inputs:
            value = inputs[name]
            args.append({"t": layout(name, value)} if isinstance(value, torch.Tensor) else {"v": value})
        described = [[name, layout(name, outputs[name])] for name in self._definition.outputs]
        binding = next(self._ids)
        message = _BIND.pack(b"B", binding, len(fds)) + json.dumps({"args": args, "outputs": described}).encode()
        if len(message) > 1 << 20:
            raise KernelCallError("the binding is too large to describe to the Python host")
        return self._bound(sock, message, fds, binding)


def host_pids() -> list[int]:
    """Every running Python host of this worker and what each started, empty hosts included: the worker's
    stray killing spares them between requests."""
    return [pid for host in [*_live, *_empty.values()] for pid in host.pids()]


class TvmFfiHostKernel(PythonHostKernel):
    """A ``tvm-ffi``-binding candidate on the CPU, in a Python host: its module's export is called there on the
    shared tensors (destination passing), so its native code never runs in the worker."""

    kind = "tvm-ffi"

    def __init__(self, library: str, symbol: str, definition: Definition) -> None:
        super().__init__(library, "", symbol, definition, dps=True)
