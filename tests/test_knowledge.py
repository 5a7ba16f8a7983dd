"""The knowledge store: appends to index.jsonl and Markdown, reading back, queries, torn lines, known failures."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evoteam.roles.knowledge import Entry, Evidence, Kind, KnowledgeStore

pytestmark = pytest.mark.unit


def fixed_clock() -> datetime:
    return datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    return KnowledgeStore(tmp_path, "rmsnorm", clock=fixed_clock)


def test_add_writes_one_json_line_and_a_readable_markdown_section(store: KnowledgeStore, tmp_path: Path) -> None:
    evidence = Evidence(candidate="rmsnorm-r1-opt-1", status="PASSED", numbers={"geomean_speedup": 1.31})
    entry = store.add(Kind.STRATEGY, "Vectorize  the row\nloop", "8 floats per step", evidence, "Optimizer", "opt-1", 1)
    assert store.folder == tmp_path / ".evoteam" / "knowledge" / "rmsnorm"
    assert entry.title == "Vectorize the row loop"
    [line] = store.index.read_text().splitlines()
    data = json.loads(line)
    assert data == {
        "id": entry.id,
        "kind": "strategy",
        "title": "Vectorize the row loop",
        "body": "8 floats per step",
        "evidence": {"candidate": "rmsnorm-r1-opt-1", "status": "PASSED", "numbers": {"geomean_speedup": 1.31}},
        "role": "Optimizer",
        "agent": "opt-1",
        "round": 1,
        "timestamp": "2025-03-01T12:00:00+00:00",
    }
    markdown = store.markdown(Kind.STRATEGY).read_text()
    assert markdown.startswith("# Verified strategies — rmsnorm\n")
    assert "## Vectorize the row loop" in markdown
    assert "Evidence: rmsnorm-r1-opt-1, PASSED, geomean_speedup=1.31" in markdown
    store.add(Kind.STRATEGY, "Second", "more")
    assert store.markdown(Kind.STRATEGY).read_text().count("# Verified strategies") == 1
    assert not store.markdown(Kind.HARDWARE).exists()


def test_entries_survive_a_new_store_instance(store: KnowledgeStore, tmp_path: Path) -> None:
    first = store.add(Kind.HARDWARE, "AVX-512 available", role="Profiling Scientist")
    second = store.add(Kind.PLAN, "Tile rows by 4")
    again = KnowledgeStore(tmp_path, "rmsnorm")
    assert [e.id for e in again.entries()] == [first.id, second.id]
    assert again.entries()[0] == first
    assert KnowledgeStore(tmp_path, "other").entries() == []


def test_query_by_kind_and_words_newest_first(store: KnowledgeStore) -> None:
    a = store.add(Kind.STRATEGY, "Use float4 loads", "aligned rows only")
    b = store.add(Kind.FAILED_ATTEMPT, "Prefetch two rows ahead", "no gain", Evidence(numbers={"speedup": 0.99}))
    c = store.add(Kind.STRATEGY, "Fuse the two passes", "one read of each row")
    assert [e.id for e in store.query(Kind.STRATEGY)] == [c.id, a.id]
    assert [e.id for e in store.query(text="ROWS")] == [b.id, a.id]
    assert [e.id for e in store.query(text="aligned rows")] == [a.id]
    assert [e.id for e in store.query(text="row")] == [c.id, b.id, a.id]
    assert [e.id for e in store.query(text="speedup=0.99")] == [b.id]
    assert [e.id for e in store.query(text="fuse passes")] == [c.id]
    assert store.query(Kind.HARDWARE) == []
    assert [e.id for e in store.query(limit=1)] == [c.id]


def test_a_torn_last_line_is_skipped_and_the_next_append_stands_alone(store: KnowledgeStore) -> None:
    kept = store.add(Kind.STRATEGY, "Keep me")
    with store.index.open("a") as f:
        f.write('{"id": "torn", "kind": "strategy", "title": "half writ')  # killed mid-append
    assert [e.id for e in store.entries()] == [kept.id]
    after = store.add(Kind.PLAN, "After the crash")
    assert [e.id for e in store.entries()] == [kept.id, after.id]
    lines = store.index.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["id"] == after.id


def test_lines_that_are_not_entries_are_skipped(store: KnowledgeStore) -> None:
    store.folder.mkdir(parents=True)
    store.index.write_text('\n{"id": "x", "kind": "nonsense", "title": "t", "timestamp": "now"}\n[1, 2]\n')
    assert store.entries() == []


def test_is_known_failure_finds_a_rephrased_idea_and_nothing_unrelated(store: KnowledgeStore) -> None:
    failed = store.add(
        Kind.FAILED_ATTEMPT,
        "Unroll the inner reduction loop by 8",
        "slower: register pressure, spills",
        Evidence(candidate="c3", status="PASSED", numbers={"geomean_speedup": 0.91}),
    )
    store.add(Kind.STRATEGY, "Unroll the outer loop", "helped")
    assert store.is_known_failure("unrolling the inner reduction loop 8 times") == failed
    assert store.is_known_failure("Inner loop unrolled by 8") == failed
    assert store.is_known_failure("use OpenMP over rows") is None
    assert store.is_known_failure("loop") is None  # one shared word is not a match
    assert store.is_known_failure("") is None


def test_summary_puts_the_plan_first_and_respects_the_limit(store: KnowledgeStore) -> None:
    assert store.summary() == ""
    store.add(Kind.PLAN, "Old plan")
    for i in range(5):
        store.add(Kind.STRATEGY, f"Strategy {i}", role="Optimizer", round=i)
    store.add(Kind.FAILED_ATTEMPT, "Failure A", evidence=Evidence(status="INCORRECT_NUMERICAL"))
    store.add(Kind.PLAN, "New plan", "fuse, then tile")
    summary = store.summary(limit=4)
    assert summary.startswith("Current plan: New plan\nfuse, then tile\n\nVerified strategies:\n")
    assert "Old plan" not in summary
    assert summary.count("- [strategy]") == 4
    assert "Strategy 4 (Optimizer, round 4)" in summary and "Strategy 0" not in summary
    assert "Failure A" not in summary
    summary = store.summary(limit=10)
    assert "Failed attempts:\n- [failed_attempt] Failure A (round 0) [INCORRECT_NUMERICAL]" in summary


def test_concurrent_appends_all_land_whole(store: KnowledgeStore) -> None:
    def write(n: int) -> None:
        for i in range(20):
            store.add(Kind.HARDWARE, f"thread {n} note {i}", "x" * 500)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = store.entries()
    assert len(entries) == 80 and len({e.id for e in entries}) == 80
    assert all(isinstance(e, Entry) for e in entries)
    assert store.markdown(Kind.HARDWARE).read_text().count("\n## thread ") == 80


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_kernel_names_that_are_not_one_folder_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid kernel name"):
        KnowledgeStore(tmp_path, name)


def test_the_supervisors_policy_retires_quarantines_and_verifies_entries(store: KnowledgeStore) -> None:
    unroll = store.add(Kind.FAILED_ATTEMPT, "unroll the inner loop by 8", "no gain", round=1)
    tiles = store.add(Kind.STRATEGY, "64-wide tiles", "felt faster", round=1)
    vector = store.add(Kind.HARDWARE, "float4 loads coalesce", round=1)
    old = store.add(Kind.PLAN, "profile first", round=1)
    assert store.is_known_failure("unrolling the inner loop 8 times") == unroll
    assert store.set_status(unroll.id, "quarantined", "measured on a busy machine", round=2)
    assert not store.set_status(unroll.id, "quarantined", "again")  # the policy it has already: nothing written
    assert store.is_known_failure("unrolling the inner loop 8 times") is None  # nobody avoids it any more
    measured = Evidence(candidate="r02-opt-0-abc", status="PASSED", speedup=1.2, ci=(1.1, 1.3), over="the start")
    store.set_status(vector.id, "verified", "r02 measured it", measured, round=2)
    store.set_status(old.id, "retired", "superseded", round=2)
    shown = {e.id: e for e in store.entries()}
    assert old.id not in shown and shown[tiles.id].kind == Kind.STRATEGY
    assert shown[unroll.id].kind == Kind.QUARANTINED and shown[vector.id].kind == Kind.STRATEGY
    assert shown[vector.id].evidence == measured
    assert {e.id for e in store.entries(raw=True)} == {unroll.id, tiles.id, vector.id, old.id}  # nothing lost
    summary = store.summary()
    assert "Quarantined by the supervisor (do not rely on these):\n- [quarantined] unroll" in summary
    assert "measured 1.200x [1.100, 1.300] over the start" in summary and "profile first" not in summary
    assert store.plan() is None
    with pytest.raises(KeyError, match="no knowledge entry"):
        store.set_status("nope", "retired")
