"""``evoteam evolve / runs / show / accept / cancel / resume`` as a user runs them, on a small git repository."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KERNELS, SCALE_ADD_TOML, cli_env, evoteam, git, run_seed, scale_add_repo
from evoteam.roles.backends.fake_messages_script import text
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_openai_server import FakeOpenAIServer, call, say

pytestmark = pytest.mark.integration

TOML = (
    SCALE_ADD_TOML
    + """
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
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "kernel.cu").write_text("// not used here\n")
    return scale_add_repo(tmp_path / "repo", TOML)


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
    [named] = [c for c in shown["candidates"] if c["id"] == best]  # on a second, independent measurement
    assert named["record"]["retimed_from"] is not None and named["speedup_vs_start"] > 1.02

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


def test_a_journal_of_an_older_evoteam_or_a_foreign_file_is_one_error_line_not_a_traceback(repo: Path) -> None:
    runs = repo / ".evoteam" / "runs"
    old = b'{"data":{"config":{"run":"old-run"}},"kind":"run_started","seq":0}\n'
    for run, content in [("old-run", old), ("foreign-run", b"not, a, journal\n")]:
        (runs / run).mkdir(parents=True)
        (runs / run / "journal.jsonl").write_bytes(content)
    expected = {
        "old-run": f"evoteam: journal {runs / 'old-run' / 'journal.jsonl'} has format version 1 (no version line: "
        "an earlier evoteam wrote it); this evoteam reads 2",
        "foreign-run": f"evoteam: {runs / 'foreign-run' / 'journal.jsonl'} is not an evoteam journal (its first line "
        "is not a journal version line)",
    }
    for run, message in expected.items():
        for command in (["show", run], ["resume", run], ["report", run], ["cancel", run]):
            result = evoteam(repo, *command)
            assert (result.returncode, result.stderr.splitlines()) == (2, [message]), command
        assert (runs / run / "journal.jsonl").read_bytes() in (old, b"not, a, journal\n")  # left as it was
    listed = evoteam(repo, "runs")
    assert listed.returncode == 0 and sorted(listed.stderr.splitlines()) == sorted(expected.values())


def test_a_second_evolve_on_a_running_kernel_is_refused(repo: Path) -> None:
    from evoteam.supervisor.lock import KernelLock
    from evoteam.supervisor.state import state_dir

    with KernelLock(state_dir(repo), "scale_add", "someone-else"):
        second = evoteam(repo, "evolve", "scale_add", "--llm", "offline")
    assert second.returncode == 2 and "being evolved by run someone-else" in second.stderr


KILL_SEED = run_seed("EVOTEAM_KILL_SEED")
"""Kill points are random on each run (one early, one mid-run, one late); the seed is in the test ids."""
_kills = random.Random(KILL_SEED)
KILL_DELAYS = [round(_kills.uniform(low, high), 2) for low, high in ((2.0, 4.0), (4.0, 6.5), (6.5, 9.0))]


@pytest.mark.slow
@pytest.mark.parametrize("delay", KILL_DELAYS, ids=[f"seed{KILL_SEED}-{d}s" for d in KILL_DELAYS])
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
    env = cli_env(repo)
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


def test_detach_starts_the_run_in_the_background_and_returns_its_id(repo: Path) -> None:
    import time

    detached = evoteam(
        repo,
        "evolve",
        "scale_add",
        "--rounds",
        "1",
        "--team",
        "single",
        "--llm",
        "offline",
        "--evaluations",
        "2",
        "--detach",
    )
    assert detached.returncode == 0, detached.stderr
    run = detached.stdout.strip()
    assert run.startswith("scale_add-") and "\n" not in run
    journal = repo / ".evoteam" / "runs" / run / "journal.jsonl"
    at_return = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert at_return[:3] == ["journal", "run_started", "base"] and "run_finished" not in at_return  # still running
    deadline = time.monotonic() + 240
    log = repo / ".evoteam" / "runs" / run / "run.log"
    while time.monotonic() < deadline:  # the last thing the background run does is print its end to its log
        if f"run {run} finished" in log.read_text():
            break
        time.sleep(1.0)
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    assert shown["finished"] == "rounds", shown
    events = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert events.count("round_finished") == 1 and events[-1] == "run_finished"
    assert f"run {run} finished (rounds)" in log.read_text()
    assert run in evoteam(repo, "runs").stdout


def test_export_writes_the_winner_and_fresh_traces_for_flashinfer_bench(repo: Path) -> None:
    done = evoteam(
        repo, "evolve", "scale_add", "--rounds", "1", "--team", "single", "--llm", "offline", "--evaluations", "2"
    )
    assert done.returncode == 0, done.stderr
    run = evoteam(repo, "runs").stdout.split("\t")[0]
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    out = repo.parent / "dataset"
    exported = evoteam(repo, "export", run, "--flashinfer", str(out))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(f"{shown['best']}: PASSED")
    definition = json.loads((repo / "scale_add.json").read_text())
    op, name = definition["op_type"], definition["name"]
    [solution_file] = (out / "solutions" / op / name).glob("*.json")
    solution = json.loads(solution_file.read_text())
    assert solution["spec"]["binding"] == "tvm-ffi"  # evoteam's C ABI, exported through a generated tvm-ffi source
    best = next(c for c in shown["candidates"] if c["id"] == shown["best"])
    assert solution["sources"][0]["content"] == git(repo, "show", f"{best['sha']}:kernel.cpp")
    traces = [json.loads(line) for line in (out / "traces" / op / f"{name}.jsonl").read_text().splitlines()]
    workloads = (repo / "scale_add.jsonl").read_text().splitlines()
    assert len(traces) == len(workloads) and all(t["evaluation"]["status"] == "PASSED" for t in traces)
    assert all(t["solution"] == solution["name"] for t in traces)
    assert git(repo, "status", "--porcelain") == ""
    fib = pytest.importorskip("flashinfer_bench.data", reason="flashinfer-bench is not installed")
    loaded = fib.TraceSet.from_path(str(out))
    assert [s.name for s in loaded.solutions[name]] == [solution["name"]]
    assert len(loaded.traces[name]) == len(workloads)

    for bad, code, message in (
        (["export", "nope", "--flashinfer", str(out)], 2, "no run 'nope'"),
        (["export", run, "--flashinfer", str(out), "--candidate", "r09-x"], 2, "has no candidate 'r09-x'"),
    ):
        refused = evoteam(repo, *bad)
        assert refused.returncode == code and message in refused.stderr, refused.stderr


def test_a_moved_repository_keeps_its_runs_usable(repo: Path) -> None:
    done = evoteam(
        repo, "evolve", "scale_add", "--rounds", "1", "--team", "single", "--llm", "offline", "--evaluations", "2"
    )
    assert done.returncode == 0, done.stderr
    run = evoteam(repo, "runs").stdout.split("\t")[0]
    moved = repo.parent / "moved"
    repo.rename(moved)  # the journal keeps the old absolute path of evoteam.toml
    accepted = evoteam(moved, "accept", run)
    assert accepted.returncode == 0, accepted.stderr
    best = json.loads(evoteam(moved, "show", run, "--json").stdout)
    sha = next(c["sha"] for c in best["candidates"] if c["id"] == best["best"])
    assert (moved / "kernel.cpp").read_text() == git(moved, "show", f"{sha}:kernel.cpp")
    assert evoteam(moved, "resume", run).returncode == 0


def test_a_run_without_a_significant_improvement_has_no_best_and_accept_says_so(tmp_path: Path) -> None:
    flat = SCALE_ADD_TOML.replace("knobs = { PASSES = [1, 64], BLOCK = [256] }", "")
    assert flat != SCALE_ADD_TOML
    repo = scale_add_repo(tmp_path / "repo", flat)
    # its BLOCK knob makes candidates that are all about as fast as the start: the Optimizer's climb submits a
    # neighbour only when noise makes it measure faster than the start, so a run may make none; then another run,
    # with the knowledge store emptied (it would skip the configs the first one tried)
    shutil.copyfile(KERNELS / "tunable_scale_add.cpp", repo / "kernel.cpp")
    git(repo, "commit", "-q", "-am", "a kernel with nothing to gain")
    for _ in range(4):
        shutil.rmtree(repo / ".evoteam" / "knowledge", ignore_errors=True)
        done = evoteam(repo, "evolve", "kernel.cpp", "--rounds", "1", "--llm", "offline", "--evaluations", "8")
        assert done.returncode == 0, done.stderr
        finished = re.search(r"run (\S+) finished", done.stderr)
        assert finished is not None, done.stderr
        run = finished.group(1)
        shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
        if shown["candidates"]:
            break
    assert shown["candidates"], "four runs made no candidate"
    assert shown["start"]["id"] == "r00-start" and shown["start"]["status"] == "PASSED"
    for c in shown["candidates"]:
        if c["record"] and c["record"]["status"] == "PASSED":
            lo, hi = c["ci_vs_start"]
            assert lo <= c["speedup_vs_start"] <= hi
    confirmed = [  # significant on a first measurement, and its re-timing still above the minimum effect
        c for c in shown["candidates"] if c["record"] and c["record"]["retimed_from"] and c["speedup_vs_start"] > 1.02
    ]
    if confirmed:  # a lucky draw of noise on a busy machine, twice: then the best is one of them
        assert shown["best"] in {c["id"] for c in confirmed}
        return
    assert shown["best"] is None
    assert "no improvement over the start" in evoteam(repo, "show", run).stdout
    refused = evoteam(repo, "accept", run)
    assert refused.returncode == 1 and "no improvement over the start" in refused.stderr
    named = next(c["id"] for c in shown["candidates"] if c["sha"])
    forced = evoteam(repo, "accept", run, "--candidate", named, "--force")
    assert forced.returncode == 0 and "not significantly faster than the start" in forced.stderr


def test_a_refused_key_stops_the_run_at_its_first_call_with_a_clear_message(repo: Path) -> None:
    toml = repo / "evoteam.toml"  # the kernel's own model (no --model given)
    toml.write_text(
        toml.read_text().replace('name = "scale_add"\n', 'name = "scale_add"\nmodel = "claude-from-the-toml"\n')
    )
    with FakeMessagesServer(lambda body: text("never read"), api_key="the-right-key") as server:
        env = cli_env(repo) | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "a-wrong-key"}
        args = ["evolve", "scale_add", "--llm", "anthropic", "--team", "fixed", "--rounds", "3"]
        done = evoteam(repo, *args, env=env)
        calls = [r for r in server.requests if r.path == "/v1/messages"]
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"evoteam: run scale_add-\S+ stopped: .*401 authentication_error.*", last), done.stderr
    assert "a-wrong-key" not in done.stderr + done.stdout
    assert len(calls) == 1  # the first agent's one call: no other agent, no supervisor call, no round 2
    assert calls[0].body["model"] == "claude-from-the-toml"
    [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
    journal = (repo / ".evoteam" / "runs" / run / "journal.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in journal]
    assert kinds.count("round_started") == 1 and "round_finished" not in kinds and kinds[-1] == "run_finished"
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    assert shown["finished"] == "error" and "401 authentication_error" in shown["finished_error"]
    assert "stopped by:" in evoteam(repo, "show", run).stdout


def test_the_single_agent_runs_on_an_openai_compatible_server(repo: Path) -> None:
    """``--team single --llm openai``: the Codex-style baseline (any OpenAI-compatible server at a base URL)."""
    faster = (repo / "kernel.cpp").read_text().replace("#define PASSES 64", "#define PASSES 1")
    assert "#define PASSES 1\n" in faster

    def play(body: dict[str, object]) -> object:
        if "tools" not in body:  # the supervisor (no decision is needed of a single agent's team)
            return say("{}")
        turn = sum(1 for m in body["messages"] if isinstance(m, dict) and m.get("role") == "assistant")
        script = [
            call("write", {"path": "kernel.cpp", "content": faster}, text="One pass is enough."),
            call("evaluate", {}),
            call("submit_candidate", {"rationale": "compute the result once instead of 64 times"}),
        ]
        return script[turn] if turn < len(script) else say("Submitted.")

    with FakeOpenAIServer(play, api_key="sk-local") as server:
        env = cli_env(repo) | {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-local"}
        args = ["evolve", "scale_add", "--llm", "openai", "--model", "local-coder", "--team", "single", "--rounds", "1"]
        done = evoteam(repo, *args, env=env)
        replies = list(server.replies)
    assert done.returncode == 0, done.stderr
    [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
    shown = json.loads(evoteam(repo, "show", run, "--json").stdout)
    [candidate] = shown["candidates"]
    assert candidate["role"] == "Optimizer" and candidate["record"]["status"] == "PASSED"
    assert shown["best"] == candidate["id"] and shown["best_speedup"] > 2  # 64 passes down to 1
    journal = [
        json.loads(line) for line in (repo / ".evoteam" / "runs" / run / "journal.jsonl").read_text().splitlines()
    ]
    spent = [e["data"] for e in journal if e["kind"] == "tokens"]
    assert spent and {s["model"] for s in spent} == {"local-coder"}
    assert sum(s["usage"]["input_tokens"] + s["usage"]["cache_read_input_tokens"] for s in spent) == sum(
        r["usage"]["prompt_tokens"] for r in replies if "usage" in r
    )


def test_prompt_prints_what_an_agent_of_a_role_is_given_first(repo: Path) -> None:
    done = evoteam(repo, "prompt", "debugger", "scale_add", "--team", "fixed", "--max-tokens", "2000")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for part in ("system prompt", "mission: Debugger", "task", "knowledge"):
        assert f"===== system, part: {part} =====" in text
    assert "- n=65536 (large-65536)" in text and "atol 0.01, rtol 0.01" in text and "flags: -shared -fPIC -O2" in text
    assert "CPU: " in text and "logical cores available" in text
    assert "\n- patch: Apply a unified diff" in text and "\n- submit_candidate:" in text
    assert "Round 1 of 3 (2 more after this one). There is no particular brief this round" in text
    assert "One reply holds at most 2,000 tokens" in text
    shown = json.loads(evoteam(repo, "prompt", "Optimizer", "scale_add", "--json").stdout)
    assert len(shown["system"]) == 4 and shown["first_message"].startswith("Round 1 of 3 ")
    assert [t["name"] for t in shown["tools"]][:5] == ["view", "list", "history", "diff", "write"]
    bad = evoteam(repo, "prompt", "Wizard", "scale_add")
    assert bad.returncode == 2 and "no role named 'Wizard'; roles: Optimizer, Debugger" in bad.stderr
