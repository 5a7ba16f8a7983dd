"""The sandbox: what a confined process sees (a cleared environment, no secrets, a read-only root, no network,
its own PID namespace) and that it dies with its parent; the probe's answers where bubblewrap is missing or
broken; ``evoteam evolve`` and the editor refusing to run agents without a sandbox unless told to.

Tests of the real confinement need bubblewrap and skip without it; the probe and refusal tests run anywhere.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening import REQUIRED_ENV, needs_sandbox, processes_mentioning, record
from lsp_support import lsp_session, sample_repo
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from conftest import cli_env, evoteam
from evoteam.gpu_bench import sandbox
from evoteam.gpu_bench.build.check import check_solution
from evoteam.gpu_bench.sandbox.bwrap import Bubblewrap
from evoteam.gpu_bench.schema import Binding, BuildSpec, Language, Solution, SourceFile
from evoteam.gpu_bench.timing.gpu_lock import gpu_lock
from evoteam.gpu_bench.worker.client import confined
from evoteam.gpu_bench.worker.strays import PROCESS_HEADROOM, task_count

pytestmark = pytest.mark.hardening

ISOLATED = sandbox.probe()
needs_bwrap = needs_sandbox()


@pytest.mark.skipif(os.environ.get(REQUIRED_ENV) != "1", reason=f"{REQUIRED_ENV} is not set")
def test_the_sandbox_is_there_where_it_is_required() -> None:
    assert ISOLATED.isolated, ISOLATED.description


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """This process's sandbox choice, forgotten before and after (a test sets ``EVOTEAM_SANDBOX``)."""
    sandbox.reset()
    yield monkeypatch
    monkeypatch.undo()
    sandbox.reset()


def secret_home(root: Path) -> Path:
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-PLANTED")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("AWS-SECRET-PLANTED")
    (home / "notes.txt").write_text("an ordinary file")
    (home / "key").write_text("sk-ant-KEY-FILE-PLANTED")
    return home


def confined_python(tmp_path: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``code`` run by this Python inside the real sandbox, ``tmp_path/work`` writable."""
    argv, confined_env = ISOLATED.wrap(
        [sys.executable, "-c", textwrap.dedent(code)], writable=[tmp_path / "work"], tmpdir=tmp_path / "tmp", env=env
    )
    return subprocess.run(argv, env=confined_env, capture_output=True, text=True, timeout=60, check=False)


@needs_bwrap
def test_inside_the_environment_is_cleared_and_the_secrets_are_gone(tmp_path: Path) -> None:
    home = secret_home(tmp_path)
    env = {
        **os.environ,
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-ENV-PLANTED",
        "AWS_SECRET_ACCESS_KEY": "aws-env-planted",
        "GITHUB_TOKEN": "ghp-planted",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "EVOTEAM_API_KEY_FILE": str(home / "key"),
        "EVOTEAM_SOMETHING": "kept",
        "OMP_NUM_THREADS": "2",
        "MALLOC_MMAP_THRESHOLD_": "33554432",
    }
    seen = confined_python(
        tmp_path,
        """
        import json, os, pathlib
        home = pathlib.Path.home()
        def read(p):
            try:
                return pathlib.Path(p).read_text()
            except OSError as exc:
                return type(exc).__name__
        print(json.dumps({
            "env": dict(os.environ),
            "ssh": sorted(os.listdir(home / ".ssh")),
            "aws": read(home / ".aws" / "credentials"),
            "key": read(home / "key"),
            "notes": read(home / "notes.txt"),
            "pid": os.getpid(),
            "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
        }))
        """,
        env,
    )
    assert seen.returncode == 0, seen.stderr
    found = json.loads(seen.stdout)
    names = set(found["env"])
    planted = {"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK"}
    visible = len(names & planted) + (found["ssh"] != []) + (found["aws"] != "FileNotFoundError")
    visible += found["key"] != "PermissionError"
    figure = f"4 variables, ~/.ssh, ~/.aws, the key file: {visible} of 7 visible; {found['processes']} processes seen"
    record("sandbox", "environment and secrets", figure, visible == 0 and "PLANTED" not in seen.stdout)
    assert not names & planted
    assert found["env"]["EVOTEAM_SOMETHING"] == "kept" and found["env"]["OMP_NUM_THREADS"] == "2"
    assert found["env"]["MALLOC_MMAP_THRESHOLD_"] == "33554432"  # the worker's heap policy (worker/allocator.py)
    assert found["env"]["EVOTEAM_IN_SANDBOX"] == "1" and found["env"]["TMPDIR"] == str(tmp_path / "tmp")
    assert found["ssh"] == [] and found["aws"] == "FileNotFoundError" and found["key"] == "PermissionError"
    assert found["notes"] == "an ordinary file"  # the rest of the home folder stays readable
    assert found["processes"] <= 3, "a PID namespace of its own: bubblewrap's init, python, nothing else"
    assert "PLANTED" not in seen.stdout


@needs_bwrap
def test_inside_only_the_workspace_is_writable_and_there_is_no_network(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    outside = tmp_path / "outside.txt"
    seen = confined_python(
        tmp_path,
        f"""
        import json, pathlib, socket
        def write(p):
            try:
                pathlib.Path(p).write_text("x")
                return "written"
            except OSError as exc:
                return exc.strerror
        def connect():
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                return "connected"
            except OSError as exc:
                return exc.strerror
        print(json.dumps({{
            "workspace": write("{tmp_path / "work" / "ok.txt"}"),
            "outside": write("{outside}"),
            "root": write("/usr/evoteam-escape"),
            "network": connect(),
        }}))
        """,
        dict(os.environ),
    )
    try:
        listener.accept()
        reached = True
    except TimeoutError:
        reached = False
    finally:
        listener.close()
    assert seen.returncode == 0, seen.stderr
    found = json.loads(seen.stdout)
    figure = f"workspace: {found['workspace']}; outside: {found['outside']}; /usr: {found['root']}; "
    figure += f"127.0.0.1: {found['network']}" + (" (reached)" if reached else "")
    blocked = found["outside"] == found["root"] == "Read-only file system" and not reached
    record("sandbox", "writes and network", figure, blocked and found["workspace"] == "written")
    assert found["workspace"] == "written" and (tmp_path / "work" / "ok.txt").is_file()
    assert found["outside"] == "Read-only file system" and not outside.exists()
    assert found["root"] == "Read-only file system"
    assert found["network"] != "connected" and not reached


@needs_bwrap
def test_inside_dev_shm_holds_no_more_than_its_cap(tmp_path: Path) -> None:
    """A tmpfs is memory that no address-space limit counts: by default it grows to half the machine's. The
    sandbox's ``/dev/shm`` takes a named semaphore and small files, and refuses writes past its cap."""
    assert isinstance(ISOLATED, Bubblewrap)
    if ISOLATED.shared_memory is None:
        pytest.skip(f"this bubblewrap sets no tmpfs size ({ISOLATED.description})")
    cap = ISOLATED.shared_memory
    seen = confined_python(
        tmp_path,
        f"""
        import json, multiprocessing, os
        multiprocessing.Lock()  # a named semaphore in /dev/shm, unlinked at once
        written, error = 0, None
        chunk = b"x" * (1 << 20)
        try:
            with open("/dev/shm/fill", "wb") as f:
                while written <= {cap}:
                    f.write(chunk)
                    f.flush()
                    written += len(chunk)
        except OSError as exc:
            error = exc.strerror
        print(json.dumps({{"written": written, "error": error}}))
        """,
        dict(os.environ),
    )
    assert seen.returncode == 0, seen.stderr
    found = json.loads(seen.stdout)
    held = found["error"] == "No space left on device" and found["written"] <= cap
    record("sandbox", "/dev/shm capped", f"{found['written'] >> 20} MiB written, then: {found['error']}", held)
    assert held, found


@needs_bwrap
def test_a_sandboxed_process_dies_with_its_parent(tmp_path: Path) -> None:
    token = f"evoteam-orphan-{os.getpid()}-{time.monotonic_ns()}"
    argv, env = ISOLATED.wrap(
        ["/bin/sh", "-c", f"exec -a {token} sleep 600"], writable=[], tmpdir=tmp_path / "tmp", env=dict(os.environ)
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess; subprocess.Popen({argv!r}, env={env!r}); input()"],
        stdin=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while not processes_mentioning(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(token), "the sandboxed sleep did not start"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert parent.stdin is not None
    parent.stdin.close()
    deadline = time.monotonic() + 10
    while processes_mentioning(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_mentioning(token)
    record("sandbox", "dies with its parent", f"parent killed -9; sandboxed processes left: {len(left)}", not left)
    assert not left


@needs_bwrap
def test_an_include_of_a_secret_finds_nothing_when_compiling(tmp_path: Path, fresh_choice: pytest.MonkeyPatch) -> None:
    home = secret_home(tmp_path)
    fresh_choice.setenv("HOME", str(home))
    source = f'#include "{home}/.ssh/id_rsa"\nextern "C" int scale_add() {{ return 0; }}\n'
    spec = BuildSpec(language=Language.CPP, target_hardware=["cpu"], entry_point="k.cpp::scale_add", binding=Binding.C)
    solution = Solution(
        name="k", definition="d", author="t", spec=spec, sources=[SourceFile(path="k.cpp", content=source)]
    )
    checked = check_solution(solution, None, tmp_path / "cache")
    missing = "No such file or directory" in checked.log
    leaked = "PRIVATE-KEY-PLANTED" in checked.log
    figure = f"ok={checked.ok}; the compiler: {'no such file' if missing else 'found it'}; key in the log: {leaked}"
    record("sandbox", "compile of #include ~/.ssh/id_rsa", figure, not checked.ok and missing and not leaked)
    assert not checked.ok
    assert "PRIVATE-KEY-PLANTED" not in checked.log and "No such file or directory" in checked.log


def test_the_probe_says_why_there_is_no_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap anywhere on it
    missing = sandbox.probe()
    assert not missing.isolated and missing.description == "no sandbox (bubblewrap (bwrap) is not installed)"
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    refused = sandbox.probe(str(broken))
    assert not refused.isolated and "No permissions to create new namespace" in refused.description
    command, env = refused.wrap(["true"], writable=[], tmpdir=tmp_path, env={"A": "1"})
    assert command == ["true"] and env == {"A": "1"}  # unconfined: as it was


def test_the_mode_comes_from_the_environment(fresh_choice: pytest.MonkeyPatch) -> None:
    fresh_choice.setenv(sandbox.MODE_ENV, "off")
    off = sandbox.current()
    assert not off.isolated and "EVOTEAM_SANDBOX=off" in off.description
    with pytest.raises(sandbox.SandboxUnavailable, match=r"apt install bubblewrap.*--unsafe-no-sandbox"):
        sandbox.agent_sandbox(unsafe_no_sandbox=False)
    assert sandbox.agent_sandbox(unsafe_no_sandbox=True) is off
    sandbox.reset()
    fresh_choice.setenv(sandbox.MODE_ENV, "sometimes")
    with pytest.raises(sandbox.SandboxUnavailable, match="expected one of auto, bwrap, off"):
        sandbox.current()
    sandbox.reset()
    fresh_choice.setenv(sandbox.MODE_ENV, "bwrap")
    fresh_choice.setenv("PATH", "/nonexistent")
    with pytest.raises(sandbox.SandboxUnavailable, match="EVOTEAM_SANDBOX=bwrap but no sandbox"):
        sandbox.current()
    fresh_choice.setenv(sandbox.IN_SANDBOX_ENV, "1")  # already inside: nothing to wrap, nothing to refuse
    assert sandbox.current().isolated


def test_the_process_limit_leaves_headroom_over_what_runs_now() -> None:
    assert task_count() >= 1 and PROCESS_HEADROOM >= 256


def test_evolve_refuses_without_a_sandbox_and_runs_with_the_unsafe_flag(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    env = {**cli_env(repo), sandbox.MODE_ENV: "off"}
    args = ("evolve", "scale_add", "--rounds", "1", "--team", "single", "--llm", "offline", "--evaluations", "2")
    refused = evoteam(repo, *args, env=env)
    runs = repo / ".evoteam" / "runs"
    started = len(list(runs.iterdir())) if runs.exists() else 0
    ran = evoteam(repo, *args, "--unsafe-no-sandbox", env=env)
    warned = "WITHOUT a sandbox" in ran.stderr
    figure = f"without the flag: exit {refused.returncode}, runs started {started}; with it: exit {ran.returncode}"
    figure += f", warned: {warned}"
    held = refused.returncode == 2 and started == 0 and ran.returncode == 0 and warned
    record("sandbox", "evolve where no sandbox works", figure, held)
    assert refused.returncode == 2 and started == 0
    assert "needs a sandbox" in refused.stderr and "--unsafe-no-sandbox" in refused.stderr
    assert ran.returncode == 0, ran.stderr
    assert warned
    [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
    shown = json.loads(evoteam(repo, "show", run, "--json", env=env).stdout)
    assert shown["config"]["unsafe_no_sandbox"] is True


async def test_the_editor_is_told_why_evolve_is_refused(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    async with lsp_session(repo, env={sandbox.MODE_ENV: "off"}) as client:
        with pytest.raises(JsonRpcException, match=r"evoteam\.unsafeNoSandbox"):
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="evoteam.evolve", arguments=[(repo / "kernel.cpp").as_uri()])
            )
        errors = [m.message for m in client.messages if m.type == lsp.MessageType.Error]
        told = [m for m in errors if "Evolve refused" in m and "Install bubblewrap" in m]
        runs = list((repo / ".evoteam" / "runs").glob("*")) if (repo / ".evoteam" / "runs").exists() else []
        figure = f"evoteam.evolve failed; error notifications saying why: {len(told)}; runs started: {len(runs)}"
        record("sandbox", "the editor where no sandbox works", figure, bool(told) and not runs)
        assert told, errors
        assert not runs


@needs_bwrap
def test_a_confined_worker_shares_the_gpu_locks_of_this_machine(
    tmp_path: Path, fresh_choice: pytest.MonkeyPatch
) -> None:
    fresh_choice.setenv("EVOTEAM_GPU_LOCKS", str(tmp_path / "locks"))
    probe = "from evoteam.gpu_bench.timing.gpu_lock import GpuLockTimeout, gpu_lock\n"
    probe += "try:\n    with gpu_lock('gpu-0', wait_s=0.3):\n        print('got it')\n"
    probe += "except GpuLockTimeout:\n    print('held by another')\n"
    argv, env = confined([sys.executable, "-c", probe], dict(os.environ), tmp_path / "worker", tmp_path / "cache")
    assert env["EVOTEAM_GPU_LOCKS"] == str(tmp_path / "locks")
    free = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    with gpu_lock("gpu-0"):  # held out here: the worker inside must wait for the same lock
        held = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert free.stdout.strip() == "got it", free.stderr
    assert held.stdout.strip() == "held by another", held.stderr
