"""Hardening of whole runs, as a user starts them: ``kill -9`` at many points then ``resume``, a run on a dirty
repository leaves everything of the user as it was, and two runs at once keep to their own refs.

Each test records its figure (``tests/hardening.py``) before it asserts, so the table has a row on failure too.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hardening import processes_mentioning, record

from conftest import KERNELS, SCALE_ADD_TOML, cli_env, evoteam, git, scale_add_repo

EVOLVE_ARGS = ["--rounds", "2", "--team", "fixed", "--llm", "offline", "--evaluations", "2"]
"""A small scripted run: the offline fixed team, two rounds, one candidate (the Optimizer's climb from PASSES 64
to 1 in round 1; round 2's neighbour is slower and the Debugger finds nothing to repair)."""
JOURNAL_KINDS = ("submitted", "evaluated", "committed")


def _spawn(repo: Path, args: list[str]) -> subprocess.Popen[bytes]:
    """``evoteam ARGS`` in its own process group (``killpg`` reaches it and its children), output dropped."""
    return subprocess.Popen(
        [sys.executable, "-m", "evoteam.cli.main", *args],
        cwd=repo,
        env=cli_env(repo),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class JournalTail:
    """Follows the journal of the (only) run of a repository as it grows: the kinds of its events so far.

    It reads only what was appended since the last poll, and starts over when the journal was rewritten (a
    resume cuts a torn last line off by replacing the file)."""

    def __init__(self, repo: Path) -> None:
        self.runs = repo / ".evoteam" / "runs"
        self.path: Path | None = None
        self.inode = 0
        self.offset = 0
        self.pending = b""
        self.kinds: list[str] = []

    def poll(self) -> list[str]:
        """The kinds of the events appended since the last poll."""
        if self.path is None:  # the first journal with an event (a run killed before its first has none)
            found = [p for p in self.runs.glob("*/journal.jsonl") if p.stat().st_size] if self.runs.is_dir() else []
            if not found:
                return []
            self.path = found[0]
        try:
            with self.path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                if info.st_ino != self.inode or info.st_size < self.offset:
                    self.inode, self.offset, self.pending, self.kinds = info.st_ino, 0, b"", []
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.pending = (self.pending + data).split(b"\n")
        new = [_kind(line) for line in lines if line.strip()]
        self.kinds += new
        return new

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)


def _kind(line: bytes) -> str:
    """The kind of a journal line without parsing it: its keys are sorted, so the event's own ``kind`` comes
    after everything in ``data`` (which may hold a ``kind`` of its own)."""
    key = b'"kind":"'
    at = line.rfind(key)
    end = line.find(b'"', at + len(key))
    return line[at + len(key) : end].decode() if at >= 0 and end >= 0 else ""


def _journal(run_folder: Path) -> list[dict[str, Any]]:
    path = run_folder / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _event_id(event: dict[str, Any]) -> str:
    data = event["data"]
    return str(data.get("id") or data["record"]["id"])


def _trailers(repo: Path, run: str) -> list[str]:
    """The ``Evoteam-Candidate`` trailers of every commit on the run's round branches."""
    out = git(repo, "log", "--format=%(trailers:key=Evoteam-Candidate,valueonly)", f"--branches=evoteam/{run}/round-*")
    return sorted(t for t in out.split() if t)


def _run_folders(repo: Path) -> list[Path]:
    """The run folders whose journal has started (a folder killed before its first event is not a run)."""
    runs = repo / ".evoteam" / "runs"
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if any(e["kind"] == "run_started" for e in _journal(p)))


def _check_run(repo: Path, run: str, head: str) -> list[str]:
    """What is wrong with finished run ``run``: each candidate once in the journal and on the branches, the run
    finished, the user's working tree, index and HEAD as they were, no ref lock or broken object left."""
    problems: list[str] = []
    shown_out = evoteam(repo, "show", run, "--json")
    if shown_out.returncode != 0:
        return [f"show --json failed: {shown_out.stderr.strip()[-300:]}"]
    shown = json.loads(shown_out.stdout)
    if shown["finished"] != "rounds" or [r["round"] for r in shown["rounds"]] != [1, 2]:
        problems.append(f"not finished: {shown['finished']!r}, rounds {[r['round'] for r in shown['rounds']]}")
    ids = sorted(c["id"] for c in shown["candidates"])
    if not ids or len(ids) != len(set(ids)):
        problems.append(f"candidates of show --json: {ids}")
    journal = _journal(repo / ".evoteam" / "runs" / run)
    for kind in JOURNAL_KINDS:
        recorded = sorted(_event_id(e) for e in journal if e["kind"] == kind)
        if recorded != ids:
            problems.append(f"journal {kind}: {recorded} != {ids}")
    kinds = Counter(e["kind"] for e in journal)
    once = [k for k in ("run_started", "base", "run_finished") if kinds[k] != 1]
    per_round = {
        "round_started": [e["data"]["round"] for e in journal if e["kind"] == "round_started"],
        "decision": [e["data"]["decision"]["round"] for e in journal if e["kind"] == "decision"],
        "round_finished": [e["data"]["record"]["round"] for e in journal if e["kind"] == "round_finished"],
    }
    once += [k for k, rounds in per_round.items() if sorted(rounds) != [1, 2]]
    if once:
        problems.append(f"not journaled exactly once (per round): {once}")
    trailers = _trailers(repo, run)
    if trailers != ids:
        problems.append(f"branch trailers {trailers} != {ids}")
    if (status := git(repo, "status", "--porcelain", "--ignored=no")) != "":
        problems.append(f"working tree changed: {status!r}")
    if git(repo, "rev-parse", "HEAD").strip() != head or git(repo, "symbolic-ref", "HEAD").strip() != "refs/heads/main":
        problems.append("HEAD moved")
    locks = [str(p.relative_to(repo)) for p in (repo / ".git").rglob("*.lock")]
    if locks:
        problems.append(f"lock files left in .git: {locks}")
    fsck = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    if fsck.returncode != 0 or fsck.stdout.strip():
        problems.append(f"git fsck: {(fsck.stdout + fsck.stderr).strip()[-300:]}")
    return problems


def _wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# -- kill -9 then resume -----------------------------------------------------------------------------------------


KILL_SEED = int(os.environ.get("EVOTEAM_KILL_SEED") or random.randrange(1_000_000))
"""New kill points on each run (the seed is printed); ``EVOTEAM_KILL_SEED`` repeats them, as events of the run
and fractions of the times the reference run measured (those times vary a little from run to run)."""
CHAINS, KILLS_PER_CHAIN = 4, 6
"""24 kills: 4 runs, each killed 6 times (the ``evolve``, then each ``resume`` that continues it), then resumed
to its end. Two of the runs are first killed before they exist (a fresh ``evolve`` follows)."""
BEFORE_RUN_CHAINS = 2
WORKERS = 2
"""Runs side by side, each in its own repository (the reference run is timed under the same load)."""


@dataclass(frozen=True)
class Progress:
    """One journal event of the unkilled reference run (agent events aside): the ``occurrence``-th of ``kind``,
    ``at`` seconds after the start, ``gap`` seconds before the next."""

    kind: str
    occurrence: int
    at: float
    gap: float


@dataclass(frozen=True)
class KillPoint:
    """Before the run exists: ``delay`` seconds after the start. Else ``delay`` seconds after the journal holds
    the ``occurrence``-th event of ``kind`` (a fraction of the reference's gap to its next event)."""

    delay: float
    kind: str = ""
    occurrence: int = 0

    def describe(self) -> str:
        return f"{self.kind} #{self.occurrence} +{self.delay * 1000:.0f}ms" if self.kind else f"{self.delay:.2f}s"


def _reference(folder: Path) -> tuple[float, list[Progress]]:
    """An unkilled run: its duration and its journal events (agent events aside) with their times."""
    repo = scale_add_repo(folder / "repo")
    tail = JournalTail(repo)
    start = time.monotonic()
    seen: list[tuple[str, float]] = []
    with _spawn(repo, ["evolve", "scale_add", *EVOLVE_ARGS]) as proc:
        while proc.poll() is None:
            seen += [(kind, time.monotonic() - start) for kind in tail.poll() if kind != "agent_event"]
            time.sleep(0.002)
        assert proc.returncode == 0, "the unkilled reference run failed"
    duration = time.monotonic() - start
    seen += [(kind, duration) for kind in tail.poll() if kind != "agent_event"]
    counts: Counter[str] = Counter()
    progress = []
    for n, (kind, at) in enumerate(seen):
        counts[kind] += 1
        gap = (seen[n + 1][1] if n + 1 < len(seen) else duration) - at
        progress.append(Progress(kind, counts[kind], at, max(gap, 0.0)))
    return duration, progress


def _kill_points(rng: random.Random, progress: list[Progress], chain: int) -> list[KillPoint]:
    """The kills of one run: the journal's events split into as many stretches as kills, one kill in each (so
    they land early, mid and late), at an event picked by the time that follows it (long evaluations) or
    uniformly (the short stretches: an evaluation's record, a git commit), somewhere before the next event."""
    points: list[KillPoint] = []
    targets = [p for p in progress if p.kind != "run_finished"]
    if chain < BEFORE_RUN_CHAINS:
        points.append(KillPoint(rng.uniform(0.3, 0.9 * targets[0].at)))
    stretches = KILLS_PER_CHAIN - len(points)
    for j in range(stretches):
        stretch = targets[j * len(targets) // stretches : (j + 1) * len(targets) // stretches]
        weights = [p.gap + 1e-3 for p in stretch] if rng.random() < 0.5 else [1.0] * len(stretch)
        [pick] = rng.choices(stretch, weights)
        points.append(KillPoint(rng.uniform(0.0, min(pick.gap, 8.0)), pick.kind, pick.occurrence))
    return points


@dataclass
class Kill:
    point: KillPoint
    command: str
    at: float = 0.0
    """Seconds after the process started that the kill landed."""
    landed: bool = True
    """False when the process had finished before its kill point (not a kill)."""
    before_run: bool = False
    passed: bool = False
    """The journal had passed the kill point before this process appended anything: killed while starting."""
    last_event: str = ""
    torn_commit: bool = False
    """A candidate was on its branch but not yet ``committed`` in the journal: the kill fell inside a commit."""
    strays: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class Chain:
    kills: list[Kill] = field(default_factory=list)
    run: str | None = None
    problems: list[str] = field(default_factory=list)


def _kill_once(repo: Path, args: list[str], point: KillPoint) -> Kill:
    kill = Kill(point, args[0])
    tail = JournalTail(repo)
    tail.poll()
    kill.passed = bool(point.kind) and tail.count(point.kind) >= point.occurrence
    start = time.monotonic()
    with _spawn(repo, args) as proc:
        due_at = start + point.delay if not point.kind else None
        while proc.poll() is None:
            tail.poll()
            if due_at is None and tail.count(point.kind) >= point.occurrence:
                due_at = time.monotonic() + point.delay
            if due_at is not None and time.monotonic() >= due_at:
                kill.at = time.monotonic() - start
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
        kill.landed = proc.wait() == -signal.SIGKILL
    home = str(repo.parent / "home")
    _wait_for(lambda: not processes_mentioning(home, zombies=False), timeout=10)
    kill.strays = len(processes_mentioning(home, zombies=False))
    return kill


def _after_a_kill(repo: Path, run: str, kill: Kill) -> None:
    """What a kill may leave: events and commits of a candidate at most once, nothing of the user's touched."""
    journal = _journal(repo / ".evoteam" / "runs" / run)
    kill.last_event = next((e["kind"] for e in reversed(journal) if e["kind"] != "agent_event"), "")
    if journal and journal[-1]["kind"] == "agent_event":
        kill.last_event = "agent_event"
    ids = {kind: [_event_id(e) for e in journal if e["kind"] == kind] for kind in JOURNAL_KINDS}
    for kind, recorded in ids.items():
        if len(recorded) != len(set(recorded)):
            kill.problems.append(f"{kind} twice in the journal: {sorted(recorded)}")
    if not set(ids["committed"]) <= set(ids["evaluated"]) <= set(ids["submitted"]):
        kill.problems.append(f"journal out of order: {ids}")
    trailers = _trailers(repo, run)
    if len(trailers) != len(set(trailers)) or not set(trailers) <= set(ids["submitted"]):
        kill.problems.append(f"branch trailers {trailers} vs submitted {sorted(ids['submitted'])}")
    kill.torn_commit = bool(set(trailers) - set(ids["committed"]))
    if (status := git(repo, "status", "--porcelain")) != "":
        kill.problems.append(f"working tree changed: {status!r}")


def _chain(folder: Path, points: list[KillPoint]) -> Chain:
    """One run killed at each point (the process that carries it on each time), then resumed to its end."""
    chain = Chain()
    repo = scale_add_repo(folder / "repo")
    head = git(repo, "rev-parse", "HEAD").strip()
    for point in points:
        args = ["resume", chain.run] if chain.run else ["evolve", "scale_add", *EVOLVE_ARGS]
        kill = _kill_once(repo, args, point)
        chain.kills.append(kill)
        if not kill.landed:
            break
        if chain.run is None:
            folders = _run_folders(repo)
            if not folders:
                kill.before_run = True
                continue
            chain.run = folders[0].name
        _after_a_kill(repo, chain.run, kill)
    args = ["resume", chain.run] if chain.run else ["evolve", "scale_add", *EVOLVE_ARGS]
    last = evoteam(repo, *args)
    if last.returncode != 0:
        chain.problems.append(f"the last {args[0]} exited {last.returncode}: {last.stderr.strip()[-400:]}")
        return chain
    folders = _run_folders(repo)
    if len(folders) != 1 or evoteam(repo, "runs").returncode != 0:
        chain.problems.append(f"runs: {[p.name for p in folders]}")
        return chain
    chain.run = folders[0].name
    chain.problems += _check_run(repo, chain.run, head)
    return chain


def _phase(kill: Kill) -> str:
    """Where in the run a kill landed, from the last event it left in the journal."""
    if kill.passed:
        return "while a resume started"
    if kill.torn_commit or kill.last_event == "evaluated":
        return "committing a candidate"  # its record is journaled, its commit is not (yet)
    if kill.last_event in ("round_started", "agent_event", "agent_finished", "submitted"):
        return "agents at work (their builds and evaluations)"
    if kill.last_event == "run_finished":
        return "after the last event"
    return "between candidates and rounds"


@pytest.mark.hardening
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_kill_9_at_24_points_then_resume_records_every_candidate_exactly_once(tmp_path: Path) -> None:
    print(f"kill seed {KILL_SEED} (EVOTEAM_KILL_SEED={KILL_SEED} repeats these kill points)")
    with ThreadPoolExecutor(WORKERS) as pool:
        references = list(pool.map(_reference, [tmp_path / f"reference-{n}" for n in range(WORKERS)]))
    duration, progress = references[0]
    print(f"unkilled run ({WORKERS} side by side): {duration:.1f}s, {len(progress)} journal events (agents' aside)")
    rng = random.Random(KILL_SEED)
    plans = [_kill_points(rng, progress, c) for c in range(CHAINS)]
    with ThreadPoolExecutor(WORKERS) as pool:
        chains = list(pool.map(_chain, [tmp_path / f"run-{c}" for c in range(CHAINS)], plans))

    for c, chain in enumerate(chains):
        print(f"run {c} ({chain.run}): {'; '.join(chain.problems) or 'ok'}")
        for kill in chain.kills:
            if not kill.landed:
                state = "missed (the run had finished)"
            elif kill.before_run:
                state = "before the run existed"
            else:
                state = f"last event {kill.last_event}" + (" (killed while starting)" if kill.passed else "")
            torn = ", inside a commit" if kill.torn_commit else ""
            print(
                f"  kill {kill.command} at {kill.at:5.2f}s ({kill.point.describe()}): {state}{torn}: "
                f"{'; '.join(kill.problems) or 'ok'}"
            )
    kills = [k for chain in chains for k in chain.kills if k.landed]
    before = sum(k.before_run for k in kills)
    phases = Counter(_phase(k) for k in kills if not k.before_run)
    spread = ", ".join(f"{n} {phase}" for phase, n in phases.most_common())
    good_kills = sum(not k.problems for k in kills)
    good_runs = sum(not c.problems and not any(k.problems for k in c.kills) for c in chains)
    torn = sum(k.torn_commit for k in kills)
    strays = sum(k.strays for k in kills)
    ok = len(kills) >= 20 and len(kills) - before >= 18 and good_kills == len(kills) and good_runs == CHAINS
    figure = (
        f"{len(kills)} kills (seed {KILL_SEED}) of {CHAINS} runs: {before} before the run existed (a fresh run "
        f"followed), {len(kills) - before} after ({spread}; {torn} between a commit and its journal line), "
        f"nothing twice after each kill: {good_kills}/{len(kills)}; every candidate exactly once after the final "
        f"resume: {good_runs}/{CHAINS} runs; processes left 10s after a kill: {strays}"
    )
    record("resume", "kill -9 at random points of a scripted run, then resume", figure, ok)
    assert len(kills) >= 20 and len(kills) - before >= 18, figure
    assert good_kills == len(kills) and good_runs == CHAINS, figure


# -- git safety on a dirty repository -----------------------------------------------------------------------------


def _dirty_repo(root: Path) -> Path:
    """A repository as a user has it mid-work: on a feature branch with a tag and another branch, an edited
    kernel, a staged change and a staged new file, untracked and ignored files, a stash entry, own config."""
    repo = scale_add_repo(root)
    (repo / "README.md").write_text("# my kernels\n")
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    git(repo, "add", "README.md", ".gitignore")
    git(repo, "commit", "-q", "-m", "readme")
    git(repo, "tag", "v0.1")
    git(repo, "checkout", "-q", "-b", "feature")
    with (repo / "README.md").open("a") as out:
        out.write("feature notes\n")
    git(repo, "commit", "-q", "-am", "feature notes")
    (repo / "kernel.cpp").write_text((repo / "kernel.cpp").read_text() + "\n// stashed idea\n")
    git(repo, "stash", "push", "-q", "-m", "an idea for later")
    (repo / "kernel.cpp").write_text((repo / "kernel.cpp").read_text() + "\n// my uncommitted edit\n")
    with (repo / "README.md").open("a") as out:
        out.write("staged line\n")
    git(repo, "add", "README.md")
    with (repo / "README.md").open("a") as out:
        out.write("unstaged line on top\n")
    (repo / "notes.md").write_text("staged new file\n")
    git(repo, "add", "notes.md")
    (repo / "scratch.txt").write_text("untracked\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_bytes(b"\x7fELF ignored build output")
    (repo / "debug.log").write_text("ignored log\n")
    git(repo, "config", "user.signingkey", "ABC123")
    git(repo, "config", "mytool.setting", "keep me")
    return repo


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _user_state(repo: Path) -> dict[str, str]:
    """Hashes of what is the user's, read without writing anything (no ``git status``: it refreshes the index)."""
    files = []
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if rel.parts[0] in (".git", ".evoteam") or not path.is_file():
            continue
        info = path.stat()
        files += [str(rel), oct(info.st_mode), str(info.st_mtime_ns), path.read_bytes()]
    dot_git = repo / ".git"
    refs = [line for line in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()]
    return {
        "working tree": _digest(*files),
        "index": _digest(_read(dot_git / "index"), git(repo, "ls-files", "-s")),
        "HEAD": _digest(
            git(repo, "symbolic-ref", "-q", "HEAD"), git(repo, "rev-parse", "HEAD"), _read(dot_git / "logs" / "HEAD")
        ),
        "stash": _digest(
            git(repo, "stash", "list"), git(repo, "rev-parse", "refs/stash"), _read(dot_git / "logs" / "refs" / "stash")
        ),
        "config": _digest(_read(dot_git / "config")),
        "other refs": _digest(*(r for r in refs if not r.startswith("refs/heads/evoteam/"))),
    }


@pytest.mark.hardening
@pytest.mark.slow
def test_a_full_run_on_a_dirty_repository_leaves_tree_index_head_stash_config_and_refs_identical(
    tmp_path: Path,
) -> None:
    repo = _dirty_repo(tmp_path / "repo")
    edited = (repo / "kernel.cpp").read_bytes()
    before = _user_state(repo)
    done = evoteam(repo, "evolve", "scale_add", *EVOLVE_ARGS)
    folders = _run_folders(repo)
    run = folders[0].name if len(folders) == 1 else "none"
    shown = evoteam(repo, "show", run, "--json")
    listed = evoteam(repo, "runs")
    reported = evoteam(repo, "report", run)
    after = _user_state(repo)

    same = [name for name in before if before[name] == after[name]]
    changed = [name for name in before if before[name] != after[name]]
    figure = f"{len(same)}/{len(before)} hashes identical after evolve, show, runs, report" + (
        f" (changed: {', '.join(changed)})" if changed else f" ({', '.join(same)})"
    )
    commands_ok = all(r.returncode == 0 for r in (done, shown, listed, reported))
    record(
        "git",
        "a full run on a dirty repository (edits, staged, untracked, stash, config)",
        figure,
        ok := (not changed and commands_ok),
    )
    assert done.returncode == 0, done.stderr
    assert all(r.returncode == 0 for r in (shown, listed, reported)), (shown.stderr, listed.stderr, reported.stderr)
    assert ok, figure
    base = git(repo, "rev-parse", f"evoteam/{run}/base").strip()
    assert git(repo, "show", f"{base}:kernel.cpp").encode() == edited  # the run started from the user's edit
    assert git(repo, "rev-parse", f"{base}^").strip() == git(repo, "rev-parse", "feature").strip()


# -- two runs at once -------------------------------------------------------------------------------------------

TWO_KERNELS_TOML = SCALE_ADD_TOML + SCALE_ADD_TOML.replace(
    '"scale_add"\nsource = "kernel.cpp"', '"other"\nsource = "other.cpp"'
)


@pytest.mark.hardening
@pytest.mark.slow
def test_two_concurrent_runs_on_different_kernels_keep_their_own_refs(tmp_path: Path) -> None:
    assert 'name = "other"' in TWO_KERNELS_TOML
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copyfile(KERNELS / "slow_scale_add.cpp", repo / "other.cpp")
    scale_add_repo(repo, TWO_KERNELS_TOML)
    head = git(repo, "rev-parse", "HEAD").strip()
    overlap, start = 0.0, time.monotonic()
    procs = {kernel: _spawn(repo, ["evolve", kernel, *EVOLVE_ARGS]) for kernel in ("scale_add", "other")}
    while any(p.poll() is None for p in procs.values()):
        time.sleep(0.05)
        now = time.monotonic()
        live = [f for f in _run_folders(repo) if "run_finished" not in {e["kind"] for e in _journal(f)}]
        if len(live) == 2:
            overlap += now - start
        start = now
    codes = {kernel: p.wait() for kernel, p in procs.items()}

    problems: list[str] = [f"{k} exited {c}" for k, c in codes.items() if c != 0]
    folders = _run_folders(repo)
    runs = {
        f.name: next(e for e in _journal(f) if e["kind"] == "run_started")["data"]["config"]["kernel"] for f in folders
    }
    if sorted(runs.values()) != ["other", "scale_add"]:
        problems.append(f"runs: {runs}")
    everyone: list[str] = []
    for run in runs:
        ids = sorted({_event_id(e) for e in _journal(repo / ".evoteam" / "runs" / run) if e["kind"] == "committed"})
        everyone += ids
        for kind in JOURNAL_KINDS:
            recorded = sorted(_event_id(e) for e in _journal(repo / ".evoteam" / "runs" / run) if e["kind"] == kind)
            if recorded != ids:
                problems.append(f"{run} journal {kind}: {recorded} != {ids}")
        if _trailers(repo, run) != ids or not ids:
            problems.append(f"{run}: branch trailers {_trailers(repo, run)} != journal {ids}")
        owners = git(repo, "log", "--format=%(trailers:key=Evoteam-Run,valueonly)", f"--branches=evoteam/{run}/*")
        if {o for o in owners.split() if o} != {run}:
            problems.append(f"{run}: commits of other runs on its branches: {sorted(set(owners.split()))}")
        refs = git(repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/evoteam/{run}/").split()
        if "evoteam/" + run + "/base" not in refs or not any("/round-" in r for r in refs):
            problems.append(f"{run}: refs {refs}")
    fsck = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    if fsck.returncode != 0 or fsck.stdout.strip():
        problems.append(f"git fsck: {(fsck.stdout + fsck.stderr).strip()}")
    if git(repo, "status", "--porcelain") != "" or git(repo, "rev-parse", "HEAD").strip() != head:
        problems.append("the user's working tree or HEAD changed")
    figure = (
        f"2 runs at once ({overlap:.1f}s overlapping), {len(everyone)} candidates, each run's refs hold only its own "
        f"({sum(not any(r in p for p in problems) for r in runs)}/2), git fsck "
        f"{'clean' if fsck.returncode == 0 and not fsck.stdout.strip() else 'NOT clean'}"
    )
    record("git", "two concurrent runs on different kernels of one repository", figure, not problems)
    assert overlap > 1.0, figure  # they did run at the same time
    assert not problems, problems
