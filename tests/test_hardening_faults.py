"""Fault injection: candidates that crash, hang, eat memory, fork-bomb, write outside the workspace, open
sockets, leave daemons behind or read secrets each get a status; the evaluator and the supervisor survive every
one, and nothing they started is left running.

The evaluator runs in this machine's sandbox (bubblewrap); these tests need it and skip where it cannot run.
Each records a row for ``scripts/hardening``.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hardening import needs_sandbox, processes_mentioning, record

from conftest import KERNELS, git, init_repo, kernel_solution, quick_config, reference_solution, scale_add_task
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Definition, Solution, Workload
from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.gpu_bench.worker.evaluate import EvalConfig
from evoteam.roles.agent_api import AgentContext, AgentReport
from evoteam.roles.tools.evaluation import EvaluationCache, TaskEvaluations
from evoteam.supervisor.git_store import GitStore
from evoteam.supervisor.loop import RunServices, Supervisor
from evoteam.supervisor.state import RunConfig
from evoteam.supervisor.team import Team

pytestmark = [
    pytest.mark.hardening,
    needs_sandbox(),
]

PLANTED_KEY = "sk-ant-api03-PLANTED-" + secrets.token_hex(12)
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- planted " + secrets.token_hex(8)
AWS_SECRET = "aws_secret_access_key = planted" + secrets.token_hex(8)


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections (a candidate must never reach it)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@dataclass
class Faults:
    """The environment the fault kernels read, and what they must not reach."""

    outside: Path
    home: Path
    token: str
    listener: Listener
    key_file: Path


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    """Plants secrets in a home folder of the test's own, a key in the environment and a key file, a folder
    outside every workspace and a listener; the workers started in this module inherit that environment."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(AWS_SECRET)
    key_file = home / "anthropic.key"
    key_file.write_text(PLANTED_KEY)
    listener = Listener()
    found = Faults(tmp_path_factory.mktemp("outside"), home, secrets.token_hex(6), listener, key_file)
    planted = {
        "HOME": str(home),
        "ANTHROPIC_API_KEY": PLANTED_KEY,
        "EVOTEAM_API_KEY_FILE": str(key_file),
        "EVOTEAM_FAULT_DIR": str(found.outside),
        "EVOTEAM_FAULT_TOKEN": found.token,
        "EVOTEAM_FAULT_PORT": str(listener.port),
    }
    saved = {name: os.environ.get(name) for name in planted}
    os.environ.update(planted)
    try:
        yield found
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        listener.close()


@pytest.fixture(scope="module")
def fault_runner(faults: Faults, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunner]:
    runner = LocalRunner(cache_root=tmp_path_factory.mktemp("fault-cache"), memory_limit_mb=4096)
    try:
        yield runner
    finally:
        runner.close()


def wait_gone(text: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def evaluate(
    runner: LocalRunner, definition: Definition, workloads: list[Workload], filename: str, config: EvalConfig
) -> CandidateResult:
    return Evaluator(runner).evaluate(
        definition, workloads, kernel_solution(filename), reference_solution(definition), config
    )


def _timeout() -> EvalConfig:
    return quick_config(timeout_s=3.0)


@dataclass
class Fault:
    kernel: str
    statuses: set[S]
    phrase: str | tuple[str, ...]
    """One of these is in a reason of a non-passing workload ("" when the candidate passes)."""
    config: EvalConfig | None = None
    small_only: bool = False
    """Evaluate on the smallest workload alone (a 3 s limit is also the baseline's, on a loaded machine)."""


FAULTS = [
    Fault("segfault_on_medium.cpp", {S.RUNTIME_ERROR}, "SIGSEGV"),
    Fault("aborts.cpp", {S.RUNTIME_ERROR}, "SIGABRT"),
    Fault("never_returns.cpp", {S.TIMEOUT}, "did not finish within 3 s", _timeout(), small_only=True),
    Fault("runaway_memory.cpp", {S.RUNTIME_ERROR}, ""),
    Fault("fork_bomb.cpp", {S.TIMEOUT, S.RUNTIME_ERROR}, "", _timeout(), small_only=True),
    # EROFS: the root is read-only in the sandbox; EACCES: the native host holds every file read-only (Landlock)
    Fault("writes_outside.cpp", {S.RUNTIME_ERROR}, ("returned 30", "returned 13")),
    # ECONNREFUSED or ENETUNREACH: the sandbox has a loopback of its own, where nobody listens
    Fault("opens_socket.cpp", {S.RUNTIME_ERROR}, ("returned 111", "returned 101", "returned 13")),  # 13: Landlock
    Fault("background_process.cpp", {S.RUNTIME_ERROR}, "which the native host forbids"),  # its fork is refused
    Fault("reads_secrets.cpp", {S.PASSED}, ""),  # it returns how many secrets it read: none
]


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS, ids=[f.kernel.removesuffix(".cpp") for f in FAULTS])
def test_each_fault_gets_a_status_and_the_evaluator_survives_it(
    fault: Fault,
    faults: Faults,
    fault_runner: LocalRunner,
    definition: Definition,
    workloads: list[Workload],
) -> None:
    chosen = workloads[:1] if fault.small_only else workloads
    result = evaluate(fault_runner, definition, chosen, fault.kernel, fault.config or quick_config())
    reasons = [w.reason for w in result.workloads if w.status != S.PASSED]
    logs = "".join(t.evaluation.log for t in result.traces if t.evaluation is not None)
    honest = evaluate(fault_runner, definition, workloads[:1], "honest.cpp", quick_config())
    daemons = wait_gone(f"evoteam-fault-{faults.token}", seconds=30.0)  # gone at once, unless they escaped
    escaped = [
        p for p in (faults.outside, faults.home, Path("/tmp")) if (p / f"evoteam-escaped-{faults.token}").exists()
    ]
    leaked = [s for s in (PLANTED_KEY, SSH_KEY, AWS_SECRET) if s in logs or any(s in r for r in reasons)]
    phrases = (fault.phrase,) if isinstance(fault.phrase, str) else fault.phrase
    explained = not fault.phrase or any(p in r for p in phrases for r in reasons)
    ok = (
        result.status in fault.statuses
        and explained
        and honest.status == S.PASSED
        and not daemons
        and not escaped
        and not leaked
        and faults.listener.connections == 0
    )
    figure = f"{result.status.value}" + (f" ({reasons[0][:60]})" if reasons else "") + "; honest code after: "
    figure += f"{honest.status.value}; daemons {len(daemons)}, files outside {len(escaped)}, secrets in logs "
    figure += f"{len(leaked)}, connections {faults.listener.connections}"
    record("faults", fault.kernel, figure, ok)
    assert result.status in fault.statuses, reasons
    assert explained, reasons
    assert honest.status == S.PASSED, [w.reason for w in honest.workloads]
    assert not daemons, "a process the candidate started outlived the call"
    assert not escaped and not leaked and faults.listener.connections == 0


@pytest.mark.slow
def test_nothing_the_faults_started_is_left_running(faults: Faults, fault_runner: LocalRunner) -> None:
    worker = fault_runner._worker
    marker = str(worker._log_dir) if worker is not None else None
    starts = fault_runner.worker_starts
    fault_runner.close()
    left = wait_gone(marker) if marker else []
    daemons = wait_gone(f"evoteam-fault-{faults.token}")
    record(
        "faults",
        "after the evaluator closed",
        f"{starts} worker(s) started for {len(FAULTS)} faults; processes left: {len(left) + len(daemons)}",
        not left and not daemons,
    )
    assert not left and not daemons


class FaultAgent:
    """An agent that writes each fault kernel in turn into its workspace and submits it, as a misbehaving
    model could; it uses the real tools, so every submission is evaluated and committed like any other."""

    def __init__(self, kernels: list[str]) -> None:
        self.kernels = kernels

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        entry = context.workspace.root / "kernel.cpp"
        for kernel in self.kernels:
            wrote = context.toolbox.call("write", {"path": entry.name, "content": (KERNELS / kernel).read_text()})
            assert not wrote.is_error, wrote.content
            context.toolbox.call("submit_candidate", {"rationale": f"try {kernel}"})
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="done")


@pytest.mark.slow
def test_a_run_whose_agent_submits_every_fault_finishes_with_a_status_for_each(faults: Faults, tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "kernel.cpp").write_text((KERNELS / "honest.cpp").read_text())
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "kernel")
    task = scale_add_task(source=repo / "kernel.cpp")
    kernels = [f.kernel for f in FAULTS]
    small = [w for w in task.load_workloads() if w.uuid == "small-1000"]
    runner = LocalRunner(cache_root=tmp_path / "cache", memory_limit_mb=4096)
    caches: dict[str, EvaluationCache] = {}

    def evaluations(team: Team, incumbent: Solution | None) -> EvaluationCache:
        key = team.constraints.model_dump_json() + (incumbent.content_hash() if incumbent else "")
        if key not in caches:
            evaluator = Evaluator(runner)
            service = TaskEvaluations(evaluator, task, _timeout(), workloads=small, baseline=incumbent)
            caches[key] = EvaluationCache(service)
        return caches[key]

    agents = lambda role, round_number, index, sink, stop: (  # noqa: E731
        FaultAgent(kernels) if "submit_candidate" in role.tools else None
    )
    services = RunServices(task=task, evaluations=evaluations, agents=agents)
    config = RunConfig(
        run="faults", kernel="scale_add", config=str(repo), rounds=1, budget=0, llm="offline", mode="single"
    )
    try:
        supervisor = Supervisor(repo, "faults", services)
        supervisor.start(config)
        state = supervisor.run()
    finally:
        runner.close()
    statuses = {c.rationale.removeprefix("try "): c.record.status for c in state.candidates.values() if c.record}
    committed = GitStore(repo, "faults").candidates()
    daemons = wait_gone(f"evoteam-fault-{faults.token}")
    ok = (
        state.finished == "rounds"
        and sorted(statuses) == sorted(kernels)
        and len(committed) == len(kernels)
        and not daemons
        and faults.listener.connections == 0
    )
    shown = ", ".join(f"{k.removesuffix('.cpp')} {s.value}" for k, s in sorted(statuses.items()))
    record(
        "faults",
        "one run submitting all of them",
        f"run {state.finished}; {len(statuses)}/{len(kernels)} statused and {len(committed)} committed ({shown})",
        ok,
    )
    assert state.finished == "rounds"
    assert sorted(statuses) == sorted(kernels), statuses
    assert statuses["aborts.cpp"] == S.RUNTIME_ERROR and statuses["never_returns.cpp"] == S.TIMEOUT
    assert len(committed) == len(kernels) and not daemons and faults.listener.connections == 0
