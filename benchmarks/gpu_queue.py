"""The GPU queue under load: six agents, two slots; how busy the slots stay and how long jobs wait.

Scenarios, each printed as one row:

1. *simulated*: six agent threads, each evaluating its jobs one after another (blocking, as agents do), on two
   fake slots whose jobs sleep for known durations (uniform 40–80 ms, seeded);
2. *simulated + profiles*: the same with every sixth job a profile job, once with a device per slot and once
   with both slots on one GPU (a profile job takes its device alone, so there the other slot must wait);
3. *LocalRunner* (``--skip-real`` leaves it out): two ``LocalRunner`` slots on this CPU, each agent with its
   own ``Evaluator`` over a ``QueueRunner``, evaluating variants of ``tests/kernels/honest.cpp`` on the
   scale_add task of ``tests/data`` against its Python reference (each agent's baseline run is a job too).

The lower bound on the makespan is the total run time over the number of slots; "busy while waiting" is the
share of slot-seconds spent working while some job waited to start (1.0: no slot idle while a job waited).
Run from the repository root: ``python benchmarks/gpu_queue.py`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from evoteam.gpu_bench.api import (
    Binding,
    BuildSpec,
    EvalConfig,
    EvaluationStatus,
    Evaluator,
    Factory,
    FnJob,
    GpuQueue,
    Language,
    LocalRunner,
    QueueRunner,
    Runner,
    Solution,
    SourceFile,
    TimingConfig,
    Utilization,
    load_definition,
    load_workloads,
    reference_solution,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "tests" / "data"
KERNEL = REPO_ROOT / "tests" / "kernels" / "honest.cpp"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--agents", type=int, default=6)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--jobs", type=int, default=8, help="simulated jobs per agent")
    p.add_argument("--real-jobs", type=int, default=3, help="candidates per agent on the LocalRunner slots")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-real", action="store_true", help="only the simulated scenarios")
    return p.parse_args(argv)


class SleepRunner:
    """A fake slot: a job sleeps for its duration."""

    def work(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


def run_agents(agents: int, work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(a,)) for a in range(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def simulated(args: argparse.Namespace, profile_every: int, one_device: bool = False) -> tuple[int, Utilization]:
    rng = random.Random(args.seed)
    plan = [
        [
            (rng.uniform(0.04, 0.08), bool(profile_every) and (a * args.jobs + j) % profile_every == 0)
            for j in range(args.jobs)
        ]
        for a in range(args.agents)
    ]
    devices = ["gpu0"] * args.slots if one_device else None
    queue = GpuQueue([SleepRunner() for _ in range(args.slots)], devices=devices)

    def agent(a: int) -> None:
        for seconds, profile in plan[a]:
            queue.evaluate(FnJob(lambda r, s=seconds: r.work(s), profile=profile)).unwrap()

    run_agents(args.agents, agent)
    use = queue.utilization()
    queue.close()
    return sum(len(p) for p in plan), use


def honest_variant(i: int) -> Solution:
    spec = BuildSpec(
        language=Language.CPP,
        target_hardware=["cpu"],
        entry_point="honest.cpp::scale_add",
        binding=Binding.C,
        destination_passing_style=True,
        compile_flags=["-O2"],
    )
    source = KERNEL.read_text() + f"\n// variant {i}\n"
    return Solution(
        name=f"honest_v{i}",
        definition="scale_add_f32",
        author="benchmark",
        spec=spec,
        sources=[SourceFile(path="honest.cpp", content=source)],
    )


def real(args: argparse.Namespace) -> tuple[int, Utilization]:
    definition = load_definition(DATA / "scale_add.json")
    workloads = load_workloads(DATA / "scale_add.jsonl")
    timing = TimingConfig(warmup_s=0.002, min_samples=5, max_samples=20, max_time_s=0.05, flush_cache=False)
    config = EvalConfig(timeout_s=30.0, timing=timing)
    queue: GpuQueue[Runner] = GpuQueue([Factory(LocalRunner) for _ in range(args.slots)])
    failed: list[str] = []

    def agent(a: int) -> None:
        evaluator = Evaluator(QueueRunner(queue))
        for j in range(args.real_jobs):
            result = evaluator.evaluate(
                definition, workloads, honest_variant(a * args.real_jobs + j), reference_solution(definition), config
            )
            if result.status != EvaluationStatus.PASSED:
                failed.append(f"{result.solution}: {result.status.value}")

    try:
        run_agents(args.agents, agent)
        use = queue.utilization()
    finally:
        queue.close()
    if failed:
        raise SystemExit("evaluations failed: " + "; ".join(failed))
    return use.jobs, use


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    console = Console(width=160)
    console.rule(f"GPU queue: {args.agents} agents, {args.slots} slots")
    rows: list[tuple[str, int, Utilization]] = []
    rows.append(("simulated (40–80 ms jobs)", *simulated(args, 0)))
    rows.append(("simulated, every 6th a profile", *simulated(args, 6)))
    rows.append(("simulated, every 6th a profile, slots on 1 GPU", *simulated(args, 6, one_device=True)))
    if not args.skip_real:
        rows.append(("LocalRunner, scale_add honest.cpp", *real(args)))
    table = Table()
    for col in ("scenario", "jobs", "busy % per slot", "mean wait s", "max wait s", "makespan s", "lower bound s"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    table.add_column("makespan / bound", justify="right")
    table.add_column("busy while waiting", justify="right")
    for name, jobs, use in rows:
        busy = " / ".join(f"{100 * s.busy_s / use.makespan_s:.1f}" for s in use.slots) if use.makespan_s else "-"
        table.add_row(
            name,
            str(jobs),
            busy,
            f"{use.mean_wait_s:.3f}",
            f"{use.max_wait_s:.3f}",
            f"{use.makespan_s:.3f}",
            f"{use.lower_bound_s:.3f}",
            f"{use.makespan_s / use.lower_bound_s:.3f}" if use.lower_bound_s else "-",
            f"{100 * use.while_waiting:.1f}%",
        )
    console.print(table)
    console.print(
        "LocalRunner jobs are the agents' baseline runs plus their candidates; each runner's first job starts "
        "its worker process (a few seconds of torch import), which counts as busy time."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
