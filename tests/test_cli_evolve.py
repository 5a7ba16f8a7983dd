"""``evoteam evolve / runs / show / accept / cancel / resume`` as a user runs them, on a small git repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, KERNELS, git, init_repo

TOML = """
[[kernel]]
name = "scale_add"
source = "kernel.cpp"
language = "cpp"
binding = "c"
entry = "scale_add"
definition = "scale_add.json"
workloads = "scale_add.jsonl"
flags = ["-O2"]

[[kernel]]
name = "cuda_kernel"
source = "kernel.cu"
language = "cuda"
binding = "c"
entry = "scale_add"
definition = "scale_add.json"
workloads = "scale_add.jsonl"
target = "sm_90a"
"""


def evoteam(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=280,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo.parent / "home")},
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    shutil.copyfile(KERNELS / "tunable_scale_add.cpp", root / "kernel.cpp")
    (root / "kernel.cu").write_text("// not used here\n")
    for name in ("scale_add.json", "scale_add.jsonl"):
        shutil.copyfile(DATA / name, root / name)
    (root / "evoteam.toml").write_text(TOML)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "kernel")
    return root


def test_evolve_show_accept_on_a_cpu_kernel(repo: Path) -> None:
    done = evoteam(repo, "evolve", "kernel.cpp", "--rounds", "1", "--llm", "offline", "--evaluations", "3")
    assert done.returncode == 0, done.stderr
    assert "round 1/1" in done.stderr and "finished (rounds)" in done.stderr
    assert git(repo, "status", "--porcelain") == ""  # .evoteam ignores itself; nothing of the user changed
    listed = evoteam(repo, "runs").stdout.splitlines()
    assert len(listed) == 1
    run = listed[0].split("\t")[0]
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    assert shown["finished"] == "rounds" and shown["candidates"] and len(shown["decisions"]) == 1
    best = shown["best"]
    assert best is not None
    assert "evoteam/" + run + "/best" in git(repo, "branch", "--list", "evoteam/*")

    (repo / "kernel.cpp").write_text("// my own edit\n")
    refused = evoteam(repo, "accept", run)
    assert refused.returncode == 1 and "uncommitted changes" in refused.stderr
    assert (repo / "kernel.cpp").read_text() == "// my own edit\n"
    accepted = evoteam(repo, "accept", run, "--force")
    assert accepted.returncode == 0, accepted.stderr
    sha = next(c["sha"] for c in shown["candidates"] if c["id"] == best)
    assert (repo / "kernel.cpp").read_text() == git(repo, "show", f"{sha}:kernel.cpp")

    assert evoteam(repo, "cancel", run).stdout.startswith(f"run {run} already finished")
    assert evoteam(repo, "resume", run).returncode == 0  # a finished run resumes to nothing


def test_bad_input_and_a_cuda_kernel_without_a_gpu_are_clear_errors(repo: Path) -> None:
    unknown = evoteam(repo, "evolve", "nope", "--llm", "offline")
    assert unknown.returncode == 2 and "no kernel named 'nope'" in unknown.stderr
    cuda = evoteam(repo, "evolve", "cuda_kernel", "--llm", "offline")
    if cuda.returncode == 2:
        assert "no CUDA GPU" in cuda.stderr and "--runner ssh://HOST" in cuda.stderr
    for command in (["show", "nope"], ["accept", "nope"], ["cancel", "nope"], ["resume", "nope"]):
        result = evoteam(repo, *command)
        assert result.returncode == 2 and "no run 'nope'" in result.stderr, command


def test_a_second_evolve_on_a_running_kernel_is_refused(repo: Path) -> None:
    from evoteam.supervisor.lock import KernelLock
    from evoteam.supervisor.state import state_dir

    with KernelLock(state_dir(repo), "scale_add", "someone-else"):
        second = evoteam(repo, "evolve", "scale_add", "--llm", "offline")
    assert second.returncode == 2 and "being evolved by run someone-else" in second.stderr


@pytest.mark.slow
@pytest.mark.parametrize("delay", [3.0, 5.5, 8.0])
def test_kill_9_at_any_point_then_resume_records_every_candidate_exactly_once(repo: Path, delay: float) -> None:
    import os
    import signal
    import time

    command = [
        sys.executable,
        "-m",
        "evoteam.cli.main",
        "evolve",
        "scale_add",
        "--rounds",
        "2",
        "--team",
        "single",
        "--llm",
        "offline",
        "--evaluations",
        "3",
    ]
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo.parent / "home")}
    with subprocess.Popen(
        command, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    ) as proc:
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
    runs = list((repo / ".evoteam" / "runs").glob("*"))
    if not runs:
        pytest.skip("killed before the run was created")
    run = runs[0].name
    resumed = evoteam(repo, "resume", run)
    assert resumed.returncode == 0, resumed.stderr
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    assert shown["finished"] == "rounds" and [r["round"] for r in shown["rounds"]] == [1, 2]
    ids = [c["id"] for c in shown["candidates"]]
    assert ids and len(ids) == len(set(ids))
    journal = [json.loads(line) for line in (runs[0] / "journal.jsonl").read_text().splitlines()]
    for kind in ("submitted", "evaluated", "committed"):
        recorded = [e["data"].get("id") or e["data"]["record"]["id"] for e in journal if e["kind"] == kind]
        assert sorted(recorded) == sorted(ids), kind
    trailers = git(repo, "log", "--format=%(trailers:key=Evoteam-Candidate,valueonly)", "--branches=evoteam/*/round-*")
    assert sorted(t for t in trailers.split() if t) == sorted(ids)
    assert git(repo, "status", "--porcelain") == ""


def test_compare_runs_the_three_teams_under_one_budget_and_prints_a_table(repo: Path) -> None:
    done = evoteam(
        repo, "compare", "scale_add", "--rounds", "1", "--llm", "offline", "--evaluations", "2", "--budget", "1000"
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith(("│ single", "│ fixed", "│ evolving"))]
    assert len(rows) == 3, done.stdout
    assert all("0/1000" in row for row in rows)  # the offline teams spend no tokens
    assert len(evoteam(repo, "runs").stdout.splitlines()) == 3
