"""Can a kernel be timed from outside the process that launches it? The question a GPU host (issue 21: CUDA
candidates out of the worker's address space) turns on, measured.

A candidate in a host process of its own could rewrite anything its process measures (CUDA events included),
so a verdict would have to rest on what the worker can see: its own clock around a round trip to the host, less
what an empty round trip costs. This prints, for one elementwise kernel (``torch.add`` into an output) at a few
sizes, the kernel's time measured six ways, in microseconds, each as a ratio to the first:

- ``here``: events around each call in this process (how the worker times a CUDA kernel today);
- ``host``: the same events, in a second process (the host) that launches the kernel on a context of its own;
- ``host after ours``: the host's events when this process ran a kernel of its own on the GPU just before each
  call (a pair timed in turn across two contexts: what switching between them costs);
- ``round trip``: this process's clock around one call in the host (launch, synchronize, answer), less the
  median empty round trip (synchronize and answer, nothing launched);
- ``round trip / 10`` and ``/ 100``: the same around 10 and 100 calls in a row, per call;
- ``do_bench`` (triton.testing.do_bench in this process) where triton is installed.

Run on a GPU from the repository root: ``python benchmarks/gpu_host_timing.py [--sizes 1024,4194304]
[--json FILE]``; exit 3 without one (``--device cpu`` runs the same steps on the CPU, with the clock in place of
events: the tests do). It is a benchmark: it prints figures and asserts nothing about them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

SKIPPED = 3
SIZES = (1 << 10, 1 << 22, 1 << 26)
"""Elements of float32: launch-bound (4 KiB), about 10 µs, about 200 µs on an H100."""
CALLS = 100
BATCHES = (10, 100)


def _tensors(n: int, device: str) -> tuple[Any, Any, Any]:
    import torch

    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    return x, y, torch.empty_like(x)


def _synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def timed_calls(
    op: Callable[[], object], device: str, calls: int, before: Callable[[], object] | None = None
) -> list[float]:
    """Microseconds of each of ``calls`` calls of ``op``: events around it on a GPU, the clock on the CPU;
    ``before`` runs (untimed) ahead of each call."""
    import torch

    times: list[float] = []
    for _ in range(calls):
        if before is not None:
            before()
        _synchronize(device)
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            op()
            times.append((time.perf_counter() - t0) * 1e6)
    return times


def host(conn: Connection, device: str) -> None:
    """The host process: answers ``(command, argument)`` messages until ``("stop", 0)``."""
    tensors: tuple[Any, Any, Any] | None = None

    def op() -> None:
        import torch

        assert tensors is not None
        torch.add(tensors[0], tensors[1], out=tensors[2])

    while True:
        command, argument = conn.recv()
        if command == "stop":
            return
        if command == "setup":
            tensors = _tensors(argument, device)
            timed_calls(op, device, 20)  # warm up
            conn.send("ready")
        elif command == "events":
            conn.send(timed_calls(op, device, argument))
        elif command == "calls":
            for _ in range(argument):
                op()
            _synchronize(device)
            conn.send("done")
        elif command == "empty":
            _synchronize(device)
            conn.send("done")


def round_trips(conn: Connection, command: str, argument: int, times: int) -> list[float]:
    """Microseconds of ``times`` round trips of one message to the host, by this process's clock."""
    found = []
    for _ in range(times):
        t0 = time.perf_counter()
        conn.send((command, argument))
        conn.recv()
        found.append((time.perf_counter() - t0) * 1e6)
    return found


def measure(n: int, device: str, conn: Connection) -> dict[str, float | None]:
    """Median microseconds per call of the kernel on ``n`` elements, each way (see the module docstring)."""
    import torch

    x, y, z = _tensors(n, device)

    def ours() -> None:
        torch.add(x, y, out=z)

    timed_calls(ours, device, 20)
    conn.send(("setup", n))
    conn.recv()
    row: dict[str, float | None] = {"here": statistics.median(timed_calls(ours, device, CALLS))}
    conn.send(("events", CALLS))
    row["host"] = statistics.median(conn.recv())

    def after_ours() -> list[float]:
        times = []
        for _ in range(CALLS):
            ours()
            conn.send(("events", 1))
            times += conn.recv()
        return times

    row["host after ours"] = statistics.median(after_ours())
    empty = statistics.median(round_trips(conn, "empty", 0, CALLS))
    row["empty round trip"] = empty
    for k in (1, *BATCHES):
        trips = round_trips(conn, "calls", k, max(5, CALLS // k))
        row["round trip" if k == 1 else f"round trip / {k}"] = (statistics.median(trips) - empty) / k
    row["do_bench"] = _do_bench(ours) if device == "cuda" else None
    return row


def _do_bench(op: Callable[[], object]) -> float | None:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return float(do_bench(op, warmup=25, rep=100)) * 1e3


def lines(rows: dict[int, dict[str, float | None]]) -> list[str]:
    """The figures as a Markdown table: microseconds, and each as a ratio to ``here``."""
    names = [k for k in next(iter(rows.values())) if k != "empty round trip"]
    out = ["| elements | empty round trip | " + " | ".join(names) + " |", "| --- " * (len(names) + 2) + "|"]
    for n, row in rows.items():
        base = row["here"]
        cells = []
        for name in names:
            value = row[name]
            ratio = f" ({value / base:.2f}x)" if value is not None and base and name != "here" else ""
            cells.append("-" if value is None else f"{value:.1f}{ratio}")
        out.append(f"| {n} | {row['empty round trip']:.1f} | " + " | ".join(cells) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="elements per size, comma-separated")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = p.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        print(f"gpu_host_timing: --sizes takes whole numbers: {args.sizes!r}", file=sys.stderr)
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_host_timing: skipped, no GPU here (--device cpu runs the steps on the CPU)")
        return SKIPPED
    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=host, args=(theirs, args.device), daemon=True)
    child.start()
    try:
        rows = {n: measure(n, args.device, ours) for n in sizes}
        ours.send(("stop", 0))
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"kernel times in microseconds ({name}; median of {CALLS} calls each; ratios to 'here'):")
    print("\n".join(lines(rows)))
    if args.json is not None:
        args.json.write_text(json.dumps({"device": name, "rows": {str(n): row for n, row in rows.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
