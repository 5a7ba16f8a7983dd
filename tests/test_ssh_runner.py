"""The SSH runner against a real OpenSSH server on loopback: same results as local, refusals, reconnects, cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("asyncssh", reason="asyncssh is not installed (the ssh extra: pip install -e .[ssh])")

import asyncssh

from conftest import DATA, kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.remote.select import RunnerSpecError, make_runner, parse_runner
from evoteam.gpu_bench.remote.ssh import SshRunner
from evoteam.gpu_bench.remote.ssh_target import SshTarget
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner, WorkerStartError, WorkloadRun
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, SourceFile, Workload
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = pytest.mark.e2e

SSHD = Path("/usr/sbin/sshd")
WORKER = [sys.executable, "-m", "evoteam.gpu_bench.worker"]


class Sshd:
    """An sshd on 127.0.0.1 with its own host key, one authorized client key and a known_hosts for it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client_key = root / "client_key"
        self.known_hosts = root / "known_hosts"
        self.cache = root / "remote-cache"  # also marks the remote workers' command lines
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        host_key.write_private_key(root / "host_key")
        (root / "host_key").chmod(0o600)
        client = asyncssh.generate_private_key("ssh-ed25519")
        client.write_private_key(self.client_key)
        self.client_key.chmod(0o600)
        client.write_public_key(root / "authorized_keys")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        public = host_key.export_public_key().decode().strip()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {public}\n")
        self.home = root / "home"  # a user's ~/.ssh for the command line: the key and known_hosts as defaults
        (self.home / ".ssh").mkdir(parents=True)
        client.write_private_key(self.home / ".ssh" / "id_ed25519")
        (self.home / ".ssh" / "id_ed25519").chmod(0o600)
        (self.home / ".ssh" / "known_hosts").write_text(self.known_hosts.read_text())
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile {root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nLogLevel ERROR\n"
            f"SetEnv PATH={Path(sys.executable).parent}:/usr/bin:/bin\n"  # `evoteam worker` is found there
        )
        self.log = (root / "sshd.log").open("wb")
        self.proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(root / "sshd_config")], stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.close()
        pytest.skip(f"sshd did not start: {(root / 'sshd.log').read_text()[-500:]}")

    def runner(self, **kw: Any) -> SshRunner:
        values: dict[str, Any] = {
            "known_hosts": self.known_hosts,
            "client_keys": [self.client_key],
            "agent_path": None,
            "remote_cache": str(self.cache),
            "connect_timeout_s": 5.0,
            "memory_limit_mb": 4096,
        }
        values.update(kw)
        command = values.pop("remote_command", WORKER)
        return SshRunner(f"ssh://{_user()}@127.0.0.1:{self.port}", command, **values)

    def drop_connections(self) -> None:
        """SIGKILLs every per-connection sshd process: the client sees its connection vanish."""
        for pid in _descendants(self.proc.pid):
            if _comm(pid) == "sshd":
                _kill(pid)

    def remote_workers(self, helpers: bool = False) -> list[int]:
        """Live worker processes started by these tests' remote runners (found by their cache folder; the
        sandbox's own processes, bubblewrap and its init, which name the folder too, left out), and with
        ``helpers`` their build helpers too."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                sandbox = Path(cmdline[0].decode(errors="replace")).name == "bwrap"
                helper = b"evoteam.gpu_bench.worker.build_helper" in cmdline
                if str(self.cache).encode() in cmdline and state != "Z" and not sandbox and (helpers or not helper):
                    found.append(int(entry.name))
        return found

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _settled(probe: Any, timeout_s: float = 5.0) -> Any:
    """``probe()`` once it is empty (or its last value after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    value = probe()
    while value and time.monotonic() < deadline:
        time.sleep(0.1)
        value = probe()
    return value


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not SSHD.exists():
        pytest.skip("needs OpenSSH's sshd at /usr/sbin/sshd (Debian: apt-get install openssh-server)")
    if not Path("/run/sshd").is_dir():  # sshd's privilege separation folder, made by its service normally
        try:
            Path("/run/sshd").mkdir(mode=0o755)
        except OSError as exc:
            pytest.skip(f"sshd needs /run/sshd, which cannot be made here: {exc}")
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def remote(sshd: Sshd) -> Iterator[SshRunner]:
    r = sshd.runner()
    try:
        yield r
    finally:
        r.close()
    assert _settled(lambda: sshd.remote_workers(helpers=True)) == []


def _bench(
    runner: Any, definition: Definition, workloads: list[Workload], filename: str, config: EvalConfig
) -> CandidateResult:
    return Evaluator(runner).evaluate(
        definition, workloads, kernel_solution(filename), reference_solution(definition), config
    )


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys and element shapes, leaves replaced by their type."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def _summary(result: CandidateResult) -> list[tuple[str, EvaluationStatus]]:
    return [(t.workload.uuid, t.evaluation.status) for t in result.traces if t.evaluation is not None]


def test_an_honest_kernel_passes_over_ssh(remote: SshRunner, definition: Definition, workloads: list[Workload]) -> None:
    seen: list[WorkloadRun] = []
    result = Evaluator(remote).evaluate(
        definition,
        workloads,
        kernel_solution("honest.cpp"),
        reference_solution(definition),
        quick_config(),
        progress=seen.append,
    )
    assert result.status == EvaluationStatus.PASSED
    assert [s for _, s in _summary(result)] == [EvaluationStatus.PASSED] * len(workloads)
    assert [r.workload.uuid for r in seen] == [w.uuid for w in workloads]  # streamed, one per workload
    assert all(t.evaluation is not None and t.evaluation.performance is not None for t in result.traces)


@pytest.mark.parametrize(
    ("filename", "config", "expected"),
    [
        ("segfault_on_medium.cpp", quick_config(), EvaluationStatus.RUNTIME_ERROR),
        ("never_returns.cpp", quick_config(timeout_s=2.0), EvaluationStatus.TIMEOUT),
        ("compile_error.cpp", quick_config(), EvaluationStatus.COMPILE_ERROR),
    ],
)
def test_statuses_and_trace_shapes_match_a_local_run(
    remote: SshRunner,
    runner: LocalRunner,
    sshd: Sshd,
    definition: Definition,
    workloads: list[Workload],
    filename: str,
    config: EvalConfig,
    expected: EvaluationStatus,
) -> None:
    chosen = workloads[:1] if filename == "never_returns.cpp" else workloads
    there = _bench(remote, definition, chosen, filename, config)
    here = _bench(runner, definition, chosen, filename, config)
    assert _summary(there) == _summary(here)
    assert expected in [s for _, s in _summary(there)]
    assert [_shape(t.to_json_dict()) for t in there.traces] == [_shape(t.to_json_dict()) for t in here.traces]
    for a, b in zip(there.traces, here.traces, strict=True):
        assert a.evaluation is not None and b.evaluation is not None
        if a.evaluation.status != EvaluationStatus.PASSED:
            assert a.evaluation.log.splitlines()[:1] == b.evaluation.log.splitlines()[:1]  # the same reason
    if filename == "never_returns.cpp":
        assert _settled(lambda: len(sshd.remote_workers()) > 1) is False  # the spinning worker was killed


def test_an_unknown_host_key_is_refused(
    sshd: Sshd, tmp_path: Path, definition: Definition, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    monkeypatch.setenv("HOME", str(tmp_path))  # the default: ~/.ssh/known_hosts, which does not exist here
    for file in (known, None):
        r = sshd.runner(known_hosts=file)
        try:
            with pytest.raises(WorkerStartError, match=r"host key is not trusted.*ssh-keyscan"):
                r.run(definition, [], kernel_solution("honest.cpp"), quick_config(), None)
        finally:
            r.close()
    r = sshd.runner(known_hosts=tmp_path / "missing")
    try:
        with pytest.raises(WorkerStartError, match=r"known_hosts file .* does not exist"):
            r.run(definition, [], kernel_solution("honest.cpp"), quick_config(), None)
    finally:
        r.close()


@pytest.mark.parametrize(
    "command",
    [
        ["/usr/bin/python3", "-m", "evoteam.gpu_bench.worker"],  # a python without evoteam
        ["evoteam-not-installed-here", "worker"],
    ],
)
def test_a_host_without_evoteam_says_how_to_install_it(sshd: Sshd, definition: Definition, command: list[str]) -> None:
    if command[0].startswith("/") and not Path(command[0]).exists():
        pytest.skip(f"{command[0]} is not here")
    r = sshd.runner(remote_command=command)
    try:
        with pytest.raises(WorkerStartError, match=r"evoteam is not installed there.*pip install evoteam") as info:
            r.run(definition, [], kernel_solution("honest.cpp"), quick_config(), None)
        assert command[0] in str(info.value)
    finally:
        r.close()


SLOW_FIRST_CALL = """
#include <cstdint>
#include <unistd.h>
static int calls = 0;
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  if (n > 10000 && calls++ == 0) usleep(2000000);
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
"""


class Dropper:
    """Drops every SSH connection ``delay_s`` after the workload before ``uuid`` reports (its evaluation runs)."""

    def __init__(self, sshd: Sshd, before: str, delay_s: float) -> None:
        self._before = before
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._drop, args=(sshd, delay_s))
        self._thread.start()

    def progress(self, run: WorkloadRun) -> None:
        if run.workload.uuid == self._before:
            self._started.set()

    def _drop(self, sshd: Sshd, delay_s: float) -> None:
        if self._started.wait(30):
            time.sleep(delay_s)
            sshd.drop_connections()

    def join(self) -> None:
        self._started.set()
        self._thread.join()


def test_a_dropped_connection_reconnects_and_reruns_the_evaluation(
    sshd: Sshd, definition: Definition, workloads: list[Workload]
) -> None:
    honest = kernel_solution("honest.cpp")
    slow = honest.model_copy(
        update={"name": "slow_first_call", "sources": [SourceFile(path="honest.cpp", content=SLOW_FIRST_CALL)]}
    )
    large = workloads.index(next(w for w in workloads if w.axes["n"] > 10000))
    r = sshd.runner()
    dropper = Dropper(sshd, workloads[large - 1].uuid, 0.7)  # inside the kernel's 2 s sleep
    try:
        run = r.run(definition, workloads, slow, quick_config(measure=False), None, dropper.progress)
        assert r.reconnects == 1 and r.worker_starts == 2
        assert [w.outcome.status for w in run.workloads] == [EvaluationStatus.PASSED] * len(workloads)
    finally:
        dropper.join()
        r.close()
    assert _settled(lambda: sshd.remote_workers(helpers=True)) == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _spinning(pid: int, timeout_s: float = 20.0) -> bool:
    """Waits until ``pid`` or a child of it (the native host a C kernel runs in) stays runnable for half a
    second (an idle or compiling worker sleeps)."""
    deadline, running = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline and running < 10:
        family = [pid, *_children(pid)]
        running = running + 1 if any(_state(p) == "R" for p in family) else 0
        time.sleep(0.05)
    return running >= 10


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in listing.read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def test_a_worker_lost_with_its_connection_is_killed_after_reconnecting(
    sshd: Sshd, definition: Definition, workloads: list[Workload]
) -> None:
    r = sshd.runner()
    try:
        r.run(definition, workloads[:1], kernel_solution("honest.cpp"), quick_config(measure=False), None)
        [warm] = sshd.remote_workers()
        dropped: list[bool] = []

        def drop() -> None:
            dropped.append(_spinning(warm))
            sshd.drop_connections()

        dropper = threading.Thread(target=drop)
        dropper.start()
        try:
            spin = kernel_solution("never_returns.cpp")
            run = r.run(definition, workloads[:1], spin, quick_config(timeout_s=4.0), None)
        finally:
            dropper.join()
        assert dropped == [True] and r.reconnects == 1
        assert run.workloads[0].outcome.status == EvaluationStatus.TIMEOUT
        assert _settled(lambda: _state(warm) not in ("gone", "Z"), 2.0) is False  # it would spin forever
        assert _settled(lambda: sshd.remote_workers(helpers=True)) == []
    finally:
        r.close()


def test_close_leaves_nothing_running_on_the_host(
    sshd: Sshd, definition: Definition, workloads: list[Workload]
) -> None:
    r = sshd.runner()
    try:
        run = r.run(definition, workloads[:1], kernel_solution("never_returns.cpp"), quick_config(timeout_s=1.0), None)
        assert run.workloads[0].outcome.status == EvaluationStatus.TIMEOUT
        r.run(definition, workloads[:1], kernel_solution("honest.cpp"), quick_config(measure=False), None)
        assert len(sshd.remote_workers()) == 1  # a fresh warm worker
    finally:
        r.close()
    assert _settled(lambda: sshd.remote_workers(helpers=True)) == []
    assert _settled(lambda: [p for p in _descendants(sshd.proc.pid) if _comm(p) != "sshd"]) == []


def test_runner_strings() -> None:
    assert parse_runner("local").kind == "local"
    assert parse_runner("ray").model_dump() == {"kind": "ray", "address": None}
    assert parse_runner("ray://head:10001").address == "ray://head:10001"
    assert parse_runner("ssh://me@gpu-box:2222").address == "ssh://me@gpu-box:2222"
    assert SshTarget.parse("ssh://me@[::1]:2200") == SshTarget(host="::1", user="me", port=2200)
    assert SshTarget.parse("gpu-box") == SshTarget(host="gpu-box")
    for bad in ("sssh://x", "ssh://", "ssh://a@b:99999", "ray://", "kubernetes"):
        with pytest.raises(RunnerSpecError):
            parse_runner(bad)
    local = make_runner("local")
    assert isinstance(local, LocalRunner)
    local.close()


def _cli(home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "bench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_the_command_line_runs_over_ssh_and_refuses_a_bad_runner(sshd: Sshd, tmp_path: Path) -> None:
    solution = tmp_path / "honest.json"
    solution.write_text(kernel_solution("honest.cpp").to_json())
    files = ["--definition", DATA / "scale_add.json", "--workloads", DATA / "scale_add.jsonl", "--solution", solution]
    quick = ["--max-time", "0.05", "--flush", "none", "--json"]
    done = _cli(sshd.home, *files, *quick, "--runner", f"ssh://{_user()}@127.0.0.1:{sshd.port}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "PASSED"
    for bad in ("ssh://", "kubernetes://x"):
        done = _cli(sshd.home, *files, "--runner", bad)
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "--runner" in done.stderr


def test_a_gpu_worker_sees_only_its_gpu_and_has_no_memory_limit(
    sshd: Sshd, tmp_path: Path, definition: Definition
) -> None:
    seen = tmp_path / "seen"
    probe = f'echo "$CUDA_VISIBLE_DEVICES $*" > {seen}; exec "$0" -m evoteam.gpu_bench.worker "$@"'
    r = sshd.runner(remote_command=["sh", "-c", probe, sys.executable], gpu=3, memory_limit_mb=4096)
    try:
        run = r.run(definition, [], kernel_solution("honest.cpp"), quick_config(), None)
        assert run.ok
    finally:
        r.close()
    cuda, *argv = seen.read_text().split()
    assert cuda == "3" and "--memory-limit-mb" not in argv and "--log" in argv
