"""Every custom message between the language server and the editor's extension, defined once: the
``workspace/executeCommand`` commands (``evoteam.*``), the custom requests (``evoteam/...`` from the client) and
notifications (``evoteam/...`` from the server), each with its params and result as pydantic models, in the
registry ``MESSAGES``.

The server validates what comes in with these models (``Command.parse``) and builds what goes out from them
(``Command.answer``, ``Notification.payload``); ``server/ts_types.py`` writes the TypeScript interfaces the
extension imports (``vscode-extension/src/messages.generated.ts``) from the same definitions.

On the wire names are camelCase (``bestSpeedup``); what the server sends has every field, ``null`` where there is
no value. Command arguments are positional (``evoteam.accept RUN [CANDIDATE]``, in the order of the model's
fields) or one object with the same names (``{"run": ..., "candidate": ...}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError
from pydantic.alias_generators import to_camel
from pygls.exceptions import JsonRpcInvalidParams

from evoteam.server.settings import Settings

RUN_PROGRESS_PREFIX = "evoteam/run/"
"""The server's ``$/progress`` token of a run is this prefix and the run's id (``evoteam/run/RUN``)."""

_CONFIG = ConfigDict(
    extra="forbid",
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
    use_attribute_docstrings=True,
)
RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


@dataclass(frozen=True)
class PartialOf:
    """``Annotated`` metadata: a plain object that holds some fields of ``model`` (TypeScript ``Partial<M>``); the
    handler validates it against the model itself."""

    model: type[BaseModel]


class Message(BaseModel):
    """A message's params or result: camelCase on the wire, unknown fields refused."""

    model_config = _CONFIG


# -- params (from the client) ------------------------------------------------------------------------------------
class NoParams(Message):
    """No arguments."""


class RunArgs(Message):
    """One run of the repository."""

    run: str = Field(min_length=1, pattern=RUN_ID)
    """The run's id (``scale_add-20261203-120000-ab12``)."""


class DiffArgs(RunArgs):
    """One candidate of a run."""

    candidate: str = Field(min_length=1)
    """The candidate's id."""


class AcceptArgs(RunArgs):
    """The candidate of a run to accept into the editor."""

    candidate: str | None = Field(default=None, min_length=1)
    """The candidate's id; the run's best when left out."""


class EvolveArgs(Message):
    """The kernel file to evolve and the options that differ from the editor's settings."""

    uri: str = Field(min_length=1)
    """The kernel file (a task's source or extra source)."""
    options: Annotated[dict[str, Any], PartialOf(Settings)] = Field(default_factory=dict)
    """Any of the settings (rounds, budget, team, llm, runner, model, evaluations, unsafeNoSandbox); the rest from
    the editor's settings. Validated like them."""


class TaskEntryArgs(Message):
    """A kernel file that is no task yet."""

    uri: str = Field(min_length=1)
    """The kernel file's URI."""
    preview: bool = False
    """Only say what would be written (and whether the file is a task already); write nothing."""


# -- results and notifications (from the server) -----------------------------------------------------------------
class RunSummary(Message):
    """One run as the runs view and the status bar show it."""

    run: str
    kernel: str
    mode: str
    """The team mode: ``single``, ``fixed``, ``evolving``."""
    llm: str
    live: bool
    """Whether the run is running now (its process holds the kernel's lock, or it journaled a moment ago)."""
    finished: str | None
    """Why it stopped (``rounds``, ``budget``, ``cancelled``, ...); null while it has not finished."""
    error: str | None = None
    """What stopped a run that finished with ``error`` (a model error no retry can fix, such as a refused key)."""
    round: int
    """The latest round started (0 before the first)."""
    rounds: int
    rounds_finished: int
    team: list[str]
    """The roles of the current team."""
    protocol: str | None
    best: str | None
    """The best passing candidate's id."""
    best_speedup: float | None
    tokens: int
    """Tokens spent so far, across all roles and the supervisor."""
    budget: int
    candidates: int
    """How many candidates were made."""


class RunRemoved(Message):
    """A run whose journal is gone."""

    run: str
    removed: Literal[True]


class RunUpdate(RootModel[RunSummary | RunRemoved]):
    """One run changed (new, grown) or was removed."""


class RunList(RootModel[list[RunSummary]]):
    """The runs of the repository, oldest first."""


class EvolveResult(Message):
    """The run started."""

    run: str
    sandbox: str
    """How the run's agent-generated code is confined (``bubblewrap 0.8.0: ...``)."""


class CancelResult(Message):
    """Whether a cancel was requested."""

    run: str
    cancelled: bool
    """True: the run stops before its next step. False: it had finished already."""
    finished: str | None
    """Why it had finished (when ``cancelled`` is false)."""


class CandidateInfo(Message):
    """A candidate of a round: a commit on the round's branch."""

    id: str
    role: str | None
    agent: str | None
    status: str | None
    """``PASSED``, ``COMPILE_ERROR``, ..."""
    speedup: float | None
    """The geometric mean speedup over the workloads (null when it did not pass)."""
    faster: int | None
    """How many workloads it made faster, of ``total``."""
    total: int | None
    sha: str
    best: bool
    """Whether it is the run's best."""


class RoundInfo(Message):
    """A round of a run: its branch and candidates."""

    round: int
    branch: str
    """``evoteam/RUN/round-NN``."""
    finished: bool
    roles: list[str]
    """The team of the round (empty until it is finished)."""
    tokens: int | None
    candidates: list[CandidateInfo]


class BranchRef(Message):
    """A branch of a run and the commit it points at."""

    branch: str
    sha: str | None


class BestRef(BranchRef):
    """The run's ``best`` branch and its candidate."""

    candidate: str | None
    speedup: float | None


class RoundsResult(Message):
    """Every round branch of a run."""

    run: str
    base: BranchRef
    best: BestRef
    rounds: list[RoundInfo]


class CandidateDiff(Message):
    """``git diff BASE SHA -- KERNEL-FILES``: a candidate against its run's base, for the task's files only."""

    run: str
    candidate: str
    root: str
    """The git repository that ``paths`` are relative to."""
    base: str
    sha: str
    paths: list[str]
    diff: str


class AcceptResult(Message):
    """What accepting a candidate did: a ``workspace/applyEdit`` on the files whose text differs from it."""

    applied: bool
    run: str
    candidate: str
    sha: str | None
    speedup: float | None
    files: list[str]
    """The files changed, relative to the repository (empty: they hold the candidate already)."""
    failure_reason: str | None
    """The client's reason when it did not apply the edit."""


class ReportResult(Message):
    """The run's report, written by ``evoteam report RUN``."""

    run: str
    page: str
    """The HTML page (its PNG plots beside it)."""
    uri: str


class TaskEntryResult(Message):
    """The task scaffold written to disk (or, for a preview, what would be)."""

    name: str
    """The new task's name (the existing task's, when ``existing``)."""
    config: str
    """The evoteam.toml that gets the ``[[kernel]]`` entry."""
    config_exists: bool = True
    """False when that evoteam.toml is new."""
    files: list[str]
    """The files written: the evoteam.toml, the definition template, the workloads."""
    texts: dict[str, str] = Field(default_factory=dict)
    """File → the text added to it: the entry appended to an existing evoteam.toml, a new file's whole text."""
    written: bool = True
    existing: bool = False
    """The file is a task already (a preview's answer; nothing to add)."""


class ServerStatus(Message):
    """What the server runs: its features, the ones that failed to load, the project and its runs."""

    version: str
    root: str
    features: list[str]
    broken: dict[str, str]
    """Features that failed to load or register → the error."""
    runs: list[str]
    settings: Settings


# -- the registry -----------------------------------------------------------------------------------------------
P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
Kind = Literal["command", "request", "notification"]


def dump(model: BaseModel) -> Any:
    """A model as plain JSON for the wire (camelCase, every field)."""
    return model.model_dump(mode="json", by_alias=True)


@dataclass(frozen=True)
class Spec(Generic[P, R]):
    """One message: its method or command name, its params model and its result model."""

    kind: ClassVar[Kind]
    sender: ClassVar[Literal["client", "server"]]
    name: str
    params: type[P]
    result: type[R] | None
    doc: str = field(default="", compare=False)

    @property
    def const(self) -> str:
        """Its constant's name in TypeScript: ``evoteam.candidateDiff`` → ``CANDIDATE_DIFF``."""
        last = re.split(r"[./]", self.name)[-1]
        return re.sub(r"(?<!^)(?=[A-Z])", "_", last).upper()


@dataclass(frozen=True)
class Command(Spec[P, R]):
    """A ``workspace/executeCommand`` command of the server (the client asks; its result is the answer)."""

    kind: ClassVar[Kind] = "command"
    sender: ClassVar[Literal["client", "server"]] = "client"

    def parse(self, args: tuple[Any, ...] | list[Any]) -> P:
        """The arguments, positional or one object, validated; an InvalidParams answer names what is wrong."""
        names = [f.alias or name for name, f in self.params.model_fields.items()]
        if not names:
            if args and list(args) != [{}]:
                raise JsonRpcInvalidParams(f"{self.name} takes no arguments")
            return self.params.model_validate({})
        if len(args) == 1 and isinstance(args[0], dict) and (names[0] != "uri" or "uri" in args[0]):
            data = dict(args[0])
        elif len(args) > len(names):
            raise JsonRpcInvalidParams(
                f"{self.name} takes at most {len(names)} arguments ({', '.join(names)}), got {len(args)}"
            )
        else:
            data = dict(zip(names, args, strict=False))
        try:
            return self.params.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "arguments"
            raise JsonRpcInvalidParams(f"{self.name}: {where}: {err['msg']} (arguments: {', '.join(names)})") from None

    def arguments(self, args: P) -> list[Any]:
        """``args`` as positional command arguments (for a code lens or a code action's command): every field up
        to the last one that was given."""
        given = args.model_fields_set
        names = list(type(args).model_fields)
        while names and names[-1] not in given:
            names.pop()
        values = args.model_dump(mode="json", by_alias=True)
        return [values[type(args).model_fields[n].alias or n] for n in names]

    def answer(self, result: R) -> Any:
        """The result as the command's plain JSON answer."""
        return dump(result)


@dataclass(frozen=True)
class Request(Spec[P, R]):
    """A custom request from the client (``evoteam/...``)."""

    kind: ClassVar[Kind] = "request"
    sender: ClassVar[Literal["client", "server"]] = "client"

    def answer(self, result: R) -> Any:
        return dump(result)


@dataclass(frozen=True)
class Notification(Spec[P, NoParams]):
    """A custom notification from the server (``evoteam/...``); it has no result."""

    kind: ClassVar[Kind] = "notification"
    sender: ClassVar[Literal["client", "server"]] = "server"

    def payload(self, params: P) -> Any:
        return dump(params)


EVOLVE = Command(
    "evoteam.evolve",
    EvolveArgs,
    EvolveResult,
    "Starts `evoteam evolve FILE --detach` for the task whose source the file is.",
)
CANCEL = Command(
    "evoteam.cancel", RunArgs, CancelResult, "Asks a run to stop before its next step (as `evoteam cancel RUN`)."
)
RUNS = Command("evoteam.runs", NoParams, RunList, "The runs of the repository, oldest first.")
ROUNDS = Command("evoteam.rounds", RunArgs, RoundsResult, "A run's round branches with their candidates.")
CANDIDATE_DIFF = Command(
    "evoteam.candidateDiff", DiffArgs, CandidateDiff, "A candidate's diff against its run's base (the task's files)."
)
ACCEPT = Command(
    "evoteam.accept",
    AcceptArgs,
    AcceptResult,
    "Replaces the kernel files' text in the editor with a candidate's (a `workspace/applyEdit`).",
)
REPORT = Command("evoteam.report", RunArgs, ReportResult, "Writes a run's HTML report (`evoteam report RUN`).")
CREATE_TASK_ENTRY = Command(
    "evoteam.createTaskEntry",
    TaskEntryArgs,
    TaskEntryResult,
    "Writes the task scaffold of a kernel file (for clients that cannot create files in an edit).",
)
STATUS = Request(
    "evoteam/status",
    NoParams,
    ServerStatus,
    "What the server runs (its params, whatever they are, are ignored).",
)
RUN_UPDATED = Notification(
    "evoteam/runUpdated", RunUpdate, None, "One run changed: the runs view and the status bar take it."
)

MESSAGES: tuple[Spec[Any, Any], ...] = (
    EVOLVE,
    CANCEL,
    RUNS,
    ROUNDS,
    CANDIDATE_DIFF,
    ACCEPT,
    REPORT,
    CREATE_TASK_ENTRY,
    STATUS,
    RUN_UPDATED,
)
"""Every custom message, by name: ``{m.name: m for m in MESSAGES}``."""


def by_name() -> dict[str, Spec[Any, Any]]:
    return {message.name: message for message in MESSAGES}
