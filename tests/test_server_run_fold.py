"""The language server's fold of a run's journal: the same state as the supervisor's fold without per-workload
outcomes (read back from the journal by candidate), only appended bytes read on an update, earlier states left
as they were, a torn last line waited for, a rewritten journal folded again, a bad line or a journal of another
format version reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsp_support import evolved_repo

from evoteam.server.run_fold import RunFold
from evoteam.supervisor.journal import Journal, JournalError
from evoteam.supervisor.state import RunState, fold

pytestmark = pytest.mark.integration


@pytest.fixture
def journal(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    repo, run = evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")
    return repo / ".evoteam" / "runs" / run / "journal.jsonl"


def without_workloads(state: RunState) -> RunState:
    lean = state.model_copy(deep=True)
    for candidate in lean.candidates.values():
        if candidate.record is not None:
            candidate.record.workloads = []
    for finished in lean.rounds_finished:
        for record in finished.candidates:
            record.workloads = []
    return lean


def test_the_state_is_the_supervisors_without_workloads_which_read_back_per_candidate(journal: Path) -> None:
    full = fold(Journal(journal).events())
    source = RunFold(journal)
    assert source.update() is True
    assert source.state == without_workloads(full)
    evaluated = [c for c in full.candidates.values() if c.record is not None]
    assert evaluated and all(c.record and c.record.workloads for c in evaluated)
    for candidate in evaluated:
        assert candidate.record is not None
        assert source.workloads(candidate.id) == candidate.record.workloads
        assert source.state.candidates[candidate.id].record.workloads == []  # type: ignore[union-attr]
    assert source.workloads("no-such-candidate") == []
    assert source.update() is False


def test_an_update_folds_only_what_was_appended_and_leaves_earlier_states_alone(journal: Path) -> None:
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"kind":"evaluated"' in line)
    journal.write_bytes(b"".join(lines[:cut]))
    source = RunFold(journal)
    source.update()
    before = source.state
    waiting = [c.id for c in before.candidates.values() if c.record is None]
    assert waiting
    with journal.open("ab") as handle:
        handle.write(b"".join(lines[cut:]))
        handle.write(b'{"data":{"best":null,"reason":"cancelled"},"kind":"run_fin')  # torn: its writer is not done
    expected = without_workloads(fold(Journal(journal).events()))
    # Poison what was read already: were it read again, the update would fail.
    journal.write_bytes(b"[" + journal.read_bytes()[1:])
    with pytest.raises(JournalError):
        RunFold(journal).update()
    assert source.update() is True
    assert source.state == expected
    assert all(before.candidates[c].record is None for c in waiting)  # the earlier state did not change
    assert all(source.state.candidates[c].record is not None for c in waiting)
    assert source.update() is False
    with journal.open("ab") as handle:
        handle.write(b'ished","seq":999999}\n')  # the torn line, finished
    assert source.update() is True and source.state.finished == "cancelled"


def test_a_rewritten_or_shortened_journal_is_folded_again_from_its_start(journal: Path) -> None:
    source = RunFold(journal)
    source.update()
    kept = journal.read_bytes().splitlines(keepends=True)[:3]  # the version line, run_started and base
    journal.write_bytes(b"".join(kept))
    assert source.update() is True
    assert source.state.candidates == {} and source.state.config is not None
    sha = json.loads(kept[2])["data"]["sha"]
    journal.write_bytes(b"".join(kept).replace(sha.encode(), b"f" * 40))  # the same length, another base
    assert source.update() is True and source.state.base == "f" * 40
    good = source.state
    journal.write_bytes(b'{"seq": 0, "kind": ""}\n' + b"".join(kept))  # rewritten, and not a journal
    with pytest.raises(JournalError, match="is not an evoteam journal"):
        source.update()
    assert source.state is good
    journal.write_bytes(b"".join(kept).replace(b'"version":2', b'"version":3'))
    with pytest.raises(JournalError, match=r"has format version 3; this evoteam reads 2$"):
        source.update()
    assert source.state is good


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"seq": 1, "kind": ""}\n', r"journal.jsonl:\d+: not a journal event"),
        (b'{"seq": 1, "kind": "evaluated", "data": {"record": {"id": "ghost"}}}\n', r"journal.jsonl:\d+: not a"),
        (
            b'{"seq": 1, "kind": "evaluated", "data": {"record": {"id": "ghost", "round": 1, "role": "R", '
            b'"status": "PASSED"}}}\n',
            "does not fit the run: evaluated 'ghost'",
        ),
    ],
)
def test_a_line_that_is_no_event_is_reported_and_the_state_kept(journal: Path, line: bytes, message: str) -> None:
    source = RunFold(journal)
    source.update()
    good = source.state
    with journal.open("ab") as handle:
        handle.write(line)
    with pytest.raises(JournalError, match=message):
        source.update()
    assert source.state is good


def test_a_round_record_shares_its_candidates_records(journal: Path) -> None:
    state = fold(Journal(journal).events())
    [finished] = state.rounds_finished
    assert finished.candidates
    for record in finished.candidates:
        assert record is state.candidates[record.id].record
