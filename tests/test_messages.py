"""The custom messages between the server and the VS Code extension are defined once (``server/messages.py``):
the committed TypeScript (``vscode-extension/src/messages.generated.ts``) is what the models generate, every
message the server handles or sends is in the registry and named only through it, the extension declares no
message type or name of its own, and the models read and write the wire format the messages promise."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol.types import METHOD_TO_TYPES
from pygls.exceptions import JsonRpcInvalidParams

from evoteam.server import messages, ts_types
from evoteam.server.app import FEATURES, build_server
from evoteam.server.convert import run_summary
from evoteam.server.messages import (
    ACCEPT,
    CANCEL,
    CREATE_TASK_ENTRY,
    EVOLVE,
    MESSAGES,
    RUN_UPDATED,
    RUNS,
    AcceptArgs,
    AcceptResult,
    EvolveArgs,
    RunRemoved,
    RunSummary,
    RunUpdate,
)
from evoteam.server.run_index import RunEntry
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.events import RunFinished, RunStarted
from evoteam.supervisor.state import fold

pytestmark = pytest.mark.unit

for _feature in FEATURES:  # imported at collection: GitPython runs `git --version` when it is first imported
    importlib.import_module(f"evoteam.server.features.{_feature}")

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "server"
EXTENSION_SRC = REPO / "vscode-extension" / "src"
GENERATED = REPO / ts_types.OUTPUT
NAMES = {m.name for m in MESSAGES}


def test_the_committed_typescript_is_what_the_models_generate() -> None:
    committed = GENERATED.read_text(encoding="utf-8") if GENERATED.is_file() else ""
    assert committed == ts_types.render(), (
        f"{GENERATED.relative_to(REPO)} differs from server/messages.py: run `.venv/bin/{ts_types.REGENERATE}` "
        "and commit the file (never edit it by hand)"
    )


def test_the_generator_writes_and_checks_a_file(tmp_path: Path) -> None:
    out = tmp_path / "messages.generated.ts"
    assert ts_types.main(["--check", "--output", str(out)]) == 1  # missing
    assert ts_types.main(["--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == ts_types.render()
    assert ts_types.main(["--check", "--output", str(out)]) == 0
    out.write_text(out.read_text(encoding="utf-8").replace("roundsFinished", "rounds_finished"), encoding="utf-8")
    assert ts_types.main(["--check", "--output", str(out)]) == 1


def test_the_typescript_has_every_message_model_and_name() -> None:
    text = ts_types.render()
    for message in MESSAGES:
        assert f'export const {message.const} = "{message.name}";' in text
        assert re.search(rf"\b(interface|type) {message.params.__name__}\b", text), message.params
        if message.result is not None:
            assert re.search(rf"\b(interface|type) {message.result.__name__}\b", text), message.result
    assert '"evoteam.accept": { args: [run: string, candidate?: string | null]; result: AcceptResult };' in text
    assert '"evoteam/runUpdated": RunUpdate;' in text and "export type RunUpdate = RunSummary | RunRemoved;" in text
    assert "  bestSpeedup: number | null;" in text and "  options?: Partial<Settings>;" in text


def test_every_message_the_server_handles_is_in_the_registry() -> None:
    server = build_server()
    try:
        assert not server.broken
        handled = set(server.protocol.fm.features)
        custom = {method for method in handled if method not in METHOD_TO_TYPES}
        assert custom == {m.name for m in MESSAGES if m.kind == "request"}
        assert set(server.protocol.fm.commands) == {m.name for m in MESSAGES if m.kind == "command"}
    finally:
        server.work.shutdown(wait=False)


def _code_strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """The string constants of a module that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_the_server_names_its_custom_messages_only_through_the_registry() -> None:
    """A handler, a command or a notification named by a string of its own would be a message outside the
    registry: every ``feature``/``command``/``notify``/``send_request`` call names an LSP method or a message."""
    senders = {"feature", "command", "notify", "send_request", "send_request_async"}
    problems = []
    for path in sorted(SERVER.rglob("*.py")):
        if path.name == "messages.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(REPO)
        for node in _code_strings(tree):
            if node.value in NAMES or node.value.startswith("evoteam/"):
                problems.append(f"{where}:{node.lineno}: {node.value!r} (use server/messages.py)")
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args):
                continue
            first = call.args[0]
            if call.func.attr in senders and isinstance(first, ast.Constant) and first.value not in METHOD_TO_TYPES:
                problems.append(f"{where}:{call.lineno}: {call.func.attr}({first.value!r}) names no registered message")
    assert not problems, "\n".join(problems)


def _ts_strings(text: str) -> Iterator[str]:
    """The string literals of TypeScript source (comments skipped; a template's text whole)."""
    token = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`(?:\\.|[^`\\])*`|//[^\n]*|/\*.*?\*/', re.DOTALL)
    for found in token.finditer(text):
        if found.group()[0] in "\"'`":
            yield found.group()[1:-1]


def test_the_extension_takes_every_message_type_and_name_from_the_generated_file() -> None:
    generated = ts_types.render()
    declared = set(re.findall(r"^export (?:interface|type) (\w+)", generated, re.MULTILINE))
    problems = []
    for path in sorted(EXTENSION_SRC.glob("*.ts")):
        if path == GENERATED:
            continue
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"^\s*(?:export )?(?:interface|type) (\w+)", text, re.MULTILINE):
            if name in declared:
                problems.append(f"{path.name}: declares {name} again")
        for literal in _ts_strings(text):
            if literal in NAMES or literal.startswith("evoteam/run/"):
                problems.append(f"{path.name}: spells out {literal!r}")
    assert not problems, "\n".join(problems) + "\n(import them from ./messages.generated)"


def test_a_notification_goes_out_only_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    server = build_server(features=[])
    sent: list[tuple[str, object]] = []
    try:
        monkeypatch.setattr(server.protocol, "notify", lambda method, params=None: sent.append((method, params)))
        server.send(RUN_UPDATED, RunUpdate(RunRemoved(run="r-1", removed=True)))
        stray = messages.Notification("evoteam/stray", RunUpdate, None)
        with pytest.raises(ValueError, match="not a message"):
            server.send(stray, RunUpdate(RunRemoved(run="r-1", removed=True)))
    finally:
        server.work.shutdown(wait=False)
    assert sent == [("evoteam/runUpdated", {"run": "r-1", "removed": True})]


def test_what_the_server_sends_is_camel_case_with_every_field() -> None:
    summary = RunSummary(
        run="k-1",
        kernel="k",
        mode="evolving",
        llm="offline",
        live=True,
        finished=None,
        round=1,
        rounds=3,
        rounds_finished=0,
        team=["Optimizer"],
        protocol=None,
        best=None,
        best_speedup=None,
        tokens=10,
        budget=100,
        candidates=0,
    )
    sent = RUN_UPDATED.payload(RunUpdate(summary))
    assert sent["roundsFinished"] == 0 and sent["bestSpeedup"] is None and sent["finished"] is None
    assert set(sent) == {(f.alias or n) for n, f in RunSummary.model_fields.items()}
    accepted = AcceptResult(
        applied=True, run="k-1", candidate="c", sha=None, speedup=1.5, files=[], failure_reason=None
    )
    assert ACCEPT.answer(accepted)["failureReason"] is None


def test_command_arguments_are_positional_or_one_object_and_errors_name_the_argument() -> None:
    assert ACCEPT.parse(["k-1"]) == AcceptArgs(run="k-1")
    assert ACCEPT.parse([{"run": "k-1", "candidate": "c"}]) == AcceptArgs(run="k-1", candidate="c")
    assert EVOLVE.parse(["file:///k.cpp", {"rounds": 1}]).options == {"rounds": 1}
    assert EVOLVE.parse([{"uri": "file:///k.cpp"}]).uri == "file:///k.cpp"
    assert CREATE_TASK_ENTRY.parse(["file:///k.cpp"]).uri == "file:///k.cpp"
    RUNS.parse([])
    RUNS.parse([{}])
    for command, args, expected in [
        (RUNS, ["x"], "evoteam.runs takes no arguments"),
        (ACCEPT, ["k-1", "a", "b"], "takes at most 2 arguments (run, candidate), got 3"),
        (CANCEL, ["../etc"], "evoteam.cancel: run: String should match pattern"),
        (ACCEPT, [{"run": "k-1", "extra": 1}], "extra: Extra inputs are not permitted"),
        (EVOLVE, [], "uri: Field required"),
    ]:
        with pytest.raises(JsonRpcInvalidParams, match=re.escape(expected)):
            command.parse(args)


def test_a_lens_command_carries_the_arguments_given_positionally() -> None:
    assert ACCEPT.arguments(AcceptArgs(run="k-1", candidate="c")) == ["k-1", "c"]
    assert ACCEPT.arguments(AcceptArgs(run="k-1")) == ["k-1"]
    assert EVOLVE.arguments(EvolveArgs(uri="file:///k.cpp")) == ["file:///k.cpp"]
    assert EVOLVE.arguments(EvolveArgs(uri="file:///k.cpp", options={"rounds": 2})) == ["file:///k.cpp", {"rounds": 2}]


def test_each_message_has_one_name_and_its_constant_follows_it() -> None:
    assert len(NAMES) == len(MESSAGES)
    by_constant = {m.const: m for m in MESSAGES}
    assert len(by_constant) == len(MESSAGES)
    for constant, message in by_constant.items():
        assert getattr(messages, constant) is message, f"server/messages.py names {message.name} {constant}"


def test_a_run_stopped_by_an_error_carries_it_to_the_editor() -> None:
    events = [
        RunStarted(config=RunConfig(run="k-1", kernel="k", config="t", llm="anthropic")),
        RunFinished(reason="error", error="anthropic call failed and is not retried: 401 authentication_error"),
    ]
    summary = run_summary(RunEntry(run="k-1", state=fold(events), stamp=(0, 0)))
    shown = summary.model_dump(mode="json", by_alias=True)
    assert shown["finished"] == "error" and "401 authentication_error" in shown["error"]
    assert run_summary(RunEntry(run="k-1", state=fold(events[:1]), stamp=(0, 0))).error is None
