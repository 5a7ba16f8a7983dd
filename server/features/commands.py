"""The ``evoteam.*`` commands (workspace/executeCommand): start and cancel runs, list them, their rounds and a
candidate's diff, accept a winner into the editor, and write a run's report. Their arguments and answers are
the models of ``server/messages.py``: bad arguments get an error answer that says what is wrong.

Runs are separate processes: ``evoteam.evolve`` starts ``evoteam evolve FILE --detach`` and the watcher shows
the run like any other.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pydantic import ValidationError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from evoteam.gpu_bench.api import current_sandbox
from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import run_summary
from evoteam.server.messages import (
    ACCEPT,
    CANCEL,
    CANDIDATE_DIFF,
    EVOLVE,
    REPORT,
    ROUNDS,
    RUNS,
    AcceptArgs,
    AcceptResult,
    BestRef,
    BranchRef,
    CancelResult,
    CandidateDiff,
    CandidateInfo,
    DiffArgs,
    EvolveArgs,
    EvolveResult,
    ReportResult,
    RoundInfo,
    RoundsResult,
    RunArgs,
    RunList,
)
from evoteam.server.run_index import RunEntry
from evoteam.server.settings import Settings
from evoteam.server.winner import FileCache, WinnerError, kernel_paths, replace_edit, run_task
from evoteam.supervisor.git_store import GitStore, GitStoreError, branch_name
from evoteam.supervisor.state import Candidate, run_dir

START_TIMEOUT = 120.0
"""Seconds ``evoteam evolve --detach`` may take to journal the run and print its id."""
REPORT_TIMEOUT = 300.0
"""Seconds ``evoteam report`` may take to plot and write a run's report."""


class RequestFailed(JsonRpcException):
    """The arguments are fine but the command cannot do it (no winner, the CLI refused): LSP's RequestFailed."""

    CODE = lsp.LSPErrorCodes.RequestFailed.value
    MESSAGE = "Request failed"


class Commands(Feature):
    name = "commands"

    def __init__(self) -> None:
        self.files = FileCache()

    def register(self, server: EvoteamServer) -> None:
        @server.command(EVOLVE.name)
        async def evolve(ls: EvoteamServer, *args: Any) -> Any:
            return EVOLVE.answer(await self.evolve(ls, EVOLVE.parse(args)))

        @server.command(CANCEL.name)
        async def cancel(ls: EvoteamServer, *args: Any) -> Any:
            return CANCEL.answer(await self.cancel(ls, CANCEL.parse(args)))

        @server.command(RUNS.name)
        async def runs(ls: EvoteamServer, *args: Any) -> Any:
            RUNS.parse(args)
            await ls.wait_ready()
            return RUNS.answer(RunList([run_summary(e) for e in ls.index.runs()]))

        @server.command(ROUNDS.name)
        async def rounds(ls: EvoteamServer, *args: Any) -> Any:
            return ROUNDS.answer(await self.rounds(ls, ROUNDS.parse(args)))

        @server.command(CANDIDATE_DIFF.name)
        async def candidate_diff(ls: EvoteamServer, *args: Any) -> Any:
            return CANDIDATE_DIFF.answer(await self.diff(ls, CANDIDATE_DIFF.parse(args)))

        @server.command(ACCEPT.name)
        async def accept(ls: EvoteamServer, *args: Any) -> Any:
            return ACCEPT.answer(await self.accept(ls, ACCEPT.parse(args)))

        @server.command(REPORT.name)
        async def report(ls: EvoteamServer, *args: Any) -> Any:
            return REPORT.answer(await self.report(ls, REPORT.parse(args)))

    # -- evolve and cancel ---------------------------------------------------------------------------------
    async def evolve(self, ls: EvoteamServer, args: EvolveArgs) -> EvolveResult:
        await ls.wait_ready()
        path = ls.path_of(args.uri)
        found = ls.project.task_for(path) if path is not None else None
        if path is None or found is None:
            why = ls.project.config_error(path) if path is not None else None
            raise JsonRpcInvalidParams(
                f"evoteam.evolve: {path or args.uri} is not a kernel task"
                + (f" ({why})" if why else "; no evoteam.toml entry has it as its source (a code action creates one)")
            )
        try:
            options = Settings.model_validate({**ls.settings.model_dump(), **args.options})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise JsonRpcInvalidParams(f"evoteam.evolve: options.{where}: {err['msg']}") from None
        command = [sys.executable, "-m", "evoteam.cli.main", "evolve", str(found.task.source)]
        command += ["--rounds", str(options.rounds), "--budget", str(options.budget), "--team", options.team]
        command += ["--llm", options.llm, "--runner", options.runner, "--evaluations", str(options.evaluations)]
        command += ["--model", options.model] if options.model else []
        confinement = await ls.in_background(current_sandbox)
        if not confinement.isolated and not options.unsafeNoSandbox:
            message = (
                f"evoteam: Evolve refused: agent-generated code needs a sandbox, and there is "
                f"{confinement.description}. Install bubblewrap, or set evoteam.unsafeNoSandbox to run it unconfined."
            )
            ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))
            raise RequestFailed(message)
        command += ["--unsafe-no-sandbox"] if options.unsafeNoSandbox else []
        run = await _start([*command, "--detach"], ls.project.root)
        if not confinement.isolated:
            warning = f"evoteam: run {run} runs agent-generated code WITHOUT a sandbox (evoteam.unsafeNoSandbox)"
            ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=warning))
        await ls.refresh_runs()
        return EvolveResult(run=run, sandbox=confinement.description)

    async def cancel(self, ls: EvoteamServer, args: RunArgs) -> CancelResult:
        entry = await _entry(ls, args.run)
        if entry.state.finished is not None:
            return CancelResult(run=entry.run, cancelled=False, finished=entry.state.finished)
        marker = run_dir(ls.project.root, entry.run) / "cancel"
        await ls.in_background(marker.write_text, "cancel requested\n")
        return CancelResult(run=entry.run, cancelled=True, finished=None)

    # -- rounds and diffs ----------------------------------------------------------------------------------
    async def rounds(self, ls: EvoteamServer, args: RunArgs) -> RoundsResult:
        entry = await _entry(ls, args.run)
        try:
            return await ls.in_background(_rounds, ls.project.root, entry)
        except GitStoreError as exc:
            raise RequestFailed(f"evoteam.rounds: {exc}") from None

    async def diff(self, ls: EvoteamServer, args: DiffArgs) -> CandidateDiff:
        entry = await _entry(ls, args.run)
        candidate = _candidate(entry, args.candidate)
        base = entry.state.base
        if candidate.sha is None or base is None:
            raise RequestFailed(f"evoteam.candidateDiff: candidate {candidate.id} of run {entry.run} has no commit")
        try:
            git = await ls.in_background(GitStore, ls.project.root, entry.run)
            paths = kernel_paths(git, run_task(ls.project, entry))
        except (GitStoreError, WinnerError) as exc:
            raise RequestFailed(f"evoteam.candidateDiff: {exc}") from None
        done, out, err = await _exec(["git", "diff", "--no-color", base, candidate.sha, "--", *paths], git.root, 60)
        if done != 0:
            raise RequestFailed(f"evoteam.candidateDiff: git diff failed: {err.strip() or done}")
        return CandidateDiff(
            run=entry.run,
            candidate=candidate.id,
            root=str(git.root),
            base=base,
            sha=candidate.sha,
            paths=paths,
            diff=out,
        )

    # -- accept ----------------------------------------------------------------------------------------------
    async def accept(self, ls: EvoteamServer, args: AcceptArgs) -> AcceptResult:
        entry = await _entry(ls, args.run)
        chosen = args.candidate or entry.state.best
        if chosen is None:
            raise RequestFailed(f"evoteam.accept: run {entry.run} has no passing candidate to accept")
        candidate = _candidate(entry, chosen)
        workspace = ls.client_capabilities.workspace
        if workspace is None or not workspace.apply_edit:
            raise RequestFailed(
                "evoteam.accept: the client cannot apply edits (workspace.applyEdit); use `evoteam accept`"
            )
        try:
            files = await ls.in_background(self.files.read, ls.project, entry, candidate)
        except WinnerError as exc:
            raise RequestFailed(f"evoteam.accept: {exc}") from None
        edit, changed = replace_edit(ls.workspace, files.files)
        answer = AcceptResult(
            applied=True,
            run=entry.run,
            candidate=candidate.id,
            sha=candidate.sha,
            speedup=candidate.record.geomean_speedup if candidate.record else None,
            files=[_relative(p, ls.project.root) for p in changed],
            failure_reason=None,
        )
        if not changed:
            return answer
        speed = f" ({answer.speedup:.2f}x)" if answer.speedup else ""
        label = f"evoteam: accept {candidate.id}{speed} of {entry.run}"
        result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label))
        return answer.model_copy(update={"applied": result.applied, "failure_reason": result.failure_reason})

    # -- report ----------------------------------------------------------------------------------------------
    async def report(self, ls: EvoteamServer, args: RunArgs) -> ReportResult:
        """``evoteam report RUN`` in a subprocess (plotting stays out of the server); the page's path and URI."""
        entry = await _entry(ls, args.run)
        command = [sys.executable, "-m", "evoteam.cli.main", "report", entry.run]
        done, out, err = await _exec(command, ls.project.root, REPORT_TIMEOUT)
        lines = out.strip().splitlines()
        if done != 0 or not lines:
            raise RequestFailed(f"evoteam.report: {err.strip() or f'evoteam report exited with {done}'}")
        page = Path(lines[-1])
        return ReportResult(run=entry.run, page=str(page), uri=page.as_uri())


async def _entry(ls: EvoteamServer, run: str) -> RunEntry:
    await ls.wait_ready()
    entry = ls.index.get(run)
    if entry is None:  # started a moment ago: its journal may not have been read yet
        await ls.refresh_runs()
        entry = ls.index.get(run)
    if entry is None:
        raise JsonRpcInvalidParams(f"no run {run!r} in this repository (evoteam.runs lists them)")
    return entry


def _candidate(entry: RunEntry, candidate: str) -> Candidate:
    found = entry.state.candidates.get(candidate)
    if found is None:
        known = ", ".join(entry.state.candidates) or "none"
        raise JsonRpcInvalidParams(f"run {entry.run} has no candidate {candidate!r} (candidates: {known})")
    return found


def _rounds(root: Path, entry: RunEntry) -> RoundsResult:
    """Blocking (git): every round branch of the run with its candidates and their metrics."""
    git = GitStore(root, entry.run)
    state = entry.state
    finished = {r.round: r for r in state.rounds_finished}
    by_branch: dict[str, list[CandidateInfo]] = {}
    for commit in git.candidates():
        cid = commit.trailers.get("Evoteam-Candidate", "")
        known = state.candidates.get(cid)
        record = known.record if known else None
        speed = commit.trailers.get("Evoteam-Speedup", "")
        by_branch.setdefault(commit.branch, []).append(
            CandidateInfo(
                id=cid,
                role=record.role if record else commit.trailers.get("Evoteam-Role"),
                agent=known.agent if known else None,
                status=record.status.value if record else commit.trailers.get("Evoteam-Status"),
                speedup=record.geomean_speedup if record else _float(speed),
                faster=record.faster if record else None,
                total=record.total if record else None,
                sha=commit.sha,
                best=cid == state.best,
            )
        )
    rounds: list[RoundInfo] = []
    for branch in git.branches():
        name = branch.rsplit("/", 1)[-1]
        if not name.startswith("round-"):
            continue
        number = int(name.removeprefix("round-"))
        done = finished.get(number)
        rounds.append(
            RoundInfo(
                round=number,
                branch=branch,
                finished=done is not None,
                roles=done.roles if done else [],
                tokens=done.tokens if done else None,
                candidates=by_branch.get(branch, []),
            )
        )
    best = branch_name(entry.run, "best")
    return RoundsResult(
        run=entry.run,
        base=BranchRef(branch=branch_name(entry.run, "base"), sha=state.base),
        best=BestRef(branch=best, sha=git.ref(best), candidate=state.best, speedup=state.best_speedup),
        rounds=rounds,
    )


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


async def _exec(command: list[str], cwd: Path, timeout: float) -> tuple[int, str, str]:
    """Runs ``command`` without blocking the loop; (exit status, stdout, stderr). Killed past ``timeout``."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=dict(os.environ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise RequestFailed(f"{' '.join(command[:4])} ... took over {timeout:.0f} s and was stopped") from None
    return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def _start(command: list[str], root: Path) -> str:
    """Starts a detached run with the CLI; its id (the last line it prints)."""
    done, out, err = await _exec(command, root, START_TIMEOUT)
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if done != 0 or not lines:
        reason = [line for line in err.splitlines() if line.strip()]
        raise RequestFailed(f"evoteam.evolve: {reason[-1] if reason else f'evoteam evolve exited with {done}'}")
    return lines[-1]


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


FEATURE = Commands()
