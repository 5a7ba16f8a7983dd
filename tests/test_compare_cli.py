"""``evoteam compare`` as a user runs it, offline, on a small git repository: every arm per seed under one
evaluation budget, each run with its own knowledge store, the closing session, the table, ``--json``, the
report, ``--tasks``, and the sanity check that two arms of one configuration come out alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SCALE_ADD_TOML, cli_env, evoteam, git, scale_add_repo
from evoteam.roles.backends.fake_messages_script import text
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.knowledge import Kind, KnowledgeStore
from evoteam.supervisor.compare_stats import overlap

pytestmark = pytest.mark.integration

TWO_KERNELS_TOML = SCALE_ADD_TOML + SCALE_ADD_TOML.replace(
    '"scale_add"\nsource = "kernel.cpp"', '"other"\nsource = "other.cpp"'
)
OFFLINE = ["--rounds", "1", "--llm", "offline"]
KEY = "test-key"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return scale_add_repo(tmp_path / "repo")


def _journal(repo: Path, run: str) -> list[dict[str, object]]:
    path = repo / ".evoteam" / "runs" / run / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _config(repo: Path, run: str) -> dict[str, object]:
    started = next(e for e in _journal(repo, run) if e["kind"] == "run_started")
    data = started["data"]
    assert isinstance(data, dict)
    config = data["config"]
    assert isinstance(config, dict)
    return config


@pytest.mark.slow
def test_compare_runs_every_arm_under_one_evaluation_budget_and_prints_the_table(repo: Path) -> None:
    done = evoteam(repo, "compare", "scale_add", *OFFLINE, "--evaluation-budget", "2")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.strip().startswith(("│ single", "│ fixed", "│ evolving"))]
    assert len(rows) == 3, done.stdout
    assert "scale_add: the start against itself" in done.stdout  # the control is reported
    assert "closing session: 3 results against the start, in one worker" in done.stderr
    runs = sorted(p.name for p in (repo / ".evoteam" / "runs").iterdir())
    assert len(runs) == 3 and len(evoteam(repo, "runs").stdout.splitlines()) == 3
    stores = set()
    for run in runs:
        config = _config(repo, run)
        assert config["evaluation_budget"] == 2 and config["budget"] == 200_000 and config["rounds"] == 1
        evaluations = [e for e in _journal(repo, run) if e["kind"] == "agent_event" and e["data"]["tool"] == "evaluate"]
        assert sum(not e["data"]["is_error"] for e in evaluations) <= 2
        stores.add(config["knowledge"])
    assert len(stores) == 3  # each run its own store; the kernel's own is untouched
    assert not (repo / ".evoteam" / "knowledge" / "scale_add").exists()
    report = next((repo / ".evoteam" / "compare").iterdir())
    assert {p.name for p in report.iterdir()} >= {"compare.html", "cost_speedup.png", "comparison.json"}
    assert f"report: {report / 'compare.html'}" in done.stdout.replace("\n", "")
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_arms_of_the_same_configuration_get_overlapping_intervals(repo: Path) -> None:
    done = evoteam(
        repo, "compare", "scale_add", *OFFLINE, "--arms", "single,single", "--seeds", "3", "--evaluation-budget",
        "3", "--json", timeout=560,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    arms = {a["arm"]: a for a in shown["arms"]}
    assert set(arms) == {"single", "single#2"}
    for arm in arms.values():
        assert {"arm", "seeds", "speedup", "faster_fraction", "tokens", "cost_usd", "wall_s"} <= set(arm)
        assert arm["seeds"] == 3 and set(arm["speedup"]) == {"mean", "ci"} and arm["failed"] == 0
        assert arm["tokens"] == 0 and arm["cost_usd"] == 0 and arm["evaluations"] <= 3
    first, second = (tuple(arms[a]["speedup"]["ci"]) for a in ("single", "single#2"))
    print(f"same configuration: single {first}, single#2 {second}")
    assert overlap(first, second), (first, second)
    task = shown["tasks"][0]
    assert task["incumbent"] == "start" and task["control"] is not None and len(task["runs"]) == 6
    assert [r["arm"] for r in task["runs"]] == ["single", "single#2", "single#2", "single", "single", "single#2"]
    assert all(r["final"]["status"] == "PASSED" for r in task["runs"])
    assert Path(shown["report"], "comparison.json").is_file()


@pytest.mark.slow
def test_compare_over_several_tasks_reports_each_and_all_and_can_start_from_a_snapshot(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "other.cpp").write_text((Path(__file__).parent / "kernels" / "slow_scale_add.cpp").read_text())
    scale_add_repo(repo, TWO_KERNELS_TOML)
    planted = KnowledgeStore(repo, "scale_add")
    planted.add(Kind.HARDWARE, "planted", "a note from before")
    store = planted.folder
    note = (store / "index.jsonl").read_text()
    done = evoteam(
        repo, "compare", "--tasks", "all", "--arms", "single", *OFFLINE, "--evaluation-budget", "2", "--knowledge",
        "snapshot", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert [t["task"] for t in shown["tasks"]] == ["scale_add", "other"]
    assert [a["arm"] for a in shown["arms"]] == ["single"] and shown["arms"][0]["seeds"] == 1
    assert shown["settings"]["tasks"] == ["scale_add", "other"] and shown["settings"]["knowledge"] == "snapshot"
    for task in shown["tasks"]:
        key = _config(repo, task["runs"][0]["run"])["knowledge"]
        copied = repo / ".evoteam" / "knowledge" / str(key) / "index.jsonl"
        if task["task"] == "scale_add":
            assert copied.read_text().startswith(note)  # its run started from the kernel's store, as it was
        else:
            assert not copied.exists() or "planted" not in copied.read_text()  # other has no store of its own
    assert (store / "index.jsonl").read_text() == note  # the kernel's own store is as it was


def test_bad_compare_input_is_one_clear_error_and_starts_nothing(repo: Path, tmp_path: Path) -> None:
    bad_prices = tmp_path / "prices.json"
    bad_prices.write_text('{"m": {"input": 1}}')
    cases = [
        (["scale_add", "--arms", "single,solo"], "unknown arm 'solo'"),
        (["scale_add", "--tasks", "all"], "name one kernel, or several with --tasks (not both)"),
        ([], "name one kernel, or several with --tasks"),
        (["--tasks", "nothing_*"], "--tasks: no kernel matches 'nothing_*'"),
        (["scale_add", "--seeds", "0"], "--seeds must be at least 1"),
        (["scale_add", "--evaluation-budget", "0"], "--evaluation-budget must be at least 1"),
        (["scale_add", "--prices", str(bad_prices)], "the price of 'm': output: Field required"),
        (["nosuch"], "no kernel named 'nosuch'"),
    ]
    for args, message in cases:
        done = evoteam(repo, "compare", *args, "--llm", "offline")
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (args, done.stderr)
    assert not (repo / ".evoteam" / "runs").exists()


@pytest.mark.slow
def test_compare_with_a_model_counts_every_token_and_prices_it_with_the_users_table(repo: Path, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["claude-sonnet-4"]\ninput = 2.0\noutput = 10.0\ncache_write = 2.5\ncache_read = 0.2\n')
    with FakeMessagesServer(lambda body: text("I change nothing this round."), api_key=KEY) as server:
        env = cli_env(repo) | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": KEY}
        args = ["--arms", "single,fixed", "--rounds", "1", "--llm", "anthropic", "--prices", str(prices), "--json"]
        done = evoteam(repo, "compare", "scale_add", *args, env=env)
        replies = list(server.replies)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    runs = shown["tasks"][0]["runs"]
    usages = [r["usage"] for r in replies]
    tokens = sum(
        u["input_tokens"] + u["output_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        for u in usages
    )
    dollars = sum(
        (
            u["input_tokens"] * 2.0
            + u["output_tokens"] * 10.0
            + u["cache_creation_input_tokens"] * 2.5
            + u["cache_read_input_tokens"] * 0.2
        )
        / 1e6
        for u in usages
    )
    assert tokens > 0 and sum(r["tokens"] for r in runs) == tokens  # every answered call, in some run
    assert sum(r["cost_usd"] for r in runs) == pytest.approx(dollars)  # at the user's prices, not ours
    arms = {a["arm"]: a for a in shown["arms"]}
    assert all(a["cost_usd"] > 0 and a["tokens"] > 0 and a["evaluations"] == 0 for a in arms.values())
    assert shown["settings"]["prices"] == ["claude-sonnet-4"]
    assert all(_config(repo, r["run"])["max_turns"] == 200 for r in runs)  # tokens, not turns, hold the agents
