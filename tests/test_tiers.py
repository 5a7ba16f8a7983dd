"""The test tiers (tests/tiers.py): a test without exactly one tier fails collection, and a unit test that starts
a process, touches the network or sleeps fails, even when the code under test catches the error. Each check runs
a small pytest session of its own in a subprocess, with the plugin loaded as this suite loads it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import TESTS

pytestmark = pytest.mark.integration

INI = """
[pytest]
addopts = -p no:cacheprovider --strict-markers
markers =
    unit: tier
    integration: tier
    e2e: tier
    hardening: tier
    gpu: tier
"""


def session(folder: Path, tests: str, *args: str, probe: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``pytest -rA`` over ``tests`` (one module) in ``folder``, with the tiers plugin as tests/conftest.py loads it."""
    (folder / "pytest.ini").write_text(INI)
    (folder / "conftest.py").write_text('pytest_plugins = ["tiers"]\n')
    (folder / "test_inner.py").write_text(textwrap.dedent(tests))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "EVOTEAM_TIER"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # none of the installed plugins is needed here
    if probe is not None:
        env["EVOTEAM_TIER_PROBE"] = str(probe)
    command = [sys.executable, "-m", "pytest", "-rA", *args, str(folder / "test_inner.py")]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


GUARDED = """
import asyncio
import os
import socket
import subprocess
import threading
import time

import pytest


@pytest.mark.unit
def test_a_process():
    subprocess.run(["true"], check=True)


@pytest.mark.unit
def test_os_system():
    os.system("true")


@pytest.mark.unit
def test_an_asyncio_subprocess():
    async def start():
        proc = await asyncio.create_subprocess_exec("true")
        await proc.wait()

    asyncio.run(start())


@pytest.mark.unit
def test_binding_a_socket():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


@pytest.mark.unit
def test_connecting():
    with socket.socket() as s:
        s.connect_ex(("127.0.0.1", 9))


@pytest.mark.unit
def test_sleeping():
    time.sleep(0.01)


@pytest.mark.unit
def test_sleeping_in_a_thread_it_started():
    thread = threading.Thread(target=time.sleep, args=(0.01,))
    thread.start()
    thread.join()


@pytest.mark.unit
def test_a_violation_the_code_swallows():
    try:
        subprocess.run(["true"])
    except Exception:
        pass


@pytest.fixture
def server_socket():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s


@pytest.mark.unit
def test_a_fixture_that_binds(server_socket):
    assert server_socket


@pytest.mark.unit
def test_pure_code_and_a_zero_sleep():
    time.sleep(0)
    assert sorted([3, 1, 2]) == [1, 2, 3]


@pytest.mark.integration
def test_an_integration_test_may_do_all_of_it():
    subprocess.run(["true"], check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
    time.sleep(0.01)
"""


def test_a_unit_test_that_spawns_connects_or_sleeps_fails(tmp_path: Path) -> None:
    done = session(tmp_path, GUARDED)
    out = done.stdout
    failed = sorted(line.split("::")[1].split()[0] for line in out.splitlines() if line.startswith(("FAILED", "ERROR")))
    passed = sorted(line.split("::")[1].split()[0] for line in out.splitlines() if line.startswith("PASSED"))
    assert failed == [
        "test_a_fixture_that_binds",
        "test_a_process",
        "test_a_violation_the_code_swallows",
        "test_an_asyncio_subprocess",
        "test_binding_a_socket",
        "test_connecting",
        "test_os_system",
        "test_sleeping",
        "test_sleeping_in_a_thread_it_started",
    ], out[-4000:]
    assert passed == ["test_an_integration_test_may_do_all_of_it", "test_pure_code_and_a_zero_sleep"], out[-4000:]
    assert "a unit-tier test may not use subprocess" in out and "(the error was caught on the way)" in out
    assert "a unit-tier test may not use the network (socket.bind)" in out
    assert "a unit-tier test may not use time.sleep" in out


def test_the_probe_records_instead_of_failing(tmp_path: Path) -> None:
    probe = tmp_path / "probe.tsv"
    done = session(tmp_path, GUARDED, probe=probe)
    assert done.returncode == 0, done.stdout[-3000:]
    rows = {tuple(line.split("\t")) for line in probe.read_text().splitlines()}
    assert ("test_inner.py::test_a_process", "call", "subprocess (subprocess.Popen)") in rows
    assert ("test_inner.py::test_a_fixture_that_binds", "setup", "the network (socket.bind)") in rows
    assert ("test_inner.py::test_an_integration_test_may_do_all_of_it", "call", "time.sleep") in rows
    assert not any(row[0].endswith("test_pure_code_and_a_zero_sleep") for row in rows)


def test_a_test_without_exactly_one_tier_fails_collection(tmp_path: Path) -> None:
    done = session(
        tmp_path,
        """
        import pytest

        pytestmark = pytest.mark.unit


        def test_from_the_module():
            pass


        @pytest.mark.integration
        def test_with_two_tiers():
            pass
        """,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    told = done.stderr
    assert (
        "1 test(s) need exactly one tier marker" in told
        and "test_inner.py::test_with_two_tiers: integration, unit" in told
    )
    assert "test_from_the_module" not in told
    untiered = session(tmp_path, "def test_nothing():\n    pass\n")
    assert (
        untiered.returncode == pytest.ExitCode.USAGE_ERROR and "test_inner.py::test_nothing: no tier" in untiered.stderr
    )
