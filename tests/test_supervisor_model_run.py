"""A whole model-backed run, end to end: ``evoteam evolve --llm anthropic`` on the bundled CPU example, against
the fake Messages server playing a small team (kernels written, evaluated and submitted through the real tools)
and the supervisor (a JSON decision); checked with ``evoteam show --json``, the journal, git and the requests and
usage the server recorded."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, git, init_repo
from evoteam.roles.backends.anthropic_api import estimate_tokens
from evoteam.roles.backends.fake_messages_script import FakeReply, text, tool_use
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_prompt_cache import request_tokens
from evoteam.roles.builtin import builtin_role, parse_verdict

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "rmsnorm"
KERNEL = "rmsnorm_tuned.cpp"
KEY = "test-key"
WORKLOADS = 2
"""Workloads kept from the example's nine: enough to measure, quick to evaluate."""

BASE = (EXAMPLE / "kernels" / KERNEL).read_text()
_CHAIN = "    for (int l = 0; l < kLanes; ++l) sum += partial[l];\n"
_TREE = (
    "    for (int width = kLanes / 2; width > 0; width /= 2)\n"
    "      for (int l = 0; l < width; ++l) partial[l] += partial[l + width];\n"
    "    sum = partial[0];\n"
)
DETUNED = ("constexpr int kLanes = 16;", "constexpr int kLanes = 1;")
"""The start of a run: one partial sum (a serial chain of additions), the example's 16 lanes set back."""
WIDER = BASE.replace("constexpr int kLanes = 16;", "constexpr int kLanes = 32;")
"""Round 1, the Optimizer: twice the partial sums."""
BROKEN = WIDER.replace(_CHAIN, _TREE.replace("partial[0];", "partial[0]"))
"""Round 1, the Optimizer again: a tree reduction with a missing semicolon, submitted without evaluating it."""
FIXED = WIDER.replace(_CHAIN, _TREE)
"""Round 1, the Debugger: the tree reduction that compiles."""
THRESHOLD = ("if (batch_size >= 8)", "if (batch_size >= 64)")
"""Round 2, the Optimizer: threads only from 64 rows up (a str_replace on whatever the workspace holds)."""
assert BASE != WIDER != BROKEN != FIXED and THRESHOLD[0] in BASE and DETUNED[0] in BASE

Results = list[dict[str, Any]]
Play = Callable[["ScriptedTeam", int, int, Results], FakeReply]


class ScriptedTeam:
    """The responder: reads who is asking (the system prompt names the role, or is the supervisor's), the round
    (the first user message) and the turn (assistant messages so far), and answers as that member would. What
    it did not expect (a tool error, a missing compile error) is noted in ``surprises``, not raised: the
    server's thread would only drop the connection. ``verbose``: every agent reply costs that many output tokens
    (a model that thinks at length before each step; the supervisor's short answers stay as they are)."""

    def __init__(self, verbose: int | None = None) -> None:
        self.verbose = verbose
        self.surprises: list[str] = []
        self.evidence: list[dict[str, Any]] = []
        """What each supervisor call was shown (the round's evidence: its team and items)."""
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        who = speaker(body)
        if who is None:
            return self.supervise(json.loads(body["messages"][0]["content"][0]["text"]))
        role, round_number, turn = who
        last = body["messages"][-1]["content"]
        results = [b for b in last if b.get("type") == "tool_result"] if turn else []
        for result in results:
            if result.get("is_error"):
                self.surprise(f"{role} got a tool error: {str(result['content'])[:200]}")
        play = PLAYS.get(role)
        if play is None:
            return self.surprise(f"no play for the role {role}")
        reply = play(self, round_number, turn, results)
        return reply if self.verbose is None else reply.model_copy(update={"output_tokens": self.verbose})

    def surprise(self, what: str) -> FakeReply:
        with self._lock:
            self.surprises.append(what)
        return text(f"Stopping: {what}")

    def supervise(self, evidence: dict[str, Any]) -> FakeReply:
        with self._lock:
            self.evidence.append(evidence)
        candidates = [i for i in evidence["items"] if i["kind"] == "candidate"]
        if evidence["round"] == 1:
            failed = [c["id"] for c in candidates if c["facts"]["status"] != "PASSED"]
            answer: dict[str, Any] = {
                "actions": [{"action": "add_role", "role": "Disciplinarian", "before": None, "cites": failed}],
                "rationale": f"{len(failed)} candidate(s) were submitted without an evaluation ({', '.join(failed)}): "
                "a Disciplinarian checks each change before it counts.",
            }
        else:
            answer = {"actions": [], "rationale": "every change was evaluated and approved; keep the team."}
        return text("```json\n" + json.dumps(answer) + "\n```")


def speaker(body: dict[str, Any]) -> tuple[str, int, int] | None:
    """Who sent a request: (role, round, turn), from its system prompt, first message and assistant messages so
    far; None for the supervisor. A request from no one known is a test error."""
    first = body["system"][0]["text"]
    if first.startswith("You supervise a team"):
        return None
    role = re.match(r"You are the (.+?) of a small team", first)
    started = re.match(r"Round (\d+)\b", body["messages"][0]["content"][0]["text"])
    assert role is not None and started is not None, first[:200]
    return role.group(1), int(started.group(1)), sum(1 for m in body["messages"] if m["role"] == "assistant")


def _first(results: Results) -> str:
    return str(results[0]["content"]) if results else ""


def profiling_scientist(team: ScriptedTeam, round_number: int, turn: int, results: Results) -> FakeReply:
    if turn == 0:
        return tool_use("profile", {}, say="First the numbers: where the time goes per workload.")
    return text(f"Profiled the kernel of round {round_number}: {_first(results).splitlines()[0]}. The row loop "
                "dominates; the sum of squares is a serial add chain worth shortening.")  # fmt: skip


def optimizer(team: ScriptedTeam, round_number: int, turn: int, results: Results) -> FakeReply:
    if round_number == 1:
        steps = [
            lambda: tool_use("view", {"path": KERNEL}),
            lambda: tool_use("write", {"path": KERNEL, "content": WIDER}, say="Expect a shorter add chain."),
            lambda: tool_use("evaluate", {}),
            lambda: tool_use(
                "submit_candidate", {"rationale": "32 partial sums instead of 16: a shorter dependency chain"}
            ),
            lambda: tool_use("write", {"path": KERNEL, "content": BROKEN}, say="Now a tree for the partial sums."),
            lambda: tool_use("submit_candidate", {"rationale": "tree reduction of the partial sums, not a chain"}),
            lambda: text("Tried 32 lanes (evaluated, submitted) and a tree reduction (submitted unmeasured)."),
        ]
    else:
        old, new = THRESHOLD
        steps = [
            lambda: tool_use("view", {"path": KERNEL}),
            lambda: tool_use("str_replace", {"path": KERNEL, "old": old, "new": new}),
            lambda: tool_use("evaluate", {}),
            lambda: tool_use("submit_candidate", {"rationale": "threads only from 64 rows up: fewer thread start-ups"}),
            lambda: text("Raised the OpenMP threshold to 64 rows; evaluated and submitted."),
        ]
    return steps[min(turn, len(steps) - 1)]()


def debugger(team: ScriptedTeam, round_number: int, turn: int, results: Results) -> FakeReply:
    if turn == 0:
        return tool_use("evaluate", {}, say="Does the workspace's kernel still pass?")
    if round_number == 1 and turn == 1:
        if "COMPILE_ERROR" not in _first(results):
            return team.surprise(f"the Debugger expected a compile error, got: {_first(results)[:200]}")
        return tool_use("write", {"path": KERNEL, "content": FIXED}, say="A missing semicolon after partial[0].")
    if round_number == 1 and turn == 2:
        return tool_use("evaluate", {})
    if round_number == 1 and turn == 3:
        return tool_use("submit_candidate", {"rationale": "the tree reduction with its missing semicolon restored"})
    return text("The kernel builds and passes every workload." if round_number > 1 else "Fixed the compile error.")


def knowledge_integrator(team: ScriptedTeam, round_number: int, turn: int, results: Results) -> FakeReply:
    if turn == 0:
        return tool_use("read_knowledge", {})
    if round_number == 1 and turn == 1:
        note = {
            "kind": "failed_attempt",
            "title": "a tree reduction submitted without compiling it",
            "body": "The Optimizer's tree reduction missed a semicolon; the Debugger restored it.",
            "evidence": {"status": "COMPILE_ERROR"},
        }
        return tool_use("write_note", note)
    return text("The knowledge store is up to date.")


def disciplinarian(team: ScriptedTeam, round_number: int, turn: int, results: Results) -> FakeReply:
    if turn == 0:
        return tool_use("view", {"path": KERNEL})
    if turn == 1:
        return tool_use("compile", {})
    return text("The change is one idea (the OpenMP threshold) and it was evaluated.\n"
                "VERDICT: approve — one measured change, no constraint broken")  # fmt: skip


PLAYS: dict[str, Play] = {
    "Profiling Scientist": profiling_scientist,
    "Optimizer": optimizer,
    "Debugger": debugger,
    "Knowledge Integrator": knowledge_integrator,
    "Disciplinarian": disciplinarian,
}


# -- the repository, the CLI and what a run left ---------------------------------------------------------------
@dataclass
class ModelRun:
    repo: Path
    run: str
    budget: int
    shown: dict[str, Any]
    """``evoteam show RUN --json``."""
    journal: list[dict[str, Any]]
    bodies: list[dict[str, Any]]
    """Every ``/v1/messages`` request the fake server got, in order."""
    usages: list[dict[str, Any]]
    """The usage it reported for each."""
    team: ScriptedTeam

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e["data"] for e in self.journal if e["kind"] == kind]


def example_repo(root: Path) -> Path:
    """A git repository holding the bundled CPU example, its workloads cut to ``WORKLOADS`` and its tuned
    kernel set back to one lane (``DETUNED``): the scripted kernels (16 or 32 lanes) then beat the start
    beyond doubt, on a busy machine too, so the run has a best."""
    shutil.copytree(EXAMPLE, root)
    kernel = root / "kernels" / KERNEL
    kernel.write_text(BASE.replace(*DETUNED))
    workloads = root / "workloads" / "rmsnorm_h4096.jsonl"
    workloads.write_text("\n".join(workloads.read_text().splitlines()[:WORKLOADS]) + "\n")
    init_repo(root)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "example")
    return root


def evoteam(repo: Path, server: FakeMessagesServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo.parent / "home"),
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": KEY,
    }
    command = [sys.executable, "-m", "evoteam.cli.main", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=280, env=env)


def model_run(root: Path, budget: int, verbose: int | None = None) -> ModelRun:
    """``evoteam evolve rmsnorm_tuned --llm anthropic --rounds 2 --budget BUDGET`` in a new copy of the example,
    against a fake server playing ``ScriptedTeam(verbose)``, run to the end."""
    team = ScriptedTeam(verbose)
    repo = example_repo(root)
    with FakeMessagesServer(team, api_key=KEY) as server:
        args = ("evolve", "rmsnorm_tuned", "--llm", "anthropic", "--rounds", "2", "--budget", str(budget))
        done = evoteam(repo, server, *args)
        assert done.returncode == 0, done.stderr
        [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
        shown = evoteam(repo, server, "show", run, "--json")
        assert shown.returncode == 0, shown.stderr
        journal = (repo / ".evoteam" / "runs" / run / "journal.jsonl").read_text().splitlines()
        return ModelRun(
            repo=repo,
            run=run,
            budget=budget,
            shown=json.loads(shown.stdout),
            journal=[json.loads(line) for line in journal],
            bodies=server.message_bodies(),
            usages=server.usages(),
            team=team,
        )


def total(usage: dict[str, Any]) -> int:
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(int(usage.get(k) or 0) for k in keys)


def role_of(body: dict[str, Any]) -> str:
    who = speaker(body)
    return "Supervisor" if who is None else who[0]


def assert_every_call_fit(run: ModelRun) -> None:
    """What the code guarantees (``TokenBudget.check`` before every call, in ``LoopAgent.run`` and
    ``llm_decide``): a call is sent only when its input estimate (``count_tokens``, which errs high) plus its
    ``max_tokens`` fits in what the calls before it left. A provider whose input count is at most the estimate
    and whose output is at most ``max_tokens`` (the fake server, and the API) can then never take a run past its
    budget; agents in parallel check concurrently, and could each pass the same check."""
    assert len(run.usages) == len(run.bodies)
    spent = 0
    for body, usage in zip(run.bodies, run.usages, strict=True):
        needed = estimate_tokens(body) + body["max_tokens"]
        assert spent + needed <= run.budget, (role_of(body), spent, needed)
        assert usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"] <= (
            estimate_tokens(body)
        )
        assert usage["output_tokens"] <= body["max_tokens"]
        spent += total(usage)
    assert spent == run.shown["tokens"] <= run.budget


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> ModelRun:
    return model_run(tmp_path_factory.mktemp("full") / "repo", budget=1_000_000)


# -- the tests -------------------------------------------------------------------------------------------------
def test_the_scripted_kernels_are_evaluated_committed_and_the_best_is_set(full_run: ModelRun) -> None:
    run, shown = full_run, full_run.shown
    assert run.team.surprises == []
    assert shown["finished"] == "rounds" and [r["round"] for r in shown["rounds"]] == [1, 2]
    submitted = {e["id"]: e["solution"]["sources"][0]["content"] for e in run.of_kind("submitted")}
    candidates = shown["candidates"]
    assert [(c["round"], c["role"]) for c in candidates] == [
        (1, "Optimizer"),
        (1, "Optimizer"),
        (1, "Debugger"),
        (2, "Optimizer"),
    ]
    sources = [submitted[c["id"]] for c in candidates]
    assert sources[:3] == [WIDER, BROKEN, FIXED]
    assert THRESHOLD[1] in sources[3] and THRESHOLD[0] not in sources[3]  # the str_replace on round 2's start
    statuses = [c["record"]["status"] for c in candidates]
    assert statuses == ["PASSED", "COMPILE_ERROR", "PASSED", "PASSED"]  # the broken kernel did not stop the run
    for c, source in zip(candidates, sources, strict=True):
        record = c["record"]
        assert record["total"] == WORKLOADS and len(record["workloads"]) == WORKLOADS
        if record["status"] == "PASSED":
            assert record["geomean_speedup"] > 0 and all(w["speedup"] > 0 for w in record["workloads"])
            assert all(w["latency_ms"] > 0 and w["reference_latency_ms"] > 0 for w in record["workloads"])
        else:
            assert record["geomean_speedup"] is None and record["faster"] == 0
        assert git(run.repo, "show", f"{c['sha']}:kernels/{KERNEL}") == source
        branch = f"evoteam/{run.run}/round-{c['round']:02d}"
        assert c["sha"] in git(run.repo, "rev-list", branch).split()
        trailers = git(run.repo, "log", "-1", "--format=%(trailers:key=Evoteam-Status,valueonly)", c["sha"])
        assert trailers.strip() == record["status"]
    passed = [c for c in candidates if c["record"]["status"] == "PASSED"]
    best = max(passed, key=lambda c: c["record"]["geomean_speedup"])
    assert shown["best"] == best["id"] and shown["best_speedup"] == best["record"]["geomean_speedup"]
    assert git(run.repo, "rev-parse", f"evoteam/{run.run}/best").strip() == best["sha"]
    assert all(a["stop"] == "end_turn" and a["error"] is None for a in run.of_kind("agent_finished"))


def test_the_supervisor_decides_with_the_model_and_round_two_plays_its_team(full_run: ModelRun) -> None:
    run, shown = full_run, full_run.shown
    decisions = shown["decisions"]
    assert [(d["source"], d["round"]) for d in decisions] == [("llm", 1), ("llm", 2)]
    unevaluated = shown["candidates"][1]
    cited = [f"candidate:{unevaluated['id']}"]  # the model cites the evidence its action rests on
    assert decisions[0]["actions"] == [{"action": "add_role", "role": "Disciplinarian", "before": None, "cites": cited}]
    assert decisions[1]["actions"] == [] and decisions[0]["rejected"] == []
    assert unevaluated["record"]["status"] == "COMPILE_ERROR" and unevaluated["id"] in decisions[0]["rationale"]
    # what the supervisor was shown: round 1's evidence, with the team that played it
    seen = run.team.evidence[0]
    assert seen["team"]["roles"] == shown["rounds"][0]["roles"] and seen["round"] == 1
    candidates = [i for i in seen["items"] if i["kind"] == "candidate"]
    assert [c["id"] for c in candidates] == [f"candidate:{c['id']}" for c in shown["candidates"][:3]]
    assert [c["facts"]["status"] for c in candidates] == ["PASSED", "COMPILE_ERROR", "PASSED"]
    assert all(c["facts"]["parent"] == "r00-start" and "diff" in c["facts"] for c in candidates)
    kinds = {i["kind"] for i in seen["items"]}
    assert {"budget", "best", "candidate", "agent", "role"} <= kinds
    [budget] = [i for i in seen["items"] if i["id"] == "budget"]
    assert budget["facts"]["rounds_left"] == 1 and budget["facts"]["tokens_left"] > 0
    agents = [i for i in seen["items"] if i["kind"] == "agent"]
    assert any(a["facts"]["tools"].get("evaluate", 0) > 0 and a["facts"]["tokens"] > 0 for a in agents)
    round_two = [*shown["rounds"][0]["roles"], "Disciplinarian"]
    assert shown["rounds"][1]["roles"] == round_two == run.team.evidence[1]["team"]["roles"]
    played = [(e["round"], e["role"]) for e in run.of_kind("agent_finished")]
    assert played == [(1, r) for r in shown["rounds"][0]["roles"]] + [(2, r) for r in round_two]
    [review] = [a for a in run.of_kind("agent_finished") if a["role"] == "Disciplinarian"]
    verdict = parse_verdict(review["summary"])
    assert verdict is not None and verdict.decision == "approve" and review["veto"] is None
    assert not any(c["record"]["vetoed"] for c in shown["candidates"])


def test_every_call_is_charged_once_the_supervisors_included(full_run: ModelRun) -> None:
    run = full_run
    charged = run.of_kind("tokens")
    assert [t["role"] for t in charged] == [role_of(b) for b in run.bodies]  # one charge per call, in order
    assert [total(t["usage"]) for t in charged] == [total(u) for u in run.usages]
    assert [t["usage"] for t in charged] == [
        {k: u[k] for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")}
        for u in run.usages
    ]
    assert sum(t["usage"]["cache_read_input_tokens"] for t in charged) > 0  # the prompt cache was used, and counted
    supervisor = [t for t in charged if t["role"] == "Supervisor"]
    assert len(supervisor) == 2 and {t["agent"] for t in supervisor} == {"supervisor"}
    assert run.shown["tokens"] == sum(total(u) for u in run.usages)
    # a round's record counts its agents' calls and the supervisor's decision after it
    by_round = sum(r["tokens"] for r in run.shown["rounds"])
    assert by_round == run.shown["tokens"]
    assert_every_call_fit(run)


VERBOSE = 3600
"""Output tokens of each agent reply in the budget run (within the agents' max_tokens of 4096)."""
SLACK = 2000
"""What the Debugger's share holds beyond what its submission (call k) needs: covers the few tokens by which
timing numbers in tool results vary, and is less than its next call needs."""
ROUND_ONE = ("Profiling Scientist", "Optimizer", "Debugger", "Knowledge Integrator")


def cost(body: dict[str, Any]) -> int:
    """What a call of the budget run costs: its input plus VERBOSE output tokens."""
    return request_tokens(body) + VERBOSE


def test_each_role_spends_within_its_share_and_the_total_holds(full_run: ModelRun, tmp_path: Path) -> None:
    # Round 1 splits the budget between the four roles by their shares (0.6, 1.0, 0.7, 0.3). The budget is set so
    # that the Debugger's share pays for its calls through its submission (call k) and not the next one; the
    # Optimizer's share (1/0.7 of it) then pays for its first five calls (through writing the broken tree
    # reduction) and not its sixth (submitting it), so the Debugger finds the compile error in the workspace.
    weights = {role: builtin_role(role).budget_share for role in ROUND_ONE}
    calls = {role: [b for b in full_run.bodies if speaker(b) in {(role, 1, t) for t in range(9)}] for role in weights}
    mine = calls["Debugger"]
    share = sum(cost(b) for b in mine[:3]) + estimate_tokens(mine[3]) + mine[3]["max_tokens"] + SLACK
    budget = math.ceil(share * sum(weights.values()) / weights["Debugger"])
    caps = {role: int(budget * w / sum(weights.values())) for role, w in weights.items()}
    optimizer = calls["Optimizer"]
    needs = [sum(cost(b) for b in optimizer[:i]) + estimate_tokens(optimizer[i]) + 4096 for i in (4, 5)]
    assert needs[0] <= caps["Optimizer"] < needs[1], (needs, caps)  # the calibration above holds

    run = model_run(tmp_path / "repo", budget, verbose=VERBOSE)
    shown = run.shown
    assert run.team.surprises == []
    assert_every_call_fit(run)
    sent = [speaker(b) for b in run.bodies]
    assert [t for r, n, t in filter(None, sent) if (r, n) == ("Optimizer", 1)] == [0, 1, 2, 3, 4]
    assert [t for r, n, t in filter(None, sent) if (r, n) == ("Debugger", 1)] == [0, 1, 2, 3]

    # within round 1, every call a role sent fit in what its share had left; the refused ones did not
    spent = dict.fromkeys(weights, 0)
    for body, usage in zip(run.bodies, run.usages, strict=True):
        who = speaker(body)
        if who is None or who[1] != 1:
            continue
        assert spent[who[0]] + estimate_tokens(body) + body["max_tokens"] <= caps[who[0]], who
        spent[who[0]] += total(usage)
    stops = {a["role"]: a for a in run.of_kind("agent_finished") if a["round"] == 1}
    for role in ("Optimizer", "Debugger"):
        assert stops[role]["stop"] == "budget"
        refused = re.search(rf"needs up to (\d+) tokens but (\d+) remain of {role}'s share of this round \((\d+)",
                            stops[role]["error"])  # fmt: skip
        assert refused is not None, stops[role]["error"]
        assert int(refused.group(2)) == caps[role] - spent[role] < int(refused.group(1))
        assert int(refused.group(3)) == caps[role]

    # what was made before the shares ran out is all there: evaluated and committed; the unsubmitted broken
    # kernel was the Debugger's to repair
    made = [c for c in shown["candidates"] if c["record"]["round"] == 1]
    assert [(c["record"]["role"], c["record"]["status"]) for c in made] == [
        ("Optimizer", "PASSED"),
        ("Debugger", "PASSED"),
    ]
    assert all(c["sha"] for c in shown["candidates"]) and shown["best"] is not None
    assert shown["tokens"] <= budget
