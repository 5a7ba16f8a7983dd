"""The ``evoteam.*`` commands (workspace/executeCommand): start and cancel runs, list them, their rounds and a
candidate's diff, accept a winner into the editor, and write a run's report. Every answer is plain JSON; bad
arguments get an error answer that says what is wrong.

Arguments are positional (``evoteam.accept RUN [CANDIDATE]``) or one object with the same names
(``{"run": ..., "candidate": ...}``). Runs are separate processes: ``evoteam.evolve`` starts
``evoteam evolve FILE --detach`` and the watcher shows the run like any other.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from evoteam.gpu_bench.api import current_sandbox
from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import run_summary
from evoteam.server.run_index import RunEntry
from evoteam.server.settings import Settings
from evoteam.server.winner import FileCache, WinnerError, kernel_paths, replace_edit, run_task
from evoteam.supervisor.git_store import GitStore, GitStoreError, branch_name
from evoteam.supervisor.state import Candidate, run_dir

M = TypeVar("M", bound=BaseModel)
START_TIMEOUT = 120.0
"""Seconds ``evoteam evolve --detach`` may take to journal the run and print its id."""
REPORT_TIMEOUT = 300.0
"""Seconds ``evoteam report`` may take to plot and write a run's report."""


class RunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class DiffArgs(RunArgs):
    candidate: str = Field(min_length=1)


class AcceptArgs(RunArgs):
    candidate: str | None = Field(default=None, min_length=1)


class EvolveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uri: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    """Any of the settings (rounds, budget, team, llm, runner, model, evaluations); the rest from the settings."""


class RequestFailed(JsonRpcException):
    """The arguments are fine but the command cannot do it (no winner, the CLI refused): LSP's RequestFailed."""

    CODE = lsp.LSPErrorCodes.RequestFailed.value
    MESSAGE = "Request failed"


def parse_args(model: type[M], command: str, args: tuple[Any, ...]) -> M:
    """The command's arguments, positional or one object, validated; an error answer names what is wrong."""
    names = list(model.model_fields)
    if len(args) == 1 and isinstance(args[0], dict) and (names[0] != "uri" or "uri" in args[0]):
        data = dict(args[0])
    elif len(args) > len(names):
        raise JsonRpcInvalidParams(
            f"{command} takes at most {len(names)} arguments ({', '.join(names)}), got {len(args)}"
        )
    else:
        data = dict(zip(names, args, strict=False))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        raise JsonRpcInvalidParams(f"{command}: {where}: {err['msg']} (arguments: {', '.join(names)})") from None


class Commands(Feature):
    name = "commands"

    def __init__(self) -> None:
        self.files = FileCache()

    def register(self, server: EvoteamServer) -> None:
        @server.command("evoteam.evolve")
        async def evolve(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.evolve(ls, parse_args(EvolveArgs, "evoteam.evolve", args))

        @server.command("evoteam.cancel")
        async def cancel(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.cancel(ls, parse_args(RunArgs, "evoteam.cancel", args))

        @server.command("evoteam.runs")
        async def runs(ls: EvoteamServer, *args: Any) -> list[dict[str, Any]]:
            if args and args != ({},):
                raise JsonRpcInvalidParams("evoteam.runs takes no arguments")
            await ls.wait_ready()
            return [run_summary(e) for e in ls.index.runs()]

        @server.command("evoteam.rounds")
        async def rounds(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.rounds(ls, parse_args(RunArgs, "evoteam.rounds", args))

        @server.command("evoteam.candidateDiff")
        async def candidate_diff(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.diff(ls, parse_args(DiffArgs, "evoteam.candidateDiff", args))

        @server.command("evoteam.accept")
        async def accept(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.accept(ls, parse_args(AcceptArgs, "evoteam.accept", args))

        @server.command("evoteam.report")
        async def report(ls: EvoteamServer, *args: Any) -> dict[str, Any]:
            return await self.report(ls, parse_args(RunArgs, "evoteam.report", args))

    # -- evolve and cancel ---------------------------------------------------------------------------------
    async def evolve(self, ls: EvoteamServer, args: EvolveArgs) -> dict[str, Any]:
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
        return {"run": run, "sandbox": confinement.description}

    async def cancel(self, ls: EvoteamServer, args: RunArgs) -> dict[str, Any]:
        entry = await _entry(ls, args.run)
        if entry.state.finished is not None:
            return {"run": entry.run, "cancelled": False, "finished": entry.state.finished}
        marker = run_dir(ls.project.root, entry.run) / "cancel"
        await ls.in_background(marker.write_text, "cancel requested\n")
        return {"run": entry.run, "cancelled": True}

    # -- rounds and diffs ----------------------------------------------------------------------------------
    async def rounds(self, ls: EvoteamServer, args: RunArgs) -> dict[str, Any]:
        entry = await _entry(ls, args.run)
        try:
            return await ls.in_background(_rounds, ls.project.root, entry)
        except GitStoreError as exc:
            raise RequestFailed(f"evoteam.rounds: {exc}") from None

    async def diff(self, ls: EvoteamServer, args: DiffArgs) -> dict[str, Any]:
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
        return {
            "run": entry.run,
            "candidate": candidate.id,
            "root": str(git.root),
            "base": base,
            "sha": candidate.sha,
            "paths": paths,
            "diff": out,
        }

    # -- accept ----------------------------------------------------------------------------------------------
    async def accept(self, ls: EvoteamServer, args: AcceptArgs) -> dict[str, Any]:
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
        answer: dict[str, Any] = {"run": entry.run, "candidate": candidate.id, "sha": candidate.sha}
        answer["speedup"] = candidate.record.geomean_speedup if candidate.record else None
        answer["files"] = [_relative(p, ls.project.root) for p in changed]
        if not changed:
            return {**answer, "applied": True}
        speed = f" ({answer['speedup']:.2f}x)" if answer["speedup"] else ""
        label = f"evoteam: accept {candidate.id}{speed} of {entry.run}"
        result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label))
        return {**answer, "applied": result.applied, "failureReason": result.failure_reason}

    # -- report ----------------------------------------------------------------------------------------------
    async def report(self, ls: EvoteamServer, args: RunArgs) -> dict[str, Any]:
        """``evoteam report RUN`` in a subprocess (plotting stays out of the server); the page's path and URI."""
        entry = await _entry(ls, args.run)
        command = [sys.executable, "-m", "evoteam.cli.main", "report", entry.run]
        done, out, err = await _exec(command, ls.project.root, REPORT_TIMEOUT)
        lines = out.strip().splitlines()
        if done != 0 or not lines:
            raise RequestFailed(f"evoteam.report: {err.strip() or f'evoteam report exited with {done}'}")
        page = Path(lines[-1])
        return {"run": entry.run, "page": str(page), "uri": page.as_uri()}


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


def _rounds(root: Path, entry: RunEntry) -> dict[str, Any]:
    """Blocking (git): every round branch of the run with its candidates and their metrics."""
    git = GitStore(root, entry.run)
    state = entry.state
    finished = {r.round: r for r in state.rounds_finished}
    by_branch: dict[str, list[dict[str, Any]]] = {}
    for commit in git.candidates():
        cid = commit.trailers.get("Evoteam-Candidate", "")
        known = state.candidates.get(cid)
        record = known.record if known else None
        speed = commit.trailers.get("Evoteam-Speedup", "")
        by_branch.setdefault(commit.branch, []).append(
            {
                "id": cid,
                "role": record.role if record else commit.trailers.get("Evoteam-Role"),
                "agent": known.agent if known else None,
                "status": record.status.value if record else commit.trailers.get("Evoteam-Status"),
                "speedup": record.geomean_speedup if record else _float(speed),
                "faster": record.faster if record else None,
                "total": record.total if record else None,
                "sha": commit.sha,
                "best": cid == state.best,
            }
        )
    rounds = []
    for branch in git.branches():
        name = branch.rsplit("/", 1)[-1]
        if not name.startswith("round-"):
            continue
        number = int(name.removeprefix("round-"))
        done = finished.get(number)
        rounds.append(
            {
                "round": number,
                "branch": branch,
                "finished": done is not None,
                "roles": done.roles if done else [],
                "tokens": done.tokens if done else None,
                "candidates": by_branch.get(branch, []),
            }
        )
    best = branch_name(entry.run, "best")
    return {
        "run": entry.run,
        "base": {"branch": branch_name(entry.run, "base"), "sha": state.base},
        "best": {"branch": best, "sha": git.ref(best), "candidate": state.best, "speedup": state.best_speedup},
        "rounds": rounds,
    }


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
