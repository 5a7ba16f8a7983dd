"""A run's git branches: the base commit, one commit per candidate on ``evoteam/<run>/round-<NN>``, and ``best``.

``CandidateStore`` is what the supervisor needs of them (``GitStore``; ``MemoryStore`` is its fake).

Everything is plumbing on a temporary index (blobs written to the object store, ``read-tree`` / ``update-index``
/ ``write-tree`` / ``commit-tree``, then ``update-ref`` with the expected old value), so the user's working tree,
index, HEAD and stash are never touched. GitPython gives repository access; one ``Repo`` per operation, closed
after, because it is not thread-safe and leaks ``git cat-file`` processes in long-lived programs.
"""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import git
from gitdb.base import IStream  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

ZERO = "0" * 40
TRAILER_KEYS = (
    "Evoteam-Run",
    "Evoteam-Round",
    "Evoteam-Role",
    "Evoteam-Candidate",
    "Evoteam-Status",
    "Evoteam-Speedup",
)
_IDENTITY = {
    "GIT_AUTHOR_NAME": "evoteam",
    "GIT_AUTHOR_EMAIL": "evoteam@localhost",
    "GIT_COMMITTER_NAME": "evoteam",
    "GIT_COMMITTER_EMAIL": "evoteam@localhost",
}
_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TRAILER = re.compile(r"^(Evoteam-[A-Za-z]+): (.*)$")


class GitStoreError(RuntimeError):
    """Not a git repository, a ref moved under us, or a file outside the repository; the message says which."""


class CandidateCommit(BaseModel):
    """A candidate commit as read back from a round branch."""

    model_config = ConfigDict(extra="forbid")
    sha: str
    branch: str
    round: int
    trailers: dict[str, str]
    subject: str


def branch_name(run: str, what: str) -> str:
    """``evoteam/<run>/<what>`` (``base``, ``best``, ``round-03``)."""
    return f"evoteam/{run}/{what}"


def round_branch(run: str, round_number: int) -> str:
    return branch_name(run, f"round-{round_number:02d}")


def format_message(subject: str, body: str, trailers: Mapping[str, str]) -> str:
    """A commit message: a one-line subject, a body, and ``Key: value`` trailers (one line each)."""
    clean = {k: " ".join(str(v).split()) for k, v in trailers.items()}
    lines = [" ".join(subject.split()), ""]
    if body.strip():
        lines += [body.strip(), ""]
    lines += [f"{k}: {v}" for k, v in clean.items()]
    return "\n".join(lines) + "\n"


def parse_trailers(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in message.splitlines():
        match = _TRAILER.match(line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found


class CandidateStore(Protocol):
    """Where a run's candidates are committed: the base, a commit per candidate, the best."""

    def relative(self, path: Path) -> str:
        """``path`` as a repository path."""
        ...

    def create_base(self, files: Mapping[str, bytes], subject: str) -> str: ...

    def commit_candidate(
        self,
        round_number: int,
        candidate: str,
        files: Mapping[str, bytes],
        subject: str,
        body: str,
        trailers: Mapping[str, str],
    ) -> str:
        """The candidate's commit (made once: a candidate committed before is not committed again)."""
        ...

    def set_best(self, sha: str) -> None: ...

    def read(self, sha: str, path: str) -> bytes: ...


class MemoryStore:
    """The fake: commits as file maps in memory (sha = a counter), repository paths relative to ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commits: dict[str, dict[str, bytes]] = {}
        self.candidates: dict[str, str] = {}
        """Candidate id → its commit."""
        self.base: str | None = None
        self.best: str | None = None

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def create_base(self, files: Mapping[str, bytes], subject: str) -> str:
        if self.base is None:
            self.base = self._commit(files)
        return self.base

    def commit_candidate(
        self,
        round_number: int,
        candidate: str,
        files: Mapping[str, bytes],
        subject: str,
        body: str,
        trailers: Mapping[str, str],
    ) -> str:
        if candidate not in self.candidates:
            assert self.base is not None, "create_base first"
            self.candidates[candidate] = self._commit({**self.commits[self.base], **files})
        return self.candidates[candidate]

    def set_best(self, sha: str) -> None:
        self.best = sha

    def read(self, sha: str, path: str) -> bytes:
        try:
            return self.commits[sha][path]
        except KeyError:
            raise GitStoreError(f"{path} is not in commit {sha[:12]}") from None

    def _commit(self, files: Mapping[str, bytes]) -> str:
        sha = f"{len(self.commits) + 1:040x}"
        self.commits[sha] = dict(files)
        return sha


class GitStore:
    """The branches of run ``run`` in the repository that contains ``path``."""

    def __init__(self, path: Path, run: str) -> None:
        if not _RUN.match(run):
            raise GitStoreError(f"invalid run id {run!r} for a branch name")
        self.run = run
        try:
            with _open(path) as repo:
                top = repo.working_tree_dir
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise GitStoreError(
                f"{path} is not inside a git repository; evoteam commits candidates to branches"
            ) from None
        if top is None:
            raise GitStoreError(f"{path} is in a bare repository; evoteam needs a working tree to read the kernel from")
        self.root = Path(top).resolve()

    def relative(self, path: Path) -> str:
        """``path`` as a repository path (``examples/rmsnorm/kernels/rmsnorm.cpp``)."""
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            raise GitStoreError(f"{path} is outside the repository at {self.root}") from None

    def clear_stale_locks(self) -> list[str]:
        """Removes the ``.lock`` files git left under this run's refs (``refs/heads/evoteam/<run>/``) when a
        process was killed while updating one; the refs removed, relative to the git folder. Call it only while
        holding the run's kernel lock: no other process then writes these refs, so any lock there is stale."""
        with _open(self.root) as repo:
            git_dir = Path(repo.git_dir)
        folder = git_dir / "refs" / "heads" / "evoteam" / self.run
        removed = []
        for lock in sorted(folder.glob("**/*.lock")) if folder.is_dir() else []:
            lock.unlink(missing_ok=True)
            removed.append(lock.relative_to(git_dir).as_posix())
        return removed

    def ref(self, branch: str) -> str | None:
        """The commit ``refs/heads/<branch>`` points at, or None."""
        with _open(self.root) as repo:
            try:
                return str(repo.git.rev_parse("--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"))
            except git.GitCommandError:
                return None

    def create_base(self, files: Mapping[str, bytes], subject: str) -> str:
        """HEAD's tree with ``files`` (repository paths → content as it is now, uncommitted edits included) as
        ``evoteam/<run>/base``. Calling it again returns the existing base."""
        branch = branch_name(self.run, "base")
        existing = self.ref(branch)
        if existing is not None:
            return existing
        with _open(self.root) as repo:
            head = _head(repo)
            sha = _commit(repo, head, files, format_message(subject, "", {"Evoteam-Run": self.run}))
            _update_ref(repo, branch, sha, ZERO)
        return sha

    def commit_candidate(
        self,
        round_number: int,
        candidate: str,
        files: Mapping[str, bytes],
        subject: str,
        body: str,
        trailers: Mapping[str, str],
    ) -> str:
        """Commits a candidate on its round branch (parent: the branch tip, else the base) and returns the sha.
        Idempotent: a candidate already on the branch (trailer ``Evoteam-Candidate``) is not committed twice."""
        branch = round_branch(self.run, round_number)
        for commit in self._branch_commits(branch):
            if commit.trailers.get("Evoteam-Candidate") == candidate:
                return commit.sha
        base = self.ref(branch_name(self.run, "base"))
        if base is None:
            raise GitStoreError(f"run {self.run} has no base branch; create_base first")
        tip = self.ref(branch)
        all_trailers = {"Evoteam-Run": self.run, "Evoteam-Round": str(round_number), **trailers}
        all_trailers["Evoteam-Candidate"] = candidate
        with _open(self.root) as repo:
            sha = _commit(repo, tip or base, files, format_message(subject, body, all_trailers))
            _update_ref(repo, branch, sha, tip or ZERO)
        return sha

    def set_best(self, sha: str) -> None:
        """Moves ``evoteam/<run>/best`` to ``sha`` (checked against the value it had)."""
        branch = branch_name(self.run, "best")
        old = self.ref(branch)
        if old == sha:
            return
        with _open(self.root) as repo:
            _update_ref(repo, branch, sha, old or ZERO)

    def branches(self) -> list[str]:
        """This run's branches, sorted (``base``, ``best``, ``round-NN``)."""
        with _open(self.root) as repo:
            out = str(repo.git.for_each_ref("--format=%(refname:short)", f"refs/heads/evoteam/{self.run}/"))
        return sorted(line for line in out.splitlines() if line)

    def candidates(self) -> list[CandidateCommit]:
        """Every candidate commit of the run, round by round, oldest first."""
        found: list[CandidateCommit] = []
        for branch in self.branches():
            if branch.rsplit("/", 1)[-1].startswith("round-"):
                found += self._branch_commits(branch)
        return found

    def read(self, sha: str, path: str) -> bytes:
        """The content of repository path ``path`` at commit ``sha``."""
        with _open(self.root) as repo:
            try:
                blob = repo.commit(sha).tree / path
            except (KeyError, ValueError, git.BadName) as exc:
                raise GitStoreError(f"{path} is not in commit {sha[:12]}: {exc}") from None
            data: bytes = blob.data_stream.read()
            return data

    def diff(self, old: str, new: str) -> str:
        with _open(self.root) as repo:
            return str(repo.git.diff(old, new, "--"))

    def _branch_commits(self, branch: str) -> list[CandidateCommit]:
        tip = self.ref(branch)
        base = self.ref(branch_name(self.run, "base"))
        if tip is None:
            return []
        with _open(self.root) as repo:
            span = f"{base}..{tip}" if base else tip
            out = str(repo.git.log("--reverse", "--format=%H%x00%B%x01", span))
        commits = []
        for record in out.split("\x01"):
            record = record.strip("\n")
            if not record:
                continue
            sha, _, message = record.partition("\x00")
            trailers = parse_trailers(message)
            round_number = int(trailers.get("Evoteam-Round", "0") or 0)
            subject = message.strip().splitlines()[0] if message.strip() else ""
            commits.append(
                CandidateCommit(sha=sha, branch=branch, round=round_number, trailers=trailers, subject=subject)
            )
        return commits


@contextmanager
def _open(path: Path) -> Iterator[git.Repo]:
    repo = git.Repo(path, search_parent_directories=True)
    try:
        yield repo
    finally:
        repo.close()


def _head(repo: git.Repo) -> str | None:
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", "HEAD^{commit}"))
    except git.GitCommandError:
        return None  # an empty repository: the base has no parent


def _commit(repo: git.Repo, parent: str | None, files: Mapping[str, bytes], message: str) -> str:
    """A commit of ``parent``'s tree with ``files`` replaced, built on a temporary index."""
    with tempfile.TemporaryDirectory(prefix="evoteam-index-") as tmp:
        index = str(Path(tmp) / "index")
        with repo.git.custom_environment(GIT_INDEX_FILE=index, **_IDENTITY):
            if parent is None:
                repo.git.read_tree("--empty")
            else:
                repo.git.read_tree(parent)
            for path, data in sorted(files.items()):
                if path.startswith("/") or ".." in Path(path).parts:
                    raise GitStoreError(f"{path!r} is not a repository path")
                blob = repo.odb.store(IStream("blob", len(data), io.BytesIO(data)))
                mode = _mode(repo, parent, path)
                repo.git.update_index("--add", "--cacheinfo", f"{mode},{_hex(blob.hexsha)},{path}")
            tree = str(repo.git.write_tree())
            args = [tree] + (["-p", parent] if parent else [])
            message_file = Path(tmp) / "message"
            message_file.write_text(message, encoding="utf-8")
            with message_file.open("rb") as stream:
                sha: str = repo.git.commit_tree(*args, istream=stream)
    return sha.strip()


def _hex(sha: bytes | str) -> str:
    return sha.decode("ascii") if isinstance(sha, bytes) else sha


def _mode(repo: git.Repo, parent: str | None, path: str) -> str:
    if parent is None:
        return "100644"
    out = str(repo.git.ls_tree(parent, "--", path))
    return out.split()[0] if out else "100644"


def _update_ref(repo: git.Repo, branch: str, new: str, old: str) -> None:
    try:
        repo.git.update_ref("-m", "evoteam", f"refs/heads/{branch}", new, old)
    except git.GitCommandError as exc:
        raise GitStoreError(f"{branch} moved while evoteam was updating it: {exc.stderr.strip()}") from None


__all__ = [
    "TRAILER_KEYS",
    "CandidateCommit",
    "CandidateStore",
    "GitStore",
    "GitStoreError",
    "MemoryStore",
    "branch_name",
    "round_branch",
]
