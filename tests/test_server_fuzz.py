"""Thousands of random and malformed messages to ``evoteam serve`` over raw stdio frames, from a fixed seed (printed;
``EVOTEAM_FUZZ_SEED`` replays another): the server stays up, answers every request id exactly once, answers no
notification, answers each unreadable body and each message with no usable id with one error for id null, and a
normal session goes on afterwards down to a clean ``shutdown``/``exit``.

The client (``lsp_wire.Wire``) is a few lines over asyncio pipes on purpose: a real LSP client cannot send most of
this. ``test_server_fuzz_hypothesis.py`` sends the same kinds of traffic, and broken framing, drawn by hypothesis."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsp_support import evolved_repo, sample_repo
from lsp_wire import (
    COMMANDS,
    INVALID_BODIES,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    NOTIFICATIONS,
    PARSE_ERROR,
    REQUESTS,
    start,
    stop,
)

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("EVOTEAM_FUZZ_SEED", "6061"))
COUNT = int(os.environ.get("EVOTEAM_FUZZ_COUNT", "3000"))


@dataclass
class Expect:
    """What one sent message must be answered with: ``ids`` maps each request id to the error codes allowed for it
    (None: any result or error); ``null`` counts the errors for id null (code → how many)."""

    ids: dict[Any, set[int] | None] = field(default_factory=dict)
    null: Counter[int] = field(default_factory=Counter)
    sent: dict[Any, str] = field(default_factory=dict)


class Fuzz:
    """Seeded messages, each recorded in ``expect`` with the answer it must get."""

    def __init__(self, seed: int, repo: Path, run: str) -> None:
        self.rng = random.Random(seed)
        self.kernel_uri = (repo / "kernel.cpp").as_uri()
        self.run = run
        self.expect = Expect()
        self.next_id = 0

    # -- values ------------------------------------------------------------------------------------------------
    def junk(self, depth: int = 0) -> Any:
        r = self.rng
        kinds = ["none", "bool", "int", "float", "str", "unicode", "list", "dict"]
        if depth == 0 and r.random() < 0.02:
            kinds = ["huge", "deep"]
        kind = r.choice(kinds if depth < 3 else kinds[:6])
        if kind == "none":
            return None
        if kind == "bool":
            return r.random() < 0.5
        if kind == "int":
            return r.choice([0, -1, 1, 2**31 - 1, 2**31, 2**53, -(2**63), r.randint(-1000, 1000)])
        if kind == "float":
            return r.choice([0.5, -1e308, 1e-300, 3.0])
        if kind == "str":
            return r.choice(["", "x", "file:///", "file:///nope.cpp", self.kernel_uri, "not a uri", "%%%", "\u0000"])
        if kind == "unicode":
            return "".join(
                chr(r.choice([r.randint(32, 0x2FF), r.randint(0x4E00, 0x4FFF), 0x1F600, 0xD800])) for _ in range(8)
            )
        if kind == "list":
            return [self.junk(depth + 1) for _ in range(r.randint(0, 4))]
        if kind == "dict":
            keys = ["uri", "textDocument", "position", "range", "line", "character", "command", "arguments", "a", ""]
            return {r.choice(keys): self.junk(depth + 1) for _ in range(r.randint(0, 4))}
        if kind == "huge":
            return "é" * r.choice([10_000, 100_000, 600_000])
        nested: Any = r.choice([[], {}, 1, "deep"])
        for _ in range(r.randint(20, 150)):
            nested = [nested] if r.random() < 0.5 else {"k": nested}
        return nested

    def position(self) -> dict[str, Any]:
        return {"line": self.rng.randint(0, 80), "character": self.rng.randint(0, 120)}

    def doc(self) -> dict[str, Any]:
        uri = self.kernel_uri if self.rng.random() < 0.6 else self.rng.choice(["file:///nope.cpp", "untitled:1", "x"])
        return {"uri": uri}

    def valid_params(self, method: str) -> Any:
        r = self.rng
        doc, pos = self.doc(), self.position()
        span = {"start": pos, "end": {"line": pos["line"] + r.randint(0, 5), "character": 0}}
        table: dict[str, Any] = {
            "textDocument/hover": {"textDocument": doc, "position": pos},
            "textDocument/completion": {"textDocument": doc, "position": pos},
            "textDocument/definition": {"textDocument": doc, "position": pos},
            "textDocument/inlayHint": {"textDocument": doc, "range": span},
            "textDocument/codeLens": {"textDocument": doc},
            "textDocument/documentSymbol": {"textDocument": doc},
            "textDocument/diagnostic": {"textDocument": doc},
            "textDocument/semanticTokens/full": {"textDocument": doc},
            "textDocument/formatting": {"textDocument": doc, "options": {"tabSize": 4, "insertSpaces": True}},
            "textDocument/codeAction": {"textDocument": doc, "range": span, "context": {"diagnostics": []}},
            "codeLens/resolve": {"range": span},
            "inlayHint/resolve": {"position": pos, "label": "x"},
            "workspace/symbol": {"query": "scale"},
            "workspace/executeCommand": {
                "command": r.choice(COMMANDS),
                "arguments": r.choice([[], [{"run": self.run}], [{"run": "nope"}], [self.junk()], None]),
            },
            "evoteam/status": r.choice([{}, None, []]),
            "textDocument/didOpen": {
                "textDocument": {**doc, "languageId": "cpp", "version": r.randint(0, 9), "text": "int x;\n"}
            },
            "textDocument/didChange": {
                "textDocument": {**doc, "version": r.randint(0, 9)},
                "contentChanges": [{"text": "int y;\n"}],
            },
            "textDocument/didSave": {"textDocument": doc},
            "textDocument/didClose": {"textDocument": doc},
            "workspace/didChangeConfiguration": {"settings": r.choice([{"evoteam": self.junk()}, {}, self.junk()])},
            "workspace/didChangeWatchedFiles": {"changes": [{"uri": doc["uri"], "type": r.randint(1, 3)}]},
            "window/workDoneProgress/cancel": {"token": r.choice(["t", 1])},
            "$/cancelRequest": {"id": r.randint(0, max(self.next_id, 1))},
            "$/setTrace": {"value": r.choice(["off", "messages", "verbose"])},
        }
        return table[method]

    def mutate(self, value: Any) -> Any:
        r = self.rng
        if not isinstance(value, dict) or not value or r.random() < 0.15:
            return self.junk()
        value = dict(value)
        key = r.choice(list(value))
        choice = r.random()
        if choice < 0.3:
            del value[key]
        elif choice < 0.5:
            value[f"extra{r.randint(0, 9)}"] = self.junk()
        elif choice < 0.75:
            value[key] = self.mutate(value[key])
        else:
            value[key] = self.junk()
        return value

    def new_id(self) -> Any:
        self.next_id += 1
        if self.rng.random() < 0.3:
            return self.rng.choice(["", "s", "ü", "\ud800", "id with spaces"]) + f"#{self.next_id}"
        return self.next_id * self.rng.choice([1, -1, 1000003])

    # -- messages ----------------------------------------------------------------------------------------------
    def request(self, method: str, params: Any, allowed: set[int] | None, **extra: Any) -> dict[str, Any]:
        msg_id = self.new_id()
        self.expect.ids[msg_id] = allowed
        self.expect.sent[msg_id] = method
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method, **extra}
        if not (params is None and self.rng.random() < 0.5):
            message["params"] = params
        return message

    def message(self) -> Any:
        r = self.rng
        pick = r.random()
        if pick < 0.25:  # a known request, params mutated
            method = r.choice(REQUESTS)
            return self.request(method, self.mutate(self.valid_params(method)), None)
        if pick < 0.40:  # a known request, params as they should be
            method = r.choice(REQUESTS)
            return self.request(method, self.valid_params(method), None)
        if pick < 0.62:  # a notification, valid or not: never answered
            method = r.choice(NOTIFICATIONS)
            params = self.valid_params(method)
            if method in ("textDocument/didOpen", "textDocument/didChange") and r.random() < 0.9:
                params = self.mutate(params)  # keeps the kernel file's real edits rare
            elif r.random() < 0.5:
                params = self.mutate(params)
            return {"jsonrpc": "2.0", "method": method, "params": params}
        if pick < 0.70:  # a method nobody serves
            method = r.choice(["evoteam/nothing", "textDocument/unknown", "$/private", "", "ü/ü", "x" * 2000])
            params = r.choice([{}, None, [1, 2], {"a": 1}])
            return self.request(method, params, {METHOD_NOT_FOUND, INVALID_PARAMS})
        if pick < 0.72:  # an unknown notification
            return {"jsonrpc": "2.0", "method": r.choice(["evoteam/x", "$/x", "foo"]), "params": self.junk()}
        if pick < 0.74:  # a notification sent as a request (refused), a request sent as a notification (dropped)
            if r.random() < 0.5:
                method = r.choice(NOTIFICATIONS)
                return self.request(method, self.valid_params(method), {INVALID_REQUEST})
            method = r.choice([m for m in REQUESTS if m.startswith("textDocument/")])
            return {"jsonrpc": "2.0", "method": method, "params": self.valid_params(method)}
        if pick < 0.78:  # params that are neither an object nor an array
            return self.request(r.choice(REQUESTS), r.choice([1, "text", True, 2.5]), {INVALID_PARAMS})
        if pick < 0.83:  # an id of the wrong type: no id to answer, so null
            self.expect.null[INVALID_REQUEST] += 1
            wrong = r.choice([None, True, 1.5, [1], {"id": 1}])
            return {"jsonrpc": "2.0", "id": wrong, "method": r.choice(REQUESTS), "params": {}}
        if pick < 0.89:  # not a message at all
            return self.not_a_message()
        if pick < 0.92:  # a body that is not JSON
            self.expect.null[PARSE_ERROR] += 1
            return r.choice(INVALID_BODIES)
        if pick < 0.96:  # the client "answers" something the server never asked
            return {"jsonrpc": "2.0", "id": f"stray-{self.new_id()}", r.choice(["result", "error"]): self.junk()}
        if pick < 0.98:  # initialize again, initialized again
            if r.random() < 0.5:
                return {"jsonrpc": "2.0", "method": "initialized", "params": {}}
            return self.request("initialize", {"capabilities": {}, "processId": None}, {INVALID_REQUEST})
        return self.request(r.choice(REQUESTS), self.valid_params("textDocument/hover"), None, extra=self.junk())

    def not_a_message(self) -> Any:
        r = self.rng
        kind = r.randint(0, 6)
        if kind <= 1:  # a JSON value that is not an object
            self.expect.null[INVALID_REQUEST] += 1
            return r.choice([1, "text", [], [{"jsonrpc": "2.0", "id": 5, "method": "evoteam/status"}], None, 0.5])
        if kind == 2:  # an object with nothing in it
            self.expect.null[INVALID_REQUEST] += 1
            return r.choice([{}, {"foo": "boo"}, {"jsonrpc": "2.0"}])
        msg_id = self.new_id()
        if kind == 3:  # neither a request nor a response, with an id
            self.expect.ids[msg_id], self.expect.sent[msg_id] = {INVALID_REQUEST}, "(nothing)"
            return {"jsonrpc": "2.0", "id": msg_id}
        self.expect.ids[msg_id], self.expect.sent[msg_id] = {INVALID_REQUEST}, "(bad envelope)"
        if kind == 4:  # no or a wrong jsonrpc
            bad = {"id": msg_id, "method": "evoteam/status", "params": {}}
            return bad if r.random() < 0.5 else {**bad, "jsonrpc": r.choice(["1.0", 2, None])}
        if kind == 5:  # a method that is not a string
            return {"jsonrpc": "2.0", "id": msg_id, "method": r.choice([1, None, ["x"], {"m": 1}]), "params": {}}
        return {"jsonrpc": "2.0", "id": msg_id, "method": 1}


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


async def test_random_and_malformed_messages_get_exactly_one_answer_per_request(
    evolved: tuple[Path, str], tmp_path: Path
) -> None:
    repo, run = evolved
    print(f"fuzz seed {SEED}, {COUNT} messages (EVOTEAM_FUZZ_SEED replays)")
    wire, fuzz = await start(repo, tmp_path / "server.log"), Fuzz(SEED, repo, run)
    proc = wire.proc
    expect = fuzz.expect
    started = time.monotonic()
    try:
        # before initialize: requests are refused with ServerNotInitialized, notifications dropped
        for _ in range(30):
            if fuzz.rng.random() < 0.7:
                method = fuzz.rng.choice(REQUESTS)
                wire.send(fuzz.request(method, fuzz.valid_params(method), {NOT_INITIALIZED}))
            else:
                wire.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "textDocument/didSave",
                        "params": fuzz.valid_params("textDocument/didSave"),
                    }
                )
        init = {"processId": None, "rootUri": repo.as_uri(), "capabilities": {"workspace": {"configuration": True}}}
        answer = await wire.call("init", "initialize", init)
        assert "capabilities" in answer["result"], answer
        wire.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

        for n in range(COUNT):
            wire.send(fuzz.message())
            if n % 20 == 0:
                await wire.drain()
        await wire.drain()
        sent_at = time.monotonic()

        def all_answered() -> bool:
            ids = Counter(r.get("id") for r in wire.responses if r.get("id") is not None)
            nulls = sum(1 for r in wire.responses if r.get("id") is None)
            return all(ids[i] for i in expect.ids) and nulls >= sum(expect.null.values())

        try:
            await wire.until(all_answered, 60, "every request's answer")
        except AssertionError:
            missing = [(i, expect.sent[i]) for i in expect.ids if not wire.answers(i)]
            raise AssertionError(f"seed {SEED}: {len(missing)} requests unanswered, e.g. {missing[:10]}") from None
        answered_at = time.monotonic()

        # the session goes on: status, then a clean shutdown and exit
        status = await wire.call("status", "evoteam/status", {})
        assert status["result"]["runs"] == [run] and status["result"]["root"] == str(repo.resolve()), status
        wire.send({"jsonrpc": "2.0", "id": "bare", "method": "evoteam/status"})  # params may be left out
        await wire.until(lambda: bool(wire.answers("bare")), 30, "the answer to evoteam/status without params")
        assert wire.answers("bare")[0]["result"]["runs"] == [run]
        assert (await wire.call("down", "shutdown", None))["result"] is None
        late = await wire.call("late", "evoteam/status", {})
        assert late["error"]["code"] == INVALID_REQUEST, late
        wire.send({"jsonrpc": "2.0", "method": "exit"})
        await wire.drain()
        assert await asyncio.wait_for(proc.wait(), 20) == 0, f"seed {SEED}: exit code {proc.returncode}"
        await asyncio.wait_for(wire.reader, 10)  # everything the server wrote has been read
    finally:
        await stop(wire)
        print(f"server log: {(tmp_path / 'server.log').stat().st_size} bytes")

    print(f"{COUNT} messages sent in {sent_at - started:.1f} s, all answered {answered_at - sent_at:.1f} s later")
    codes = Counter(r["error"]["code"] if "error" in r else "result" for r in wire.responses)
    print(f"answers: {dict(codes)}")
    internal = [
        (expect.sent.get(r["id"]), r["error"]["message"][:120])
        for r in wire.responses
        if r.get("error", {}).get("code") == -32603
    ]
    print(f"internal errors: {internal[:20]}")
    got = Counter(repr(r["id"]) for r in wire.responses if r.get("id") is not None)
    twice = {i: n for i, n in got.items() if n > 1}
    assert not twice, f"seed {SEED}: answered more than once: {list(twice.items())[:10]}"
    ours = {repr(i) for i in [*expect.ids, "init", "status", "bare", "down", "late"]}
    unasked = [i for i in got if i not in ours]
    assert not unasked, f"seed {SEED}: answers for ids nobody asked (a notification or a response?): {unasked[:10]}"
    for response in wire.responses:
        assert response.get("jsonrpc") == "2.0" and ("result" in response) != ("error" in response), response
        if "error" in response:
            assert isinstance(response["error"]["code"], int) and isinstance(response["error"]["message"], str)
    for msg_id, allowed in expect.ids.items():
        [answer] = wire.answers(msg_id)
        if allowed is not None:
            code = answer.get("error", {}).get("code")
            assert code in allowed, f"seed {SEED}: {expect.sent[msg_id]} (id {msg_id!r}) got {answer}, not {allowed}"
    nulls = Counter(r["error"]["code"] for r in wire.responses if r.get("id") is None)
    assert nulls == expect.null, f"seed {SEED}: errors for id null {dict(nulls)}, expected {dict(expect.null)}"
    assert len(expect.ids) > COUNT // 3 and expect.null[PARSE_ERROR] > 0  # the mix really has all of it


async def test_each_kind_of_malformed_message_gets_its_answer(tmp_path: Path) -> None:
    """The guarantees one by one, with the exact answers (the fuzz test above checks them in bulk)."""
    repo = sample_repo(tmp_path / "repo")
    (tmp_path / "home").mkdir()
    wire = await start(repo, tmp_path / "server.log")

    async def error(msg_id: Any, method: str, params: Any) -> int:
        answer = await wire.call(msg_id, method, params)
        assert "result" not in answer, answer
        code: int = answer["error"]["code"]
        return code

    async def null_answer(body: Any) -> dict[str, Any]:
        before = len(wire.responses)
        wire.send(body)
        await wire.drain()
        await wire.until(lambda: len(wire.responses) > before, 30, f"an answer to {body!r}")
        [answer] = wire.responses[before:]
        assert answer["id"] is None and "result" not in answer, answer
        return answer

    try:
        assert await error(1, "evoteam/status", {}) == NOT_INITIALIZED
        init = {"processId": None, "rootUri": repo.as_uri(), "capabilities": {}}
        assert "capabilities" in (await wire.call(2, "initialize", init))["result"]
        wire.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        assert await error(3, "initialize", init) == INVALID_REQUEST
        assert (await null_answer(b'{"jsonrpc": "2.0", "id": 4, "method": '))["error"]["code"] == PARSE_ERROR
        assert (await null_answer({"jsonrpc": "2.0", "id": 4.5, "method": "evoteam/status"}))["error"][
            "code"
        ] == INVALID_REQUEST
        assert (await null_answer([{"jsonrpc": "2.0", "id": 5, "method": "evoteam/status"}]))["error"][
            "code"
        ] == INVALID_REQUEST
        assert await error(6, "textDocument/hover", {"textDocument": 3}) == INVALID_PARAMS
        assert await error(7, "textDocument/hover", "text") == INVALID_PARAMS
        assert await error(8, "evoteam/noSuchMethod", {}) == METHOD_NOT_FOUND
        assert await error(12, "textDocument/didSave", {"textDocument": {"uri": repo.as_uri()}}) == INVALID_REQUEST
        # a notification with bad params: no answer, a log message; the next request is answered as usual
        wire.send({"jsonrpc": "2.0", "method": "textDocument/hover", "params": {}})  # a request without its id
        wire.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": [1]}})
        wire.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": None}})
        wire.send({"jsonrpc": "2.0", "id": 9, "method": "evoteam/status"})  # params may be left out
        await wire.until(lambda: bool(wire.answers(9)), 30, "the answer to evoteam/status")
        assert wire.answers(9)[0]["result"]["root"] == str(repo.resolve())
        logged = [n["params"]["message"] for n in wire.notifications if n["method"] == "window/logMessage"]
        for method in ("$/cancelRequest", "textDocument/didOpen", "textDocument/hover"):
            assert any(method in m for m in logged), (method, logged)
        assert (await wire.call(10, "shutdown", None))["result"] is None
        assert await error(11, "evoteam/status", {}) == INVALID_REQUEST
        wire.send({"jsonrpc": "2.0", "method": "exit"})
        await wire.drain()
        assert await asyncio.wait_for(wire.proc.wait(), 20) == 0
        await asyncio.wait_for(wire.reader, 10)
    finally:
        await stop(wire)
    # nothing else was answered: one answer per request id, the three null ones, none for the notifications
    assert [r["id"] for r in wire.responses] == [1, 2, 3, None, None, None, 6, 7, 8, 12, 9, 10, 11]
