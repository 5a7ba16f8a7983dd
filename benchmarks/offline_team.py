"""The evolving team without a language model: what the supervisor did, round by round, and what it bought.

Copies ``examples/gemm`` into a new git repository, runs ``evoteam evolve gemm_start --llm offline`` there
(one thread: ``OMP_NUM_THREADS=1``) and prints, from ``evoteam show --json``, one Markdown row per round (its
team and protocol, its candidates with their speedups over the start and intervals, the decision after it
with the signal each action cites), then the best against the start and the number of reorganizations that
played out (decisions that changed the team before a later round). Figures are in docs/supervisor.md.

It is a benchmark, not a test: it prints what happened and exits 0 when the run finished. Run from the
repository root: ``python benchmarks/offline_team.py`` (``--rounds``, ``--evaluations``: passed to evolve;
``--keep DIR``: run in DIR and leave it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "gemm"


def git(repo: Path, *args: str) -> None:
    who = ["-c", "user.name=benchmark", "-c", "user.email=benchmark@localhost"]
    subprocess.run(["git", *who, *args], cwd=repo, check=True, capture_output=True)


def evoteam(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "evoteam.cli.main", *args]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)


def action_text(action: dict[str, Any]) -> str:
    what = action.get("role") or action.get("protocol") or action.get("candidate") or ""
    cites = ", ".join(action.get("cites") or [])
    return f"{action['action']} {what}".strip() + (f" ({cites})" if cites else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--evaluations", type=int, default=6, help="per agent and round (evolve's default: 6)")
    parser.add_argument("--keep", type=Path, help="run in this folder (made new) and leave it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="evoteam-offline-team-"))
    repo = base / "gemm"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".evoteam"))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the example")
    started = time.monotonic()
    evolve = ("evolve", "gemm_start", "--llm", "offline", "--rounds", str(args.rounds))
    done = evoteam(repo, *evolve, "--evaluations", str(args.evaluations))
    wall = time.monotonic() - started
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        return 1
    [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
    shown = evoteam(repo, "show", run, "--json")
    if shown.returncode != 0:
        print(shown.stderr, file=sys.stderr)
        return 1
    data = json.loads(shown.stdout)
    decisions = {d["round"]: d for d in data["decisions"]}
    print(f"evoteam evolve {' '.join(evolve[1:])} --evaluations {args.evaluations} (examples/gemm, one thread)")
    print(f"run {run}: {wall:.0f} s, finished: {data['finished']}\n")
    print("| round | team (protocol) | candidates: speedup over the start (95% CI) | decision after it |")
    print("| --- | --- | --- | --- |")
    changed = 0
    for record in data["rounds"]:
        made = [
            f"{c['role']} {c['geomean_speedup']:.2f}x ({c['geomean_ci'][0]:.2f}-{c['geomean_ci'][1]:.2f})"
            if c.get("geomean_speedup") and c.get("geomean_ci")
            else f"{c['role']} {c['status']}"
            for c in record["candidates"]
        ]
        decision = decisions.get(record["round"])
        actions = [action_text(a) for a in decision["actions"]] if decision else []
        if actions and record["round"] < args.rounds:
            changed += 1
        team = f"{', '.join(record['roles'])} ({record['protocol']})"
        print(f"| {record['round']} | {team} | {'; '.join(made) or 'none'} | {'; '.join(actions) or 'kept'} |")
    best = next((c["record"] for c in data["candidates"] if c["record"]["id"] == data["best"]), None)
    print()
    if best is None:
        print("best: none (nothing was significantly faster than the start)")
    else:
        low, high = best["geomean_ci"]
        print(f"best: {best['id']} ({best['role']}, round {best['round']}): {best['geomean_speedup']:.2f}x over the "
              f"start (95% CI {low:.2f}-{high:.2f})")  # fmt: skip
    start = data["start"]
    if start and start.get("geomean_speedup"):
        print(f"the start: {start['geomean_speedup']:.3f}x of the task's baseline (the definition's reference)")
    print(f"reorganizations that played out (a changed team before a later round): {changed}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
