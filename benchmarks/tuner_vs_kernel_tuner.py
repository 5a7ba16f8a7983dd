"""The offline tuner's search against Kernel Tuner's strategies: same C kernel, same knob space, same budget.

The kernel is ``benchmarks/kernels/tiled_matmul.cpp`` (four knobs: BLOCK_I, BLOCK_J, BLOCK_K, UNROLL; 192
configs). Kernel Tuner runs it through its C backend (``tune_kernel(lang="C")``, which prepends a ``#define``
per parameter and reads the function's return value as the time, averaged over 7 calls). Our side finds the
knobs with ``evoteam.roles.offline.knobs`` (the same domains declared), rewrites the source in place, and
scores each config with one shared harness that does what Kernel Tuner's backend does: compile with the same
g++ flags, call 7 times, average the returned times. Each side gets the same number of evaluations per seed.

1. Replay: first Kernel Tuner's brute force times every config once; then every strategy searches that recorded
   table instead of the machine (Kernel Tuner's simulation mode; for us a table lookup), over many seeds. This
   compares the searches alone, free of measurement noise. ``rel``: best found / the table's optimum.
2. Live: each side searches on the machine. At the end every side's best config and the sweep's top eight are
   re-measured with one timer, interleaved round-robin (the median over rounds of a median of calls), so all
   are judged by the same clock, and each one's product is checked against numpy. ``rel``: that time over
   the best re-measured time (the optimum, as well as a noisy machine lets one tell).

It is a benchmark, not a test: it prints figures and exits 0 unless a best config computes a wrong product.
Run from the repository root: ``python benchmarks/tuner_vs_kernel_tuner.py`` (``--quick``: about a minute).
"""

from __future__ import annotations

import _ctypes
import argparse
import ctypes
import itertools
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import cpu_name
from evoteam.roles.offline.knobs import apply, describe, find_knobs
from evoteam.roles.offline.search import Config, Space, run

KERNEL = Path(__file__).resolve().parent / "kernels" / "tiled_matmul.cpp"
ENTRY = "tiled_matmul"
FLAGS = ["-O3", "-march=native"]
DOMAINS: dict[str, list[int | str]] = {
    "BLOCK_I": [4, 8, 16, 32],
    "BLOCK_J": [32, 64, 128, 256],
    "BLOCK_K": [16, 32, 64, 128],
    "UNROLL": [1, 2, 4],
}
OURS = "evoteam offline"


@dataclass
class Side:
    strategy: str
    seed: int
    budget: int
    evaluations: int
    best: Config
    search_ms: float
    """The best config's time as its own search measured it."""
    wall_s: float


class Harness:
    """Compiles a source variant like Kernel Tuner's C backend does, and times it through its return value."""

    def __init__(self, folder: Path, n: int) -> None:
        self.folder, self.n = folder, n
        rng = np.random.default_rng(0)
        self.a = rng.random((n, n), dtype=np.float32)
        self.b = rng.random((n, n), dtype=np.float32)
        self.c = np.zeros((n, n), dtype=np.float32)
        self._count = 0

    def _build(self, source: str) -> ctypes.CDLL | None:
        self._count += 1
        src, lib = self.folder / f"v{self._count}.cc", self.folder / f"v{self._count}.so"
        src.write_text(source)
        done = subprocess.run(["g++", "-fPIC", *FLAGS, "-shared", str(src), "-o", str(lib)], capture_output=True)
        return ctypes.CDLL(str(lib)) if done.returncode == 0 else None

    def times(self, source: str, calls: int, warmup: int = 0) -> list[float] | None:
        """``calls`` self-reported run times in ms (after ``warmup`` calls); None if it does not build or fails."""
        lib = self._build(source)
        if lib is None:
            return None
        try:
            fn = getattr(lib, ENTRY)
            fn.restype = ctypes.c_float
            pointer = ctypes.POINTER(ctypes.c_float)
            args = [m.ctypes.data_as(pointer) for m in (self.c, self.a, self.b)] + [ctypes.c_int(self.n)]
            out = [float(fn(*args)) for _ in range(warmup + calls)][warmup:]
        finally:
            _ctypes.dlclose(lib._handle)
        return out if min(out) >= 0 else None

    def error(self) -> float:
        """Max relative error of the last product computed, against numpy."""
        expected = self.a.astype(np.float64) @ self.b.astype(np.float64)
        return float(np.max(np.abs(self.c - expected) / np.abs(expected)))


def ours(harness: Harness, source: str, budget: int, seed: int) -> Side:
    knobs = find_knobs(source, declared=DOMAINS)
    assert [k.name for k in knobs] == list(DOMAINS) and all(k.spots for k in knobs), "knob finder missed one"
    start = time.perf_counter()

    def objective(config: Config) -> float | None:
        times = harness.times(apply(source, config, knobs), calls=7)
        return statistics.mean(times) if times else None

    search = run(objective, Space({k.name: k.values for k in knobs}), budget, seed=seed, maximize=False)
    best = search.best
    assert best is not None and best.score is not None
    return Side(OURS, seed, budget, search.evaluations, best.config, best.score, time.perf_counter() - start)


def kernel_tuner(
    strategy: str, harness: Harness, source: str, budget: int | None, seed: int, cache: Path, simulate: bool = False
) -> tuple[list[dict[str, Any]], float]:
    """Kernel Tuner's results (in evaluation order) and its wall time; ``budget`` None: brute force."""
    from kernel_tuner import tune_kernel  # type: ignore[import-untyped]

    h = harness
    options = {"max_fevals": budget} if budget is not None else {}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="None of the tunable parameters specify thread block dimensions")
        results, _ = tune_kernel(
            ENTRY, source, (h.n,), [h.c, h.a, h.b, np.int32(h.n)], DOMAINS, lang="C", compiler_options=FLAGS,
            strategy=strategy, strategy_options=options, iterations=7, quiet=True, seed=seed, cache=str(cache),
            simulation_mode=simulate,
        )  # fmt: skip
    return results, time.perf_counter() - start


def _config_of(result: dict[str, Any]) -> Config:
    return {k: result[k] for k in DOMAINS}


def _parse(described: str) -> Config:
    """``describe``'s line back into a config of this benchmark's (integer) knobs."""
    return {name: int(value) for name, value in (part.split("=") for part in described.split())}


def kernel_tuner_live(strategy: str, harness: Harness, source: str, budget: int, seed: int, folder: Path) -> Side:
    results, wall = kernel_tuner(strategy, harness, source, budget, seed, folder / f"{strategy}-{budget}-{seed}.json")
    best = min((r for r in results if isinstance(r.get("time"), float)), key=lambda r: float(r["time"]))
    return Side(strategy, seed, budget, len(results), _config_of(best), best["time"], wall)


def sweep(harness: Harness, source: str, cache: Path) -> dict[str, float]:
    """Every config timed once by Kernel Tuner's brute force (which records them in ``cache``)."""
    results, _ = kernel_tuner("brute_force", harness, source, None, 0, cache)
    return {describe(_config_of(r)): float(r["time"]) for r in results if isinstance(r.get("time"), float)}


def replay(
    strategies: list[str], harness: Harness, source: str, table: dict[str, float], budget: int, seeds: int, cache: Path
) -> dict[str, list[float]]:
    """Each search on the recorded sweep instead of the machine (Kernel Tuner's simulation mode; for us a
    table lookup): the best time of the first ``budget`` distinct configs, relative to the sweep's optimum."""
    optimum = min(table.values())
    knobs = find_knobs(source, declared=DOMAINS)
    space = Space({k.name: k.values for k in knobs})
    rels: dict[str, list[float]] = {name: [] for name in [OURS, *strategies]}
    for seed in range(seeds):
        search = run(lambda c: table.get(describe(c)), space, budget, seed=seed, maximize=False)
        rels[OURS].append(min(table[describe(t.config)] for t in search.trials) / optimum)
        for strategy in strategies:
            results, _ = kernel_tuner(strategy, harness, source, budget, seed, cache, simulate=True)
            seen = list(dict.fromkeys(describe(_config_of(r)) for r in results))[:budget]
            rels[strategy].append(min(table[c] for c in seen) / optimum)
    return rels


def remeasure(harness: Harness, source: str, configs: list[Config], rounds: int, calls: int) -> dict[str, float]:
    """Median over ``rounds`` interleaved rounds of the median of ``calls`` calls, per config (keyed by
    ``describe``); exits if a config computes a wrong product."""
    knobs = find_knobs(source, declared=DOMAINS)
    samples: dict[str, list[float]] = {describe(c): [] for c in configs}
    for _ in range(rounds):
        for config in configs:
            times = harness.times(apply(source, config, knobs), calls=calls, warmup=2)
            if times is None or harness.error() > 1e-4:
                sys.exit(f"config {describe(config)} fails or computes a wrong product")
            samples[describe(config)].append(statistics.median(times))
    return {name: statistics.median(values) for name, values in samples.items()}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="budget 20, 2 live seeds, 2 live Kernel Tuner strategies")
    p.add_argument("--budgets", default="20,40", help="evaluations per search (comma-separated)")
    p.add_argument("--seeds", type=int, default=3, help="live searches per strategy and budget")
    p.add_argument("--strategies", default="genetic_algorithm,diff_evo,firefly_algorithm,random_sample")
    p.add_argument("--replay-seeds", type=int, default=20, help="searches per strategy and budget on the sweep")
    p.add_argument("--replay-strategies", default=",".join(REPLAY_STRATEGIES))
    p.add_argument("--n", type=int, default=512, help="matrix size (a multiple of 256)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the final re-measurement")
    args = p.parse_args(argv)
    if args.quick:
        args.budgets, args.seeds, args.strategies, args.replay_seeds = "20", 2, "genetic_algorithm,random_sample", 10
    return args


REPLAY_STRATEGIES = [
    "genetic_algorithm", "diff_evo", "firefly_algorithm", "pso", "dual_annealing", "simulated_annealing",
    "greedy_ils", "mls", "random_sample",
]  # fmt: skip


def _table(title: str, columns: list[str], left: tuple[str, ...] = ("strategy", "best config")) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    console = Console(width=150)
    budgets = [int(b) for b in args.budgets.split(",")]
    strategies = [s for s in args.strategies.split(",") if s]
    source = KERNEL.read_text()
    console.print(f"command: python benchmarks/tuner_vs_kernel_tuner.py {shlex.join(argv)}".rstrip())
    console.print(f"machine: {cpu_name()}, Python {platform.python_version()}; kernel {KERNEL.name}, n={args.n}")
    console.print(f"space: {describe({k: str(v) for k, v in DOMAINS.items()})} = 192 configs; g++ {' '.join(FLAGS)}")
    with tempfile.TemporaryDirectory(prefix="tuner-bench-") as tmp:
        folder = Path(tmp)
        harness = Harness(folder, args.n)
        t0 = time.perf_counter()
        table = sweep(harness, source, folder / "sweep.json")
        console.print(f"sweep (Kernel Tuner brute force): {len(table)} configs in {time.perf_counter() - t0:.0f} s")

        replays = _table(
            f"1. replay on the recorded sweep (no measurement noise): {args.replay_seeds} seeds; mean best/optimum,"
            " and how many seeds found the optimum",
            ["strategy", *(f"{w} @{b}" for b in budgets for w in ("rel", "hit"))],
        )
        rels = {b: replay(args.replay_strategies.split(","), harness, source, table, b, args.replay_seeds,
                          folder / "sweep.json") for b in budgets}  # fmt: skip
        for strategy in rels[budgets[0]]:
            cells = [(statistics.mean(rels[b][strategy]), sum(r == 1.0 for r in rels[b][strategy])) for b in budgets]
            replays.add_row(strategy, *(x for rel, hit in cells for x in (f"{rel:.3f}", str(hit))))
        console.print(replays)

        sides: list[Side] = []
        for budget, seed in itertools.product(budgets, range(args.seeds)):
            sides.append(ours(harness, source, budget, seed))
            sides.extend(kernel_tuner_live(s, harness, source, budget, seed, folder) for s in strategies)
        top = [_parse(c) for c in sorted(table, key=table.__getitem__)[:8]]
        pool = {describe(c): c for c in [*top, *(s.best for s in sides)]}
        final = remeasure(harness, source, list(pool.values()), args.rounds, calls=9)
    optimum = min(final.values())
    console.print(f"2. live searches; optimum (best re-measured of the sweep's top 8 and every best): {optimum:.3f} ms")
    columns = ["strategy", "seed", "evals", "best config", "in-search ms", "re-measured ms", "rel", "wall s"]
    for budget in budgets:
        detail = _table(f"{budget} evaluations per search", columns)
        for s in (s for s in sides if s.budget == budget):
            ms = final[describe(s.best)]
            row = [s.strategy, str(s.seed), str(s.evaluations), describe(s.best), f"{s.search_ms:.3f}"]
            detail.add_row(*row, f"{ms:.3f}", f"{ms / optimum:.3f}", f"{s.wall_s:.1f}")
        console.print(detail)
    summary = _table(
        "live, mean over seeds (rel = re-measured best / re-measured optimum; lower is better)",
        ["strategy", *(f"rel @{b}" for b in budgets), *(f"wall s @{b}" for b in budgets)],
    )
    for strategy in [OURS, *strategies]:
        mine = {b: [s for s in sides if (s.strategy, s.budget) == (strategy, b)] for b in budgets}
        rel = [statistics.mean(final[describe(s.best)] / optimum for s in mine[b]) for b in budgets]
        wall = [statistics.mean(s.wall_s for s in mine[b]) for b in budgets]
        summary.add_row(strategy, *(f"{r:.3f}" for r in rel), *(f"{w:.1f}" for w in wall))
    console.print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
