"""``$/progress`` (server-created workDoneProgress) for every running run of the repository: begun when the run
shows up, reported on each change of its journal (round, team, best speedup, tokens used of the budget), ended
when it finishes (or its process is gone). Cancellable: the client's ``window/workDoneProgress/cancel`` asks
the run to stop as ``evoteam cancel RUN`` does. Only for clients that support workDoneProgress."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from lsprotocol import types as lsp

from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.messages import RUN_PROGRESS_PREFIX
from evoteam.server.run_index import RunEntry, running
from evoteam.supervisor.state import run_dir

log = logging.getLogger("evoteam.server")
CREATE_TIMEOUT = 10.0
"""Seconds the client may take to accept a progress token."""
CHECK_EVERY = 30.0
"""Seconds without a change after which a run's process is checked (a killed run writes nothing more)."""


def token_of(run: str) -> str:
    return f"{RUN_PROGRESS_PREFIX}{run}"


def progress_message(entry: RunEntry) -> str:
    """``round 2/3 · Optimizer, Debugger · best 1.34x · 12,345/200,000 tokens``."""
    state, config = entry.state, entry.state.config
    assert config is not None
    started = max(state.rounds_started, default=0)
    where = f"round {started}/{config.rounds}" if started else "starting"
    team = ", ".join(state.team.roles) if state.team else "no team"
    best = f"best {state.best_speedup:.2f}x" if state.best_speedup is not None else "no best yet"
    return f"{where} · {team} · {best} · {state.spent:,}/{config.budget:,} tokens"


def percentage(entry: RunEntry) -> int:
    config = entry.state.config
    assert config is not None
    return min(100, 100 * len(entry.state.rounds_finished) // config.rounds)


def end_message(entry: RunEntry | None, stopped: bool = False) -> str:
    if entry is None:
        return "removed"
    reason = entry.state.finished or ("stopped without finishing" if stopped else "finished")
    best = entry.state.best_speedup
    return f"{reason} · " + (f"best {best:.2f}x" if best is not None else "no passing candidate")


class RunProgress(Feature):
    name = "progress"

    def __init__(self) -> None:
        self.changes: dict[str, asyncio.Event] = {}
        """Runs followed → set when their journal changed."""
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.runs: dict[str, str] = {}
        """Progress token → run, for the tokens begun."""

    def register(self, server: EvoteamServer) -> None:
        @server.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
        async def cancel(ls: EvoteamServer, params: lsp.WorkDoneProgressCancelParams) -> None:
            await self.cancel(ls, str(params.token))

    async def runs_changed(self, server: EvoteamServer, runs: list[str]) -> None:
        if not _supported(server):
            return
        for run in runs:
            event = self.changes.get(run)
            if event is not None:
                event.set()
                continue
            entry = server.index.get(run)
            if entry is not None and running(entry, server.project.root):
                self.changes[run] = asyncio.Event()
                self.tasks[run] = asyncio.get_running_loop().create_task(self.follow(server, run))

    async def follow(self, ls: EvoteamServer, run: str) -> None:
        """Begin, report on every change, end: one run's progress, until it finishes."""
        token = token_of(run)
        changed = self.changes[run]
        try:
            await asyncio.wait_for(ls.work_done_progress.create_async(token), CREATE_TIMEOUT)
        except Exception as exc:  # the client refused or did not answer: no progress for this run
            log.warning("no progress for run %s: %r", run, exc)
            self._drop(run)
            return
        self.runs[token] = run
        entry = ls.index.get(run)
        ls.work_done_progress.begin(
            token,
            lsp.WorkDoneProgressBegin(
                title=f"evoteam {run}",
                cancellable=True,
                message=progress_message(entry) if entry else None,
                percentage=percentage(entry) if entry else 0,
            ),
        )
        stopped = False
        try:
            while True:
                entry = ls.index.get(run)
                if entry is None or entry.state.finished is not None or stopped:
                    break
                ls.work_done_progress.report(
                    token, lsp.WorkDoneProgressReport(message=progress_message(entry), percentage=percentage(entry))
                )
                try:
                    await asyncio.wait_for(changed.wait(), CHECK_EVERY)
                except TimeoutError:
                    stopped = not running(entry, ls.project.root)
                changed.clear()
        finally:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=end_message(entry, stopped)))
            ls.work_done_progress.tokens.pop(token, None)  # a run resumed later begins afresh with the same token
            self._drop(run)

    async def cancel(self, ls: EvoteamServer, token: str) -> None:
        """The client cancelled a run's progress: ask the run to stop (it ends the progress when it does)."""
        run = self.runs.get(token)
        entry = ls.index.get(run) if run is not None else None
        if run is None or entry is None or entry.state.finished is not None:
            return
        marker = run_dir(ls.project.root, run) / "cancel"
        await ls.in_background(marker.write_text, "cancel requested\n")
        ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message="cancel requested; stopping"))

    def stop(self, server: EvoteamServer) -> None:
        for task in list(self.tasks.values()):
            task.cancel()

    def _drop(self, run: str) -> None:
        self.changes.pop(run, None)
        self.tasks.pop(run, None)
        with contextlib.suppress(KeyError):
            del self.runs[token_of(run)]


def _supported(ls: EvoteamServer) -> bool:
    window = ls.client_capabilities.window
    return bool(window is not None and window.work_done_progress)


FEATURE = RunProgress()
