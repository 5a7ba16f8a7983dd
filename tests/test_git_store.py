"""The run's git branches: base with uncommitted edits, candidate commits with trailers, best, and the user's
working tree, index, HEAD, stash and config left byte-identical."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from conftest import git, init_repo
from evoteam.supervisor.git_store import GitStore, GitStoreError, branch_name, round_branch

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    (root / "k").mkdir()
    (root / "k" / "kernel.cpp").write_text("int v = 1;\n")
    (root / "other.txt").write_text("other\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def snapshot(repo: Path) -> dict[str, str]:
    """Hashes of everything a run must not change: files, index, HEAD, refs of the user, stash, config."""
    files = {
        p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    git_dir = repo / ".git"
    return {
        **files,
        "index": hashlib.sha256((git_dir / "index").read_bytes()).hexdigest(),
        "HEAD": (git_dir / "HEAD").read_text(),
        "head-commit": git(repo, "rev-parse", "HEAD"),
        "stash": git(repo, "stash", "list"),
        "config": (git_dir / "config").read_text(),
        "status": git(repo, "status", "--porcelain=v2"),
        "user-refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main", "refs/stash"),
    }


def test_base_holds_uncommitted_edits_and_nothing_of_the_user_changes(repo: Path) -> None:
    (repo / "stashme.txt").write_text("x\n")
    git(repo, "stash", "push", "-q", "-u", "-m", "keep")
    (repo / "k" / "kernel.cpp").write_text("int v = 2; // dirty, unstaged\n")
    (repo / "other.txt").write_text("staged edit\n")
    git(repo, "add", "other.txt")
    (repo / "untracked.txt").write_text("untracked\n")
    before = snapshot(repo)

    store = GitStore(repo / "k", "run-1")
    path = store.relative(repo / "k" / "kernel.cpp")
    base = store.create_base({path: (repo / path).read_bytes()}, "evoteam base of kernel")
    first = store.commit_candidate(
        1,
        "c1",
        {path: b"int v = 3;\n"},
        "Optimizer: unroll",
        "why",
        {"Evoteam-Role": "Optimizer", "Evoteam-Status": "PASSED", "Evoteam-Speedup": "1.250"},
    )
    second = store.commit_candidate(1, "c2", {path: b"int v = 4;\n"}, "Debugger: fix", "", {"Evoteam-Role": "Debugger"})
    store.set_best(first)

    assert snapshot(repo) == before
    assert store.read(base, path) == b"int v = 2; // dirty, unstaged\n"
    assert store.read(base, "other.txt") == b"other\n"  # HEAD's content, not the staged edit
    assert git(repo, "rev-parse", f"{base}^") == before["head-commit"]
    assert git(repo, "rev-parse", f"{second}^").strip() == first
    assert store.ref(branch_name("run-1", "best")) == first
    assert store.branches() == ["evoteam/run-1/base", "evoteam/run-1/best", "evoteam/run-1/round-01"]
    commits = store.candidates()
    assert [c.trailers["Evoteam-Candidate"] for c in commits] == ["c1", "c2"]
    assert commits[0].trailers["Evoteam-Speedup"] == "1.250"
    assert commits[0].trailers["Evoteam-Run"] == "run-1" and commits[0].round == 1
    assert git(repo, "log", "-1", "--format=%an", first).strip() == "evoteam"
    assert "int v = 3" in store.diff(base, first)


def test_commits_are_idempotent_and_base_is_created_once(repo: Path) -> None:
    store = GitStore(repo, "r2")
    base = store.create_base({"k/kernel.cpp": b"a\n"}, "base")
    assert store.create_base({"k/kernel.cpp": b"b\n"}, "base") == base
    sha = store.commit_candidate(2, "same", {"k/kernel.cpp": b"c\n"}, "s", "", {})
    assert store.commit_candidate(2, "same", {"k/kernel.cpp": b"c\n"}, "s", "", {}) == sha
    assert len(store.candidates()) == 1
    assert store.ref(round_branch("r2", 2)) == sha


def test_a_ref_moved_by_someone_else_is_an_error_not_an_overwrite(repo: Path) -> None:
    store = GitStore(repo, "r3")
    store.create_base({"k/kernel.cpp": b"a\n"}, "base")
    first = store.commit_candidate(1, "c1", {"k/kernel.cpp": b"b\n"}, "s", "", {})
    with pytest.raises(GitStoreError, match="moved"):
        from evoteam.supervisor import git_store

        with git_store._open(repo) as handle:
            git_store._update_ref(handle, round_branch("r3", 1), first, "1" * 40)


def test_concurrent_runs_on_different_kernels_keep_their_own_refs(repo: Path) -> None:
    errors: list[BaseException] = []

    def work(run: str) -> None:
        try:
            store = GitStore(repo, run)
            store.create_base({"k/kernel.cpp": run.encode()}, "base")
            for i in range(8):
                store.commit_candidate(1 + i % 2, f"{run}-{i}", {"k/kernel.cpp": f"{run} {i}\n".encode()}, "s", "", {})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"run{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(3):
        store = GitStore(repo, f"run{n}")
        names = sorted(c.trailers["Evoteam-Candidate"] for c in store.candidates())
        assert names == sorted(f"run{n}-{i}" for i in range(8))
    assert git(repo, "fsck", "--no-progress").strip() == ""


def test_not_a_repository_and_bad_paths_are_clear_errors(tmp_path: Path, repo: Path) -> None:
    with pytest.raises(GitStoreError, match="not inside a git repository"):
        GitStore(tmp_path / "nowhere", "r")
    with pytest.raises(GitStoreError, match="invalid run id"):
        GitStore(repo, "../x")
    store = GitStore(repo, "r")
    with pytest.raises(GitStoreError, match="outside the repository"):
        store.relative(tmp_path / "elsewhere.cpp")
    with pytest.raises(GitStoreError, match="no base"):
        store.commit_candidate(1, "c", {"k/kernel.cpp": b""}, "s", "", {})


def test_empty_repository_gets_a_root_base(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    store = GitStore(root, "r")
    base = store.create_base({"kernel.cpp": b"x\n"}, "base")
    assert store.read(base, "kernel.cpp") == b"x\n"


def test_a_lock_left_by_a_killed_ref_update_is_cleared_and_the_run_goes_on(repo: Path) -> None:
    """kill -9 while git updates a ref leaves ``REF.lock``: the next update of that ref fails until it goes.
    A resumed run (holding its kernel lock, so nobody else writes its refs) clears its own stale locks."""
    store = GitStore(repo, "r9")
    base = store.create_base({"k/kernel.cpp": b"a\n"}, "base")
    refs = repo / ".git" / "refs" / "heads" / "evoteam" / "r9"
    (refs / "base.lock").write_text(base + "\n")  # as a killed `git update-ref` leaves it
    (refs / "round-01.lock").write_text("")
    other = repo / ".git" / "refs" / "heads" / "evoteam" / "r8"
    other.mkdir(parents=True)
    (other / "base.lock").write_text("")  # another run's: not ours to touch
    with pytest.raises(GitStoreError, match=r"round-01\.lock"):  # git refuses to update a ref whose lock stands
        store.commit_candidate(1, "c1", {"k/kernel.cpp": b"b\n"}, "s", "", {})
    assert store.clear_stale_locks() == ["refs/heads/evoteam/r9/base.lock", "refs/heads/evoteam/r9/round-01.lock"]
    assert (other / "base.lock").exists()
    store.commit_candidate(1, "c1", {"k/kernel.cpp": b"b\n"}, "s", "", {})
    assert store.ref(round_branch("r9", 1)) is not None and store.clear_stale_locks() == []
