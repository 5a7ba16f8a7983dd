"""The run journal: fsynced appends, contiguous sequence numbers, torn last lines skipped and repaired, and
nothing acknowledged lost when the writer is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evoteam.supervisor.journal import Journal, JournalError
from evoteam.supervisor.lock import KernelLock, RunLocked


def test_appends_are_numbered_and_read_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "run" / "journal.jsonl")
    assert journal.events() == []
    journal.append("run_started", {"kernel": "k"})
    journal.append("round_started", {"round": 1})
    again = Journal(journal.path)
    again.append("round_finished", {"round": 1})
    events = again.events()
    assert [(e.seq, e.kind) for e in events] == [(0, "run_started"), (1, "round_started"), (2, "round_finished")]
    assert events[0].data == {"kernel": "k"}


def test_threads_never_interleave_or_reuse_numbers(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")

    def work(n: int) -> None:
        for i in range(50):
            journal.append("tick", {"thread": n, "i": i})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = journal.events()
    assert [e.seq for e in events] == list(range(200))
    for n in range(4):
        assert [e.data["i"] for e in events if e.data["thread"] == n] == list(range(50))


def test_a_torn_last_line_is_skipped_then_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append("a")
    with path.open("ab") as handle:
        handle.write(b'{"seq":1,"kind":"b","da')
    assert [e.kind for e in Journal(path).events()] == ["a"]
    fresh = Journal(path)
    fresh.append("c")
    assert [(e.seq, e.kind) for e in fresh.events()] == [(0, "a"), (1, "c")]
    assert path.read_bytes().count(b"\n") == 2


def test_a_whole_last_event_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"seq":0,"kind":"a","data":{}}')
    journal = Journal(path)
    journal.append("b")
    assert [(e.seq, e.kind) for e in journal.events()] == [(0, "a"), (1, "b")]


def test_a_corrupt_line_in_the_middle_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"seq":0,"kind":"a","data":{}}\n{"nope":1}\n{"seq":1,"kind":"b","data":{}}\n')
    with pytest.raises(JournalError, match=r"journal.jsonl:2: not a journal event"):
        Journal(path).events()


_WRITER = """
import sys
from pathlib import Path
from evoteam.supervisor.journal import Journal
journal = Journal(Path(sys.argv[1]))
i = 0
while True:
    journal.append("tick", {"i": i, "pad": "x" * (i % 200)})
    print(i, flush=True)
    i += 1
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.4])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "journal.jsonl"
    with subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "0"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        acknowledged = [int(line) for line in proc.stdout.read().split()]
    events = Journal(path).events()
    last_ack = acknowledged[-1] if acknowledged else 0
    assert len(events) >= last_ack + 1
    assert [e.data["i"] for e in events] == list(range(len(events)))
    Journal(path).append("after")  # appending after the kill keeps one event per line
    assert Journal(path).events()[-1].seq == len(events)


def test_a_second_run_on_the_same_kernel_is_refused_and_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    with KernelLock(tmp_path, "rmsnorm", "run-a"):
        with pytest.raises(RunLocked, match=r"being evolved by run run-a \(pid \d+\)"):
            KernelLock(tmp_path, "rmsnorm", "run-b").acquire()
        with KernelLock(tmp_path, "other", "run-c"):
            pass
    script = (
        "import sys, time; from pathlib import Path; from evoteam.supervisor.lock import KernelLock; "
        "KernelLock(Path(sys.argv[1]), 'k', 'held').acquire(); print('ok', flush=True); time.sleep(60)"
    )
    with subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        with pytest.raises(RunLocked, match="held"):
            KernelLock(tmp_path, "k", "mine").acquire()
        holder.kill()
    with KernelLock(tmp_path, "k", "mine"):
        pass
