"""The test tiers (a pytest plugin that tests/conftest.py loads): every test carries exactly one tier marker, and
the unit tier's promise is enforced, not just declared.

Tiers (registered in pyproject.toml; see docs/testing.md):

- ``unit``: no subprocess, no network, no sleeps; the whole tier runs in about a minute (``scripts/test --fast``);
- ``integration``: worker processes, the CLI, the language server, git, loopback servers;
- ``e2e``: real clients and hosts: VS Code, Neovim, SSH, Ray;
- ``hardening``: the reliability checks of ``scripts/hardening`` (sandbox, faults, kill -9, secrets, fuzzing);
- ``gpu``: needs a CUDA GPU (skipped without one).

A module declares its tier once (``pytestmark = pytest.mark.unit``); a module that mixes tiers marks each test.
Collection fails for any test without exactly one tier. While a ``unit`` test sets up and runs, starting a
process (``subprocess``, ``os.fork``/``system``/``posix_spawn``, ``multiprocessing``, asyncio's subprocesses go
through ``subprocess``), connecting, binding or sending on a socket, and ``time.sleep`` raise
``TierViolation``; a violation that the code under test swallows still fails the test. Threads that were
already running when the test started (a session's helpers) are left alone.

``EVOTEAM_TIER_PROBE=FILE`` turns the guard into a probe for every test, whatever its tier: nothing raises,
and each test that would have broken the unit tier's promise is written to FILE (``nodeid<TAB>what`` lines);
the tier check is off. That is how to find tests that could move to the unit tier.
"""

from __future__ import annotations

import multiprocessing.util
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TIERS = ("unit", "integration", "e2e", "hardening", "gpu")
PROBE_ENV = "EVOTEAM_TIER_PROBE"


class TierViolation(RuntimeError):
    """A unit-tier test did what its tier promises not to (a process, the network, a sleep)."""


def tiers_of(item: pytest.Item) -> set[str]:
    """The tier markers on ``item`` (its own, its class's and its module's)."""
    return {mark.name for mark in item.iter_markers() if mark.name in TIERS}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fails collection, naming them, for tests with no tier or with more than one."""
    if os.environ.get(PROBE_ENV):
        return
    wrong = [(item.nodeid, sorted(tiers_of(item))) for item in items if len(tiers_of(item)) != 1]
    if wrong:
        shown = "\n".join(f"  {nodeid}: {', '.join(tiers) or 'no tier'}" for nodeid, tiers in wrong[:50])
        more = f"\n  ... and {len(wrong) - 50} more" if len(wrong) > 50 else ""
        raise pytest.UsageError(
            f"{len(wrong)} test(s) need exactly one tier marker ({', '.join(TIERS)}): declare it at module level "
            f"(pytestmark = pytest.mark.unit) or on each test (see docs/testing.md)\n{shown}{more}"
        )


class Guard:
    """Patches the process, socket and sleep entry points; each call from a guarded thread is a violation."""

    def __init__(self, raising: bool) -> None:
        self.raising = raising
        self.violations: list[str] = []
        self._exempt = {t.ident for t in threading.enumerate() if t is not threading.current_thread()}

    def _blocked(self, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() in self._exempt:
                return original(*args, **kwargs)
            self.violations.append(what)
            if self.raising:
                raise TierViolation(f"a unit-tier test may not use {what}: mark the test integration (docs/testing.md)")
            return original(*args, **kwargs)

        return guarded

    def _sleep(self, original: Callable[[float], None]) -> Callable[[float], None]:
        blocked = self._blocked("time.sleep", original)

        def sleep(seconds: float) -> None:
            if seconds <= 0:  # yielding the GIL is not a wait
                return original(seconds)
            return blocked(seconds)  # type: ignore[no-any-return]

        return sleep

    @contextmanager
    def active(self) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as mp:
            targets: list[tuple[object, str, str]] = [
                (subprocess.Popen, "_execute_child", "subprocess (subprocess.Popen)"),
                (os, "fork", "os.fork"),
                (os, "forkpty", "os.forkpty"),
                (os, "system", "os.system"),
                (os, "posix_spawn", "os.posix_spawn"),
                (os, "posix_spawnp", "os.posix_spawnp"),
                (multiprocessing.util, "spawnv_passfds", "multiprocessing (a spawned process)"),
                (socket.socket, "connect", "the network (socket.connect)"),
                (socket.socket, "connect_ex", "the network (socket.connect_ex)"),
                (socket.socket, "bind", "the network (socket.bind)"),
                (socket.socket, "sendto", "the network (socket.sendto)"),
            ]
            for owner, name, what in targets:
                if hasattr(owner, name):
                    mp.setattr(owner, name, self._blocked(what, getattr(owner, name)))
            mp.setattr(time, "sleep", self._sleep(time.sleep))
            yield


def _probe_file() -> Path | None:
    value = os.environ.get(PROBE_ENV)
    return Path(value) if value else None


@contextmanager
def _guarded(item: pytest.Item, phase: str) -> Iterator[Guard | None]:
    probe = _probe_file()
    if probe is None and "unit" not in tiers_of(item):
        yield None
        return
    guard = Guard(raising=probe is None)
    with guard.active():
        yield guard
    if probe is not None and guard.violations:
        with probe.open("a") as out:
            for what in sorted(set(guard.violations)):
                out.write(f"{item.nodeid}\t{phase}\t{what}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, None]:
    """The fixtures a unit test sets up (module and session ones first set up for it included) are guarded."""
    with _guarded(item, "setup") as guard:
        outcome = yield
    _fail_if_swallowed(guard, outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    with _guarded(item, "call") as guard:
        outcome = yield
    _fail_if_swallowed(guard, outcome)


def _fail_if_swallowed(guard: Guard | None, outcome: Any) -> None:
    """A violation the code under test caught (``except Exception``) still fails the test."""
    if guard is not None and guard.raising and guard.violations and outcome.excinfo is None:
        what = ", ".join(sorted(set(guard.violations)))
        outcome.force_exception(TierViolation(f"a unit-tier test used {what} (the error was caught on the way)"))
