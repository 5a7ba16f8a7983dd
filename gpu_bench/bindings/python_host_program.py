"""The Python host: a process of its own that runs one Python or tvm-ffi candidate on the CPU (see
``python_host.py``).

Run as ``python -m evoteam.gpu_bench.sandbox.host_start SOCK WORKER THREADS DPS KIND FOLDER FILE SYMBOL``:
``KIND`` is ``python`` (``FOLDER`` is the solution's, ``FILE`` its entry file) or ``tvm-ffi`` (``FOLDER`` is the
module's library); an empty ``FOLDER`` runs the empty kernel, whose round trip timing subtracts. ``host_start`` arms
the death signal with the worker, makes the host a child subreaper (what the candidate starts stays its descendant,
which the worker stops and kills with it) and restricts its writes with Landlock to its own folders while it has
one thread, before torch loads; then ``main`` here installs the seccomp program the worker sends first
(``confine.py``: no other process may be signalled, rescheduled, limited, traced or read) and becomes
non-dumpable, imports the candidate and answers ``K`` (``KL`` when Landlock holds every thread), then serves the
worker over a sequenced-packet socket in the native host's framing: ``B`` maps a binding's buffers (memfds passed
with SCM_RIGHTS) as tensors, ``C`` calls the candidate and answers with the call's nonce, ``F`` forgets a binding.
A value-returning candidate's result is copied into the shared outputs; a result that does not fit them is answered
with the status it earns (rc 2: a shape, rc 3: a dtype) and why. Nothing here decides a verdict: the worker reads
the outputs from shared memory and times the round trip with its own clock.
"""

from __future__ import annotations

import array
import json
import mmap
import os
import signal
import socket
import struct
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

_CALL = struct.Struct("<cxxxIQ")
_ANSWER = struct.Struct("<cBxxiQ")
_BIND = struct.Struct("<cxxxII")
_MESSAGE = 1 << 20
_MAX_FDS = 256
RC_ERROR, RC_SHAPE, RC_DTYPE = 1, 2, 3
"""A call's return codes besides 0: an exception, a result of the wrong shape (or count), of the wrong dtype."""


class _Binding:
    def __init__(self, args: list[object], outputs: dict[str, torch.Tensor], maps: list[mmap.mmap]) -> None:
        self.args = args
        self.outputs = outputs
        self.maps = maps
        self.spare: tuple[torch.Tensor, ...] = ()
        """The empty kernel's result when it returns values: outputs of the right shape, copied like any."""


def tensor(maps: Sequence[mmap.mmap], spec: Sequence[Any]) -> torch.Tensor:
    """The tensor a binding describes as ``[buffer, element offset, dtype, shape, stride]`` on its mapped buffers."""
    buffer, offset, dtype, shape, stride = spec
    storage = torch.frombuffer(maps[int(buffer)], dtype=torch.uint8).untyped_storage()
    kind = getattr(torch, str(dtype).removeprefix("torch."))
    if not isinstance(kind, torch.dtype):
        raise ValueError(f"no dtype {dtype!r}")
    return torch.empty(0, dtype=kind).set_(storage, int(offset), list(shape), list(stride))


def fill(result: object, outputs: dict[str, torch.Tensor]) -> tuple[int, str]:
    """Copies a value-returning kernel's result into the shared outputs: (0, "") or (rc, why)."""
    names = list(outputs)
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            return RC_SHAPE, f"outputs {missing} are missing from the result"
        result = tuple(result[n] for n in names)
    if isinstance(result, torch.Tensor):
        result = (result,)
    if not isinstance(result, tuple | list) or len(result) != len(names):
        length = f" of length {len(result)}" if isinstance(result, tuple | list) else ""
        return RC_SHAPE, f"expected {len(names)} output(s) {names}, got {type(result).__name__}{length}"
    for name, value in zip(names, result, strict=True):
        out = outputs[name]
        if not isinstance(value, torch.Tensor):
            return RC_SHAPE, f"output {name!r} is a {type(value).__name__}, not a tensor"
        if tuple(value.shape) != tuple(out.shape):
            return RC_SHAPE, f"output {name!r} has shape {tuple(value.shape)}, expected {tuple(out.shape)}"
        if value.dtype != out.dtype:
            expected = str(out.dtype).removeprefix("torch.")
            return RC_DTYPE, f"output {name!r} has dtype {value.dtype}, expected {expected}"
        with torch.no_grad():
            out.copy_(value)
    return 0, ""


def _bind(message: bytes, fds: list[int], dps: bool, empty: bool) -> _Binding:
    _, _, count = _BIND.unpack(message[: _BIND.size])
    if count != len(fds):
        raise ValueError("a malformed binding")
    maps = []
    try:
        for fd in fds:
            maps.append(mmap.mmap(fd, os.fstat(fd).st_size))
    finally:
        for fd in fds:  # the mappings keep the buffers; the fds are not needed (nor kept on a failure)
            os.close(fd)
    layout = json.loads(message[_BIND.size :])
    args = [tensor(maps, arg["t"]) if "t" in arg else arg["v"] for arg in layout["args"]]
    outputs = {name: tensor(maps, spec) for name, spec in layout["outputs"]}
    if dps:
        args += list(outputs.values())
    binding = _Binding(args, outputs, maps)
    if empty and not dps:
        binding.spare = tuple(torch.empty_like(out) for out in outputs.values())
    return binding


def _call(fn: Callable[..., object], binding: _Binding, dps: bool) -> tuple[int, str]:
    try:
        result = fn(*binding.args)
        return (0, "") if dps else fill(result, binding.outputs)
    except BaseException as exc:  # whatever the candidate raises (SystemExit too) is its call's failure
        text = str(exc)
        return RC_ERROR, f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _spare(binding: _Binding) -> Callable[..., object]:
    """The empty kernel of a value-returning signature: it returns outputs it did not compute."""
    return lambda *_: binding.spare


def serve(sock: socket.socket, fn: Callable[..., object], dps: bool, empty: bool) -> int:
    bindings: dict[int, _Binding] = {}
    buffer = bytearray(_MESSAGE)  # one buffer for every message: a call is not worth an allocation
    while True:
        try:
            length, ancillary, _, _ = sock.recvmsg_into([buffer], socket.CMSG_SPACE(_MAX_FDS * 4))
        except OSError:
            return 0
        if not length:
            return 0
        message = bytes(buffer[:length])
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        if message[:1] == b"B" and len(message) >= _BIND.size:
            _, binding_id, _ = _BIND.unpack(message[: _BIND.size])
            try:
                bindings[binding_id] = _bind(message, list(fds), dps, empty)
            except (ValueError, TypeError, KeyError, RuntimeError, OSError) as exc:
                sock.send(b"E" + f"{type(exc).__name__}: {exc}".encode())
                continue
            sock.send(b"K")
            continue
        for fd in fds:
            os.close(fd)
        if len(message) != _CALL.size:
            continue
        kind, binding_id, nonce = _CALL.unpack(message)
        if kind == b"F":
            bindings.pop(binding_id, None)
            continue
        if kind != b"C":
            continue
        found = bindings.get(binding_id)
        if found is None:
            sock.send(_ANSWER.pack(b"U", 0, -1, nonce))
        else:
            rc, why = _call(_spare(found) if empty and not dps else fn, found, dps)
            sock.send(_ANSWER.pack(b"R", 0, rc, nonce) + why.encode(errors="replace")[:60000])
        os.kill(0, signal.SIGSTOP)  # with every thread and the group: the worker's clock ends when this stop does


def main(argv: Sequence[str], confined: bool, refused: str | None) -> int:
    """Called by ``sandbox/host_start.py`` once it restricted the host's writes (``confined``: Landlock holds
    every thread; ``refused``: why Landlock refused the ruleset)."""
    sock_fd, _worker, threads, dps_flag, kind, folder, entry_file, symbol = argv
    sock = socket.socket(fileno=int(sock_fd))
    torch.set_num_threads(int(threads))
    from evoteam.gpu_bench.bindings import confine

    first = sock.recv(_MESSAGE)  # the worker's seccomp program for this host, before any candidate code
    if first[:1] != b"P":
        sock.send(b"Eno seccomp program")
        return 4
    try:
        if refused is not None:
            raise OSError(refused)
        confine.install(first[1:])  # every thread (TSYNC)
    except OSError as exc:
        sock.send(b"E" + f"cannot confine the host: {exc}".encode())
        return 4
    dps, empty = dps_flag == "1", not folder
    fn: Callable[..., object] = lambda *_: None  # noqa: E731 - the empty kernel
    if not empty:
        from evoteam.gpu_bench.bindings import KernelLoadError, python_fn, tvm_ffi

        try:  # FOLDER is the tvm-ffi module's library; else the solution's folder with the entry file in it
            fn = (
                tvm_ffi.load_function(folder, symbol)
                if kind == "tvm-ffi"
                else python_fn.load_function(Path(folder), entry_file, symbol)
            )
        except KernelLoadError as exc:
            sock.send(b"E" + str(exc).encode(errors="replace"))
            return 5
    sys.stdout.flush()
    sock.send(b"KL" if confined else b"K")
    return serve(sock, fn, dps, empty)


if __name__ == "__main__":
    from evoteam.gpu_bench.sandbox import host_start

    sys.exit(host_start.main(sys.argv[1:]))
