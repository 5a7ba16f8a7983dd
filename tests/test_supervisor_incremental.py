"""The supervisor reads its journal once per start, however long the run: the events it writes are applied to its
in-memory state as they are appended, so a round costs no fold of the run so far. Shown with fakes (an in-memory
journal that counts its reads, in-memory branches, scripted agents and evaluations): the reads and the lines
validated while running 2 or 8 rounds, the state at the end against a replay of the journal, and a resume from
a journal cut mid-round (one read, nothing recorded twice)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import KERNELS, scale_add_task
from evoteam.gpu_bench.api import CandidateResult, KernelTask, Solution
from evoteam.roles.agent import AgentEvent, EventSink
from evoteam.roles.agent_api import Agent, AgentContext, AgentReport
from evoteam.roles.llm import Usage
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.evaluation import EvaluationCache, FakeEvaluations, scripted_result
from evoteam.supervisor import journal as journal_module
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.events import Submitted
from evoteam.supervisor.git_store import MemoryStore
from evoteam.supervisor.journal import Journal, MemoryFile
from evoteam.supervisor.loop import RunServices, Supervisor
from evoteam.supervisor.reporting import RecordingReporter
from evoteam.supervisor.state import RunState, fold
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.unit


class ScriptedAgent:
    """Writes its own variant of the kernel (the same for the same round and agent), spends 100 tokens, reports
    one tool step and submits."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        base = context.workspace.root.joinpath("kernel.cpp").read_text().split("// variant")[0]
        variant = f"{base}// variant {a.round}.{len(a.agent_id)}\n"
        context.toolbox.call("write", {"path": "kernel.cpp", "content": variant})
        context.budget.charge(Usage(input_tokens=100), a.role.name, a.agent_id, "scripted")
        self.sink(AgentEvent(kind="tool", role=a.role.name, agent_id=a.agent_id, turn=1, tool="write", result="ok"))
        submitted = context.toolbox.call("submit_candidate", {"rationale": f"variant of round {a.round}"})
        assert not submitted.is_error, submitted.content
        return AgentReport(
            role=a.role.name, agent_id=a.agent_id, stop="end_turn", submissions=list(context.submissions), turns=1
        )


def agents(role: RoleSpec, round_number: int, index: int, sink: EventSink, stop: object) -> Agent | None:
    return ScriptedAgent(sink) if "submit_candidate" in role.tools else None  # the others sit out


def speedup_of(solution: Solution) -> CandidateResult:
    found = re.search(r"// variant (\d+)\.(\d+)", solution.sources[0].content)
    speedup = 1.0 + int(found.group(1)) / 10 + int(found.group(2)) / 100 if found else 1.0
    return scripted_result(solution.name, {"small-1000": speedup, "large-65536": speedup})


class Fixture:
    def __init__(self, folder: Path, rounds: int) -> None:
        folder.mkdir()
        shutil.copyfile(KERNELS / "honest.cpp", folder / "kernel.cpp")
        self.folder = folder
        self.task: KernelTask = scale_add_task(source=folder / "kernel.cpp")
        self.file = MemoryFile()
        self.store = MemoryStore(folder)
        self.reporter = RecordingReporter()
        self.evaluations = FakeEvaluations(speedup_of)
        self.config = RunConfig(run="run", kernel="scale_add", config="evoteam.toml", rounds=rounds, llm="offline")

    def supervisor(self) -> Supervisor:
        cache = EvaluationCache(self.evaluations)

        def evaluations(team: Team, incumbent: Solution | None) -> EvaluationCache:
            return cache

        services = RunServices(task=self.task, evaluations=evaluations, agents=agents, reporter=self.reporter)
        journal = Journal(self.folder / "journal.jsonl", self.file)
        return Supervisor(self.folder, "run", services, store=self.store, journal=journal)


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many journal lines were validated (``journal.decode`` calls), by count."""
    calls: list[int] = []
    decode = journal_module.decode

    def counting(raw: object, where: str) -> journal_module.Entry:
        calls.append(1)
        return decode(raw, where)

    monkeypatch.setattr(journal_module, "decode", counting)
    return calls


def replay(data: bytes) -> RunState:
    return fold(Journal(Path("journal.jsonl"), MemoryFile(data)).events())


@pytest.mark.parametrize("rounds", [2, 8])
def test_a_run_reads_and_validates_its_journal_once_however_many_rounds(
    tmp_path: Path, validations: list[int], rounds: int
) -> None:
    fx = Fixture(tmp_path / "repo", rounds)
    supervisor = fx.supervisor()
    supervisor.start(fx.config)
    size, reads, read_bytes = len(fx.file.data), fx.file.reads, fx.file.bytes_read
    validations.clear()
    state = supervisor.run()

    assert fx.file.reads - reads == 1  # the open (a resume's replay); no step of a round reads it again
    assert fx.file.bytes_read - read_bytes == size  # what the journal held at the open, once
    assert len(validations) == 2  # its lines then, run_started and base, validated once each
    assert len(fx.file.data) > 10 * size  # while the run wrote many more
    assert [r.round for r in state.rounds_finished] == list(range(1, rounds + 1)) and state.finished == "rounds"
    assert state == replay(fx.file.data)  # the state built as events were appended is the replay's
    assert len(state.candidates) >= rounds and all(c.sha and c.record for c in state.candidates.values())
    assert sorted(fx.store.candidates) == sorted(state.candidates)
    assert state.best is not None and fx.store.best == state.candidates[state.best].sha
    assert state.spent == 100 * sum(len(r.candidates) for r in state.rounds_finished)  # each agent charged once
    assert fx.reporter.states[0].rounds_finished == [] and len(fx.reporter.states) == 2 * rounds + 1
    assert any(" submitted r01-" in line for line in fx.reporter.lines)


def test_a_resume_from_a_journal_cut_mid_round_replays_it_once_and_records_nothing_twice(
    tmp_path: Path, validations: list[int]
) -> None:
    fx = Fixture(tmp_path / "repo", 3)
    supervisor = fx.supervisor()
    supervisor.start(fx.config)
    supervisor.run()
    whole = replay(fx.file.data)
    lines = fx.file.data.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"kind":"submitted"' in line and b'"round":2' in line) + 1
    fx.file.data = b"".join(lines[:cut]) + lines[cut][:17]  # killed after round 2's first submission, mid-line
    kept = replay(fx.file.data)
    reads = fx.file.reads
    validations.clear()

    resumed = fx.supervisor().run()
    assert fx.file.reads - reads == 1 and len(validations) == cut - 1  # each event before the cut, once
    assert resumed == replay(fx.file.data) and resumed.finished == "rounds" and len(resumed.rounds_finished) == 3
    assert set(kept.candidates) <= set(resumed.candidates) == set(whole.candidates)  # the same agents, again
    events = Journal(Path("journal.jsonl"), MemoryFile(fx.file.data)).events()
    submitted = [e.id for e in events if isinstance(e, Submitted)]
    assert sorted(submitted) == sorted(resumed.candidates)  # the re-run agent's submission: recorded once
    assert [d.round for d in resumed.decisions] == [1, 2, 3]
