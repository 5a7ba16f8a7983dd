"""The pieces of ``evoteam compare`` that need no process: the plan (arms, interleaving, per-run knowledge and
budget), the statistics (the seeds' interval, Pareto fronts), prices, the evaluation budget's shares and its
metered tool, the arms' summaries and the closing session against fake evaluations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evoteam.gpu_bench.api import EvaluationStatus, Solution
from evoteam.roles.budget import (
    DEFAULT_PRICES,
    EVALUATIONS_REFUSED,
    EvaluationShare,
    PricesError,
    PricingTable,
    load_prices,
    split_whole,
)
from evoteam.roles.builtin import builtin_role
from evoteam.roles.llm import Usage
from evoteam.roles.tools.base import ToolResult
from evoteam.roles.tools.evaluation import EvaluateInput, FakeEvaluations, MeteredEvaluate, scripted_result
from evoteam.supervisor.compare_plan import (
    Arm,
    PlanError,
    Settings,
    interleave,
    knowledge_key,
    parse_arms,
    run_config,
    seed_knowledge,
    snapshot_knowledge,
)
from evoteam.supervisor.compare_result import FinalTiming, RunResult, run_result, summarize_arm, summarize_overall
from evoteam.supervisor.compare_retime import closing_session
from evoteam.supervisor.compare_stats import overlap, pareto_front, seeds_interval, t_quantile_975
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.round_play import evaluation_shares
from evoteam.supervisor.state import RunState
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.unit


# -- the plan ---------------------------------------------------------------------------------------------------


def test_arms_are_team_modes_and_the_same_mode_again_is_another_arm() -> None:
    arms = parse_arms("single, fixed,single,evolving,single")
    assert [(a.name, a.mode) for a in arms] == [
        ("single", "single"),
        ("fixed", "fixed"),
        ("single#2", "single"),
        ("evolving", "evolving"),
        ("single#3", "single"),
    ]
    with pytest.raises(PlanError, match="unknown arm 'solo'; arms are team modes: single, fixed, evolving"):
        parse_arms("single,solo")
    with pytest.raises(PlanError, match="names no arm"):
        parse_arms(" , ")


def test_each_seed_runs_every_arm_once_starting_one_arm_later() -> None:
    arms = parse_arms("single,fixed,evolving")
    order = interleave(arms, 4)
    assert [(s, a.name) for s, a in order[:6]] == [
        (0, "single"),
        (0, "fixed"),
        (0, "evolving"),
        (1, "fixed"),
        (1, "evolving"),
        (1, "single"),
    ]
    for seed in range(4):
        assert sorted(a.name for s, a in order if s == seed) == ["evolving", "fixed", "single"]
    assert next(a.name for s, a in order if s == 2) == "evolving"  # every arm goes first in some seed
    with pytest.raises(PlanError, match="--seeds must be at least 1"):
        interleave(arms, 0)


def test_every_run_has_the_same_budget_its_own_seed_and_its_own_knowledge_store(tmp_path: Path) -> None:
    settings = Settings(rounds=2, budget=5000, evaluation_budget=12, llm="offline", seed=7, max_turns=200)
    arms = parse_arms("fixed,fixed")
    configs = [
        run_config(settings, "compare-x", "rms", tmp_path / "evoteam.toml", a, s) for s, a in interleave(arms, 2)
    ]
    assert {(c.budget, c.evaluation_budget, c.rounds, c.max_turns, c.llm) for c in configs} == {
        (5000, 12, 2, 200, "offline")
    }
    assert all(c.evaluations_per_agent == 12 for c in configs)  # the role's share limits, not a count per agent
    assert sorted(c.seed for c in configs) == [7, 7, 8, 8]
    keys = [c.knowledge for c in configs]
    assert len(set(keys)) == 4 and all(k is not None and k.startswith("rms.compare-x.fixed") for k in keys)
    assert knowledge_key("compare-x", "rms", Arm(name="fixed#2", mode="fixed"), 1) == "rms.compare-x.fixed-2.1"
    assert len({c.run for c in configs}) == 4


def test_a_snapshot_is_frozen_when_taken_and_each_run_gets_a_copy(tmp_path: Path) -> None:
    store = tmp_path / ".evoteam" / "knowledge" / "rms"
    store.mkdir(parents=True)
    (store / "index.jsonl").write_text('{"note": 1}\n')
    snapshot = snapshot_knowledge(tmp_path, "rms", "compare-x")
    assert snapshot is not None
    (store / "index.jsonl").write_text('{"note": 1}\n{"note": 2}\n')  # written after the snapshot
    first = seed_knowledge(tmp_path, snapshot, "rms.compare-x.single.0")
    assert (first / "index.jsonl").read_text() == '{"note": 1}\n'
    (first / "index.jsonl").write_text("")  # a run writes its own store
    second = seed_knowledge(tmp_path, snapshot, "rms.compare-x.fixed.0")
    assert (second / "index.jsonl").read_text() == '{"note": 1}\n'
    empty = seed_knowledge(tmp_path, None, "rms.compare-x.evolving.0")
    assert empty.is_dir() and not any(empty.iterdir())
    assert snapshot_knowledge(tmp_path, "no-such-kernel", "compare-x") is None


# -- statistics -------------------------------------------------------------------------------------------------


def test_the_t_quantile_matches_the_table_and_its_expansion_past_it() -> None:
    assert t_quantile_975(1) == 12.706 and t_quantile_975(4) == 2.776
    for df, exact in ((16, 2.120), (20, 2.086), (30, 2.042), (60, 2.000), (120, 1.980)):
        assert abs(t_quantile_975(df) - exact) < 0.002, df
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_seeds_average_on_the_log_scale_with_a_t_interval() -> None:
    mean, ci = seeds_interval([2.0, 2.0, 2.0])
    assert mean == pytest.approx(2.0) and ci == pytest.approx((2.0, 2.0))
    mean, ci = seeds_interval([1.0, 4.0])
    assert mean == pytest.approx(2.0)  # the geometric mean, not 2.5
    half = 12.706 * math.log(4.0) / math.sqrt(2) / math.sqrt(2)
    assert ci == pytest.approx((2.0 * math.exp(-half), 2.0 * math.exp(half)))
    assert seeds_interval([1.3], (1.2, 1.4)) == (pytest.approx(1.3), (1.2, 1.4))  # one seed: its own interval
    with pytest.raises(ValueError):
        seeds_interval([])
    with pytest.raises(ValueError):
        seeds_interval([1.0, 0.0])
    assert overlap((1.0, 2.0), (2.0, 3.0)) and not overlap((1.0, 1.5), (1.6, 2.0))


def test_the_pareto_front_keeps_what_no_cheaper_faster_point_beats() -> None:
    points = [(10.0, 1.5), (5.0, 1.2), (5.0, 1.1), (20.0, 1.4), (30.0, 2.0), (5.0, 1.2)]
    front = pareto_front(points)
    assert [points[i] for i in front] == [(5.0, 1.2), (5.0, 1.2), (10.0, 1.5), (30.0, 2.0)]
    assert pareto_front([]) == []


# -- prices -----------------------------------------------------------------------------------------------------


def test_a_user_price_table_adds_and_replaces_entries_and_cached_input_is_priced_as_cached(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"claude-sonnet-4": {"input": 1, "output": 2, "cache_write": 1, "cache_read": 0.1}}))
    toml = tmp_path / "prices.toml"
    toml.write_text("[my-model]\ninput = 2.0\noutput = 8.0\ncache_write = 2.5\ncache_read = 0.2\n")
    table = PricingTable.with_overrides({**load_prices(path), **load_prices(toml)})
    assert table.price("claude-sonnet-4-5") == load_prices(path)["claude-sonnet-4"]
    assert table.price("claude-opus-4-5") == DEFAULT_PRICES["claude-opus-4-5"]
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=1_000_000)
    assert table.usd("my-model-v2", usage) == pytest.approx(2.0 + 8.0 + 0.2)
    assert table.usd("unknown", usage) == 0.0


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("{", ".json", "is not JSON"),
        ("[]", ".json", "must map model names to prices"),
        ('{"m": {"input": 1, "output": 2}}', ".json", "the price of 'm': cache_write: Field required"),
        ('{"m": {"input": -1, "output": 2, "cache_write": 1, "cache_read": 1}}', ".json", "greater than or equal"),
        ("m = [", ".toml", "is not TOML"),
    ],
)
def test_a_bad_price_file_is_one_clear_error(tmp_path: Path, content: str, suffix: str, message: str) -> None:
    path = tmp_path / f"prices{suffix}"
    path.write_text(content)
    with pytest.raises(PricesError, match=message):
        load_prices(path)
    with pytest.raises(PricesError, match="cannot read the price file"):
        load_prices(tmp_path / "missing.json")


def test_a_runs_cost_comes_from_its_tokens_by_model_and_an_unpriced_model_is_named() -> None:
    config = RunConfig(run="r", kernel="k", config="/x/evoteam.toml")
    state = RunState(config=config, finished="rounds")
    state.model_tokens = {"claude-sonnet-4-5": Usage(input_tokens=1_000_000, output_tokens=100_000)}
    state.tokens = {("Optimizer", "o-0"): Usage(input_tokens=1_000_000, output_tokens=100_000)}
    arm = Arm(name="single", mode="single")
    priced = run_result("k", arm, 0, state, 12.0, PricingTable())
    assert priced.cost_usd == pytest.approx(3.0 + 1.5) and priced.tokens == 1_100_000 and not priced.unpriced
    state.model_tokens["local-llama"] = Usage(input_tokens=10)
    unpriced = run_result("k", arm, 0, state, 12.0, PricingTable())
    assert unpriced.cost_usd is None and unpriced.unpriced == ["local-llama"]


# -- the evaluation budget --------------------------------------------------------------------------------------


def test_evaluation_shares_split_what_is_left_over_the_rounds_left_by_weight() -> None:
    config = RunConfig(run="r", kernel="k", config="/x", rounds=2, evaluation_budget=11)
    team = Team(roles=["Profiling Scientist", "Optimizer", "Debugger", "Knowledge Integrator"])
    roles = [builtin_role(n) for n in team.roles]
    shares = evaluation_shares(RunState(config=config), team, 1, roles)
    # 11 // 2 rounds = 5, split 0.6 : 1.0 : 0.7 (the Knowledge Integrator does not evaluate), largest remainders
    assert {r: s.cap for r, s in shares.items()} == {"Profiling Scientist": 1, "Optimizer": 2, "Debugger": 2}
    # resumed in round 1 after the Optimizer's 2: its share is spent, the others' are not
    resumed = RunState(config=config, role_evaluations={(1, "Optimizer"): 2})
    again = evaluation_shares(resumed, team, 1, roles)
    assert {r: (s.cap, s.remaining) for r, s in again.items()} == {
        "Profiling Scientist": (1, 1),
        "Optimizer": (2, 0),
        "Debugger": (2, 2),
    }
    assert (
        evaluation_shares(RunState(config=config.model_copy(update={"evaluation_budget": None})), team, 1, roles) == {}
    )
    assert split_whole(7, {"a": 1.0, "b": 1.0, "c": 1.0}) == {"a": 3, "b": 2, "c": 2}
    assert sum(split_whole(101, {"a": 0.3, "b": 0.7, "c": 0.6}).values()) == 101


class _Counting:
    name = "evaluate"
    description = "evaluates"
    input_model = EvaluateInput

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def run(self, args: EvaluateInput) -> ToolResult:
        self.calls += 1
        if self.fail:
            return ToolResult(content="the workspace has no kernel.cpp", is_error=True)
        return ToolResult(content="PASSED 1.2x", data={"status": "PASSED"})


def test_the_metered_evaluate_refuses_past_the_share_before_evaluating() -> None:
    inner = _Counting()
    share = EvaluationShare("Optimizer", 2)
    tool = MeteredEvaluate(inner, share)
    inner.fail = True
    assert tool.run(EvaluateInput()).is_error and share.remaining == 2  # nothing evaluated: nothing spent
    inner.fail = False
    assert [tool.run(EvaluateInput()).is_error for _ in range(2)] == [False, False]
    refused = tool.run(EvaluateInput())
    assert refused.is_error and refused.data == {"refused": "evaluation_budget"} and inner.calls == 3
    assert refused.content.startswith(EVALUATIONS_REFUSED) and "Optimizer's share of this round (2 evaluations" in (
        refused.content
    )


# -- summaries and the closing session --------------------------------------------------------------------------


def _run(arm: str, seed: int, speedup: float | None, task: str = "k", faster: int = 2) -> RunResult:
    final = FinalTiming(
        status="PASSED" if speedup else "INCORRECT_NUMERICAL",
        speedup=speedup,
        ci=(speedup * 0.9, speedup * 1.1) if speedup else None,
        faster=faster,
        total=2,
        of_baseline=speedup / 2 if speedup else None,
    )
    return RunResult(
        task=task,
        arm=arm,
        mode=arm,
        seed=seed,
        run=f"{arm}-{seed}",
        stop="rounds",
        wall_s=10.0,
        tokens=100 * (seed + 1),
        cost_usd=0.5,
        evaluations=6,
        best=None,
        own_speedup=None,
        final=final,
    )


def test_an_arms_summary_averages_its_seeds_and_counts_a_failed_result_apart() -> None:
    arm = Arm(name="fixed", mode="fixed")
    summary = summarize_arm(arm, [_run("fixed", 0, 1.0), _run("fixed", 1, 4.0, faster=1), _run("fixed", 2, None)])
    assert summary.seeds == 3 and summary.failed == 1
    assert summary.speedup.mean == pytest.approx(2.0) and summary.of_baseline == pytest.approx(1.0)
    assert summary.faster_fraction == pytest.approx(3 / 4)  # of the passing results' workloads
    assert summary.tokens == pytest.approx(200) and summary.cost_usd == pytest.approx(0.5) and summary.wall_s == 10
    one = summarize_arm(arm, [_run("fixed", 0, 1.5)])
    assert one.speedup.ci == pytest.approx((1.35, 1.65))  # one seed: its final timing's own interval
    nothing = summarize_arm(arm, [_run("fixed", 0, None)])
    assert nothing.speedup.mean is None and nothing.failed == 1


def test_over_several_tasks_a_seed_is_the_geomean_of_its_tasks() -> None:
    arm = Arm(name="single", mode="single")
    runs = [
        _run("single", 0, 1.0, "a"),
        _run("single", 0, 4.0, "b"),
        _run("single", 1, 2.0, "a"),
        _run("single", 1, 2.0, "b"),
    ]
    overall = summarize_overall(arm, runs)
    assert overall.seeds == 2 and overall.speedup.mean == pytest.approx(2.0) and overall.failed == 0
    assert overall.speedup.ci == pytest.approx((2.0, 2.0))
    assert overall.tokens == pytest.approx(300)  # per seed, both tasks' runs together
    failed = summarize_overall(arm, [*runs[:3], _run("single", 1, None, "b")])
    assert failed.failed == 1 and failed.speedup.mean == pytest.approx(2.0)


def _solution(name: str) -> Solution:
    return Solution.model_validate(
        {
            "name": name,
            "definition": "scale_add_f32",
            "author": "t",
            "spec": {"language": "cpp", "target_hardware": ["cpu"], "entry_point": "k.cpp::scale_add"},
            "sources": [{"path": "k.cpp", "content": f"// {name}\n"}],
        }
    )


def test_the_closing_session_times_every_result_against_the_start_after_a_control() -> None:
    speeds = {"start": 1.0, "a": 1.5, "b": 0.8, "c": 2.0}

    def versus(solution: Solution, baseline: Solution) -> object:
        return scripted_result(solution.name, {"w1": speeds[solution.name] / speeds[baseline.name], "w2": 1.0})

    def alone(solution: Solution) -> object:  # against the task's baseline: the start is 0.25x of it
        return scripted_result(solution.name, {"w1": 0.25, "w2": 0.25})

    fake = FakeEvaluations(alone, versus)  # type: ignore[arg-type]
    start = _solution("start")
    results = [_solution("a"), _solution("b"), start, _solution("c")]
    lines: list[str] = []
    control, factor, finals = closing_session(fake, start, False, results, 3, lines.append)
    assert control is not None and control.speedup == pytest.approx(1.0)
    assert factor == pytest.approx(0.25)
    assert [f.speedup for f in finals] == pytest.approx([math.sqrt(1.5), math.sqrt(0.8), 1.0, math.sqrt(2.0)])
    assert finals[0].of_baseline == pytest.approx(math.sqrt(1.5) * 0.25)
    assert all(f.status == EvaluationStatus.PASSED.value for f in finals)
    # the control first, then the baseline, then the results in a shuffled order, every one against the start
    assert [s.name for s in fake.calls[:2]] == ["start", "start"] and fake.baselines[1] is None
    assert sorted(s.name for s in fake.calls[2:]) == ["a", "b", "c", "start"]
    assert all(b is start for b in fake.baselines[2:])
    assert len(lines) == 2 + len(results)
    # the start is the task's baseline: no extra timing, and the fraction of the baseline is the speedup
    fake2 = FakeEvaluations(alone, versus)  # type: ignore[arg-type]
    _, factor2, finals2 = closing_session(fake2, start, True, results, 3)
    assert factor2 == 1.0 and finals2[3].of_baseline == pytest.approx(math.sqrt(2.0)) and len(fake2.calls) == 5
