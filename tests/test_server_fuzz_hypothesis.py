"""Hypothesis-drawn LSP traffic to one long-lived ``evoteam serve`` over raw stdio frames: 10,000 messages by default
(``EVOTEAM_FUZZ_COUNT`` scales it down for a quick run; ``EVOTEAM_FUZZ_SEED`` draws another sequence, the seed is
printed), in batches of ``BATCH``, one hypothesis example each.

The mix: the requests the server serves (and some it does not) with valid params, with random and mutated ones
(wrong types, missing or extra fields, huge integers, unicode, out-of-range positions, unknown URIs), the
``evoteam.*`` commands with random arguments, document notifications with random text, unknown methods, bodies that
are not JSON, envelopes that are not JSON-RPC (no or a bad ``jsonrpc``/``method``, ids of every wrong type), batch
arrays, responses to nothing (and to the client's own pending requests), ``$/cancelRequest`` for random and for
recent ids, and broken frames (a Content-Length that is missing, malformed, too short or too long).

Each message's answer is known when it is drawn: one answer for its id (from a set of error codes, or any answer),
one error for id null, or nothing. After each batch every request of it must have its answer; at the end, after a
real ``evoteam/status`` and hover, ``shutdown`` and ``exit`` (so that everything the server wrote has been read),
every request id has exactly one answer, the errors for id null are exactly the expected ones, and nothing else was
answered. ``test_server_fuzz.py`` is the seeded-random sibling, with exact answers for each kind one by one."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hardening import record

pytest.importorskip("hypothesis", reason="hypothesis is not installed (a dev tool: pip install -e .[dev])")

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from lsp_support import evolved_repo
from lsp_wire import (
    COMMANDS,
    INTERNAL_ERROR,
    INVALID_BODIES,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOTIFICATIONS,
    PARSE_ERROR,
    REQUESTS,
    Wire,
    encode,
    start,
    stop,
)
from lsprotocol.types import METHOD_TO_TYPES

from evoteam.server.convert import entry_line
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.state import fold

SEED = int(os.environ.get("EVOTEAM_FUZZ_SEED", "10007"))
COUNT = int(os.environ.get("EVOTEAM_FUZZ_COUNT", "10000"))
BATCH = 50
"""Messages per hypothesis example: the server is synchronised (every request of the batch answered) after each."""
Strategy = st.SearchStrategy[Any]


# -- what is drawn ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NewId:
    """Where a fresh request id goes (unique over the whole test): ``style`` is its kind (all of them usable ids),
    ``prefix`` starts a string id."""

    style: str
    prefix: str = ""


@dataclass(frozen=True)
class RecentId:
    """The id of one of the last requests sent (``back`` places back): for $/cancelRequest and echoed responses."""

    back: int


@dataclass(frozen=True)
class Framing:
    """How a body goes on the wire. ``plain``, ``content_type``, ``extra_headers``, ``leading_zeros`` and
    ``long_ws`` (Content-Length counts whitespace after the JSON) are well-formed frames; ``no_length`` (no or a
    malformed Content-Length: the server cannot know a message is there), ``short`` (Content-Length cuts the body)
    and ``long_junk`` (it counts bytes after the JSON that are not whitespace) are not."""

    kind: str = "plain"
    variant: int = 0
    pad: bytes = b""


@dataclass(frozen=True)
class Item:
    """One message and its answer: ``answer`` is ``id`` (its id is answered once, with an error code of ``codes``
    or, when ``codes`` is None, with anything), ``null`` (one error ``null_code`` for id null) or ``none``."""

    kind: str
    message: Any
    """A JSON value with ``NewId``/``RecentId`` placeholders, or bytes: the body as it is."""
    answer: str
    codes: frozenset[int] | None = None
    null_code: int | None = None
    framing: Framing = field(default_factory=Framing)


@dataclass(frozen=True)
class Context:
    """What the drawn messages refer to: the repository's kernel file, its other files, its run."""

    kernel_uri: str
    repo_uris: tuple[str, ...]
    run: str
    candidates: tuple[str, ...]
    kernel_text: str


BAD_LENGTH_HEADERS = [
    b"content-length: %d\r\n",
    b"CONTENT-LENGTH: %d\r\n",
    b"Content-Length:%d\r\n",
    b"Content-Length: %d \r\n",
    b"Content-Length:  %d\r\n",
    b"Content-Length: -%d\r\n",
    b"Content-Length: +%d\r\n",
    b"Content-Length: %d.0\r\n",
    b"Content-Length: 0x%x\r\n",
    b"Content-Length\t: %d\r\n",
    b"X-Content-Length: %d\r\n",
    b"Content-Length: %d\n",
    b"Content-Length: abc\r\n",
    b"Content-Length: \r\n",
    b"Content-Length: 0\r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
    b"",
]
WHITESPACE_PADS = [b" ", b"\r\n", b"\t", b"\n\n\n", b" \t\r\n "]
JUNK_PADS = [b"}", b"x", b",", b"0", b"\x00", b"{}", b"\xff\xfe", b" ]", b"\r\nContent-Length: 2\r\n\r\n{}"]
BROKEN_FRAMES = ["content_type", "extra_headers", "leading_zeros", "long_ws", "long_junk", "short", "no_length"]
EDGE_INTS = [-1, 2**31 - 1, 2**31, 2**32, 2**53, 2**53 + 1, 2**63, -(2**63), 2**64, 10**30, -(10**30)]
EDGE_STRINGS = [
    "",
    " ",
    "\u0000",
    "\ud800",
    "\udfff\ud800",
    "😀",
    "é" * 40,
    "\u202e\u200b",
    "\r\n",
    "Content-Length: 5\r\n\r\n{}",
    "file:///",
    "file:///nope.cpp",
    "untitled:1",
    "%%%",
    "../../etc/passwd",
]
ID_PREFIXES = ["", "", "s", "ü", "😀", "\ud800", " ", "id with spaces", "\u0000", "1", "null"]
ID_STYLES = ["int", "int", "int", "negative", "big", "huge", "str", "str", "str"]
UNKNOWN_METHODS = ["evoteam/nothing", "textDocument/unknown", "$/private", "", "ü/ü", "x" * 2000, "/", "evoteam/"]
EXTRA_FIELDS = ["extra", "", "uri", "ü", "textDocument", "position", "__proto__", "id", "jsonrpc"]
KEEP_OUT = {"exit", "shutdown", "initialize", "initialized", "evoteam/status"}
"""Method names a drawn unknown method may not have (the session's own start and end are sent by the test)."""


def weighted(*choices: tuple[int, Strategy]) -> Strategy:
    """One of ``choices``, each drawn in proportion to its weight (``st.one_of`` draws its distinct branches evenly
    and takes a repeated branch once)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(table.__getitem__)


def json_values(ctx: Context) -> Strategy:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from(EDGE_INTS),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
        st.sampled_from([*EDGE_STRINGS, ctx.kernel_uri, ctx.run]),
    )
    keys = st.sampled_from(["uri", "textDocument", "position", "range", "line", "character", "command", "", "a"])
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys | st.text(max_size=6), inner, max_size=4),
        max_leaves=6,
    )


def rare_values() -> Strategy:
    """Now and then: a long unicode string or a deeply nested value."""
    huge = st.sampled_from([10_000, 100_000, 300_000]).map(lambda n: "é" * n)
    deep = st.tuples(st.integers(20, 200), st.booleans()).map(_nested)
    return huge | deep


def _nested(spec: tuple[int, bool]) -> Any:
    depth, lists = spec
    value: Any = "deep"
    for _ in range(depth):
        value = [value] if lists else {"k": value}
    return value


def _coordinate(n: int) -> int:
    """0 to 60 mostly, else a number no document has (negative, past 2**31, past 2**64)."""
    return n if n <= 60 else EDGE_INTS[n % len(EDGE_INTS)]


def _position(n: int) -> dict[str, int]:
    return {"line": _coordinate(n % 80), "character": _coordinate(n // 80)}


def _mutated(value: Any, choice: int, junk: Any, depth: int = 0) -> Any:
    """``value`` with one thing wrong (``choice`` says which): a field left out, replaced by ``junk``, one more
    field, the same one level down, or ``value`` itself replaced by ``junk``."""
    if not isinstance(value, dict) or not value or choice % 9 == 0 or depth > 3:
        return junk
    choice //= 9
    keys = sorted(value)
    key = keys[choice % len(keys)]
    choice //= len(keys)
    value = dict(value)
    op = choice % 4
    if op == 0:
        del value[key]
    elif op == 1:
        value[key] = junk
    elif op == 2:
        value[EXTRA_FIELDS[(choice // 4) % len(EXTRA_FIELDS)]] = junk
    else:
        value[key] = _mutated(value[key], choice // 4, junk, depth + 1)
    return value


def _envelope(msg_id: Any, method: str, params: Any, with_params: bool, **fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method, **fields}
    if with_params or params is not None:  # JSON-RPC: params may be left out
        message["params"] = params
    return message


def _unreadable(body: bytes) -> Item:
    """A body the server cannot read as one JSON value gets a ParseError; one that happens to be JSON, an
    InvalidRequest (a body that happens to be an object is swapped for a known broken one)."""
    try:
        value = json.loads(body)
    except Exception:  # what the server's reader gets too: ParseError
        return Item("not JSON", body, "null", null_code=PARSE_ERROR)
    if isinstance(value, dict):
        return Item("not JSON", INVALID_BODIES[0], "null", null_code=PARSE_ERROR)
    return Item("JSON that is not an object", body, "null", null_code=INVALID_REQUEST)


def _response(drawn: tuple[Any, int, Any, Any]) -> Item:
    msg_id, which, result, error = drawn
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id}
    if which != 1:
        message["result"] = result
    if which != 0:
        message["error"] = error
    return Item("response to nothing", message, "none")


def _framing(drawn: int) -> Framing:
    """Nine frames in ten plain; the rest any of ``BROKEN_FRAMES``."""
    n, variant = drawn % 100, drawn // 100
    if n < 90:
        return Framing()
    kind = BROKEN_FRAMES[n % len(BROKEN_FRAMES)]
    if kind == "long_ws":
        return Framing(kind, pad=WHITESPACE_PADS[variant % len(WHITESPACE_PADS)])
    if kind == "long_junk":
        return Framing(kind, pad=JUNK_PADS[variant % len(JUNK_PADS)])
    if kind == "no_length":
        variant %= len(BAD_LENGTH_HEADERS)
    return Framing(kind, variant)


def _framed(drawn: tuple[Item, Framing]) -> Item:
    item, framing = drawn
    if framing.kind != "plain" and not isinstance(item.message, dict | list):
        return item  # other frames only around JSON objects and arrays (see ``frame``)
    return Item(item.kind, item.message, item.answer, item.codes, item.null_code, framing)


REQUEST_IDS = st.integers(0, len(ID_STYLES) * len(ID_PREFIXES) - 1).map(
    lambda n: NewId(ID_STYLES[n % len(ID_STYLES)], ID_PREFIXES[n // len(ID_STYLES)])
)
RECENT_IDS = st.integers(0, 40).map(RecentId)


class Traffic:
    """The strategies: ``message`` draws one ``Item``, ``framed`` one with the frame it goes in."""

    def __init__(self, ctx: Context) -> None:
        junk = json_values(ctx)
        coord = st.integers(0, 79).map(_coordinate)
        position = st.integers(0, 80 * 80 - 1).map(_position)
        span = st.fixed_dictionaries({"start": position, "end": position})
        others = [
            *ctx.repo_uris,
            "file:///nope.cpp",
            "file:///",
            "untitled:1",
            "",
            "x",
            "file://host/share/k.cpp",
            "file:///%ff%fe.cpp",
            ctx.kernel_uri.upper(),
            ctx.kernel_uri + "?q=1#f",
            "http://example.com/kernel.cpp",
        ]
        uri = st.sampled_from([ctx.kernel_uri] * len(others) + others)
        rarely_kernel = st.sampled_from([ctx.kernel_uri, *others, *others])  # opening it compiles it
        document = st.fixed_dictionaries({"uri": uri})
        text = weighted(
            (6, st.text(max_size=200)),
            (1, st.just(ctx.kernel_text)),
            (1, st.sampled_from(EDGE_STRINGS)),
            (1, st.text(max_size=20).map(lambda t: ctx.kernel_text.replace("scale_add", t))),
        )
        diagnostic = st.fixed_dictionaries(
            {"range": span, "message": st.text(max_size=20)},
            optional={"severity": coord, "source": st.text(max_size=8)},
        )
        wrong_runs = st.sampled_from(["nope", "", "../x", ctx.run + "x", "a" * 300])
        run = weighted((3, st.just(ctx.run)), (1, wrong_runs), (1, junk))
        candidate = st.sampled_from([*ctx.candidates, "nope", ""]) | junk
        by_run = st.one_of(
            st.lists(run, max_size=1),
            st.tuples(run, candidate).map(list),
            st.fixed_dictionaries({"run": run}, optional={"candidate": candidate}).map(_one),
            st.lists(junk, max_size=3),
        )
        arguments = {
            "evoteam.evolve": st.one_of(
                st.lists(junk, max_size=3),
                st.tuples(uri, junk).map(list),
                st.fixed_dictionaries({"uri": uri}, optional={"options": junk}).map(_one),
            ),
            "evoteam.runs": st.sampled_from([[], [{}]]) | st.lists(junk, max_size=2),
            "evoteam.createTaskEntry": st.one_of(
                st.lists(uri, max_size=2), st.fixed_dictionaries({"uri": uri}).map(_one), st.lists(junk)
            ),
        }
        by_command = {
            name: st.fixed_dictionaries(
                {"command": st.just(name)},
                optional={"arguments": arguments.get(name, by_run) | st.none(), "workDoneToken": junk},
            )
            for name in [*COMMANDS, "evoteam.report"]
        }
        names = sorted(by_command)
        random_command = st.fixed_dictionaries(
            {"command": st.text(max_size=15)}, optional={"arguments": st.lists(junk, max_size=3)}
        )
        execute = weighted((6, st.sampled_from(names).flatmap(by_command.__getitem__)), (1, random_command))
        evoteam_settings = st.fixed_dictionaries(
            {},
            optional={
                "rounds": coord | junk,
                "budget": coord | junk,
                "team": st.sampled_from(["single", "fixed", "evolving", "?"]),
                "llm": st.sampled_from(["auto", "offline", "anthropic", "nope"]),
                "runner": st.sampled_from(["local", "ray", "ssh://", "x"]),
                "evaluations": coord,
                "bogus": junk,
            },
        )
        change = st.fixed_dictionaries({"text": text}) | st.fixed_dictionaries(
            {"range": span, "text": text}, optional={"rangeLength": coord}
        )
        at = st.fixed_dictionaries({"textDocument": document, "position": position})
        whole = st.fixed_dictionaries({"textDocument": document})
        params: dict[str, Strategy] = {
            "textDocument/hover": at,
            "textDocument/completion": at,
            "textDocument/definition": at,
            "textDocument/inlayHint": st.fixed_dictionaries({"textDocument": document, "range": span}),
            "textDocument/codeLens": whole,
            "textDocument/documentSymbol": whole,
            "textDocument/diagnostic": whole,
            "textDocument/semanticTokens/full": whole,
            "textDocument/formatting": st.fixed_dictionaries(
                {"textDocument": document, "options": st.fixed_dictionaries({"tabSize": coord, "insertSpaces": junk})}
            ),
            "textDocument/codeAction": st.fixed_dictionaries(
                {
                    "textDocument": document,
                    "range": span,
                    "context": st.fixed_dictionaries(
                        {"diagnostics": st.lists(diagnostic, max_size=2)},
                        optional={"only": st.lists(st.sampled_from(["quickfix", "source", "refactor", "", "x"]))},
                    ),
                }
            ),
            "codeLens/resolve": st.fixed_dictionaries({"range": span}, optional={"data": junk}),
            "inlayHint/resolve": st.fixed_dictionaries({"position": position, "label": st.text(max_size=10)}),
            "workspace/executeCommand": execute,
            "workspace/symbol": st.fixed_dictionaries({"query": st.text(max_size=10)}),
            "evoteam/status": st.sampled_from([{}, None, []]) | junk,
            "textDocument/didOpen": st.fixed_dictionaries(
                {
                    "textDocument": st.fixed_dictionaries(
                        {
                            "uri": rarely_kernel,
                            "languageId": st.sampled_from(["cpp", "cuda-cpp", "python", "plaintext", ""]),
                            "version": coord,
                            "text": text,
                        }
                    )
                }
            ),
            "textDocument/didChange": st.fixed_dictionaries(
                {
                    "textDocument": st.fixed_dictionaries({"uri": uri, "version": coord}),
                    "contentChanges": st.lists(change, max_size=3),
                }
            ),
            "textDocument/didSave": st.fixed_dictionaries(
                {"textDocument": st.fixed_dictionaries({"uri": rarely_kernel})}, optional={"text": text}
            ),
            "textDocument/didClose": whole,
            "workspace/didChangeConfiguration": st.fixed_dictionaries(
                {"settings": st.fixed_dictionaries({"evoteam": evoteam_settings | junk}) | junk}
            ),
            "workspace/didChangeWatchedFiles": st.fixed_dictionaries(
                {"changes": st.lists(st.fixed_dictionaries({"uri": uri, "type": coord}), max_size=3)}
            ),
            "window/workDoneProgress/cancel": st.fixed_dictionaries({"token": st.text(max_size=8) | st.integers()}),
            "$/cancelRequest": st.fixed_dictionaries({"id": RECENT_IDS | st.integers() | st.text(max_size=8)}),
            "$/setTrace": st.fixed_dictionaries({"value": st.sampled_from(["off", "messages", "verbose"]) | junk}),
        }
        pairs = {method: st.tuples(st.just(method), strategy) for method, strategy in params.items()}
        mutation = st.tuples(st.integers(0, 2**30), junk)

        def of(methods: list[str]) -> Strategy:
            return st.sampled_from(methods).flatmap(pairs.__getitem__)

        request_methods = [m for m in REQUESTS if m.startswith("textDocument/")]
        unknown = (st.sampled_from(UNKNOWN_METHODS) | st.text(max_size=20).map("evoteam/fuzz/{}".format)).filter(
            lambda m: m not in METHOD_TO_TYPES and m not in KEEP_OUT
        )
        scalar = st.one_of(
            st.integers(), st.text(max_size=8), st.booleans(), st.floats(allow_nan=False, allow_infinity=False)
        )
        bad_ids = st.one_of(
            st.none(),
            st.booleans(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        )
        any_method = st.sampled_from([*REQUESTS, *NOTIFICATIONS]) | unknown
        valid = self.requests(of(REQUESTS), None, "request")
        commands = self.requests(pairs["workspace/executeCommand"], None, "executeCommand")
        notified = weighted(
            (1, of(NOTIFICATIONS).map(_notification)),
            (1, st.tuples(of(NOTIFICATIONS), mutation).map(_mutated_pair).map(_notification)),
        )
        not_objects = st.one_of(
            st.integers(),
            st.text(max_size=8),
            st.none(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.lists(junk, max_size=3),
        )
        extra = st.tuples(valid, st.text(max_size=8), junk).map(_with_extra_field)
        rare = st.tuples(of(REQUESTS), st.tuples(st.integers(0, 2**30), rare_values())).map(_mutated_pair)
        unreadable = st.one_of(
            st.sampled_from(INVALID_BODIES),
            st.binary(min_size=1, max_size=40),
            st.sampled_from([b"[" * 100_000, b'{"a":' * 60_000, b'{"jsonrpc": "2.0", "method": "\xff\xfe"}']),
            st.tuples(st.sampled_from(REQUESTS), st.integers(1, 10**6)).map(_two_in_one),
        ).map(_unreadable)
        self.message = weighted(
            (20, valid),
            (18, self.requests(st.tuples(of(REQUESTS), mutation).map(_mutated_pair), None, "request, bad params")),
            (6, commands),
            (
                3,
                self.requests(
                    st.tuples(pairs["workspace/executeCommand"], mutation).map(_mutated_pair),
                    None,
                    "executeCommand, bad params",
                ),
            ),
            (16, notified),
            (4, st.tuples(RECENT_IDS | st.integers() | junk).map(_cancel)),
            (
                5,
                self.requests(
                    st.tuples(unknown, st.sampled_from([{}, None, [1, 2], {"a": 1}]) | junk),
                    frozenset({METHOD_NOT_FOUND, INVALID_PARAMS}),
                    "unknown method",
                ),
            ),
            (2, st.tuples(unknown, st.booleans(), junk).map(_unknown_notification)),
            (1, self.requests(of(NOTIFICATIONS), frozenset({INVALID_REQUEST}), "notification sent as a request")),
            (1, of(request_methods).map(_request_as_notification)),
            (
                3,
                self.requests(
                    st.tuples(st.sampled_from(REQUESTS) | unknown, scalar),
                    frozenset({INVALID_PARAMS}),
                    "params neither object nor array",
                ),
            ),
            (4, st.tuples(bad_ids, any_method, st.sampled_from([{}, None]) | junk).map(_wrong_id)),
            (2, not_objects.map(_not_an_object)),
            (
                1,
                st.sampled_from([{}, {"foo": "boo"}, {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "result": 1}]).map(
                    _no_message
                ),
            ),
            (1, REQUEST_IDS.map(_id_alone)),
            (
                1,
                st.tuples(REQUEST_IDS, any_method, st.sampled_from([None, "1.0", 2, "2.0 ", "", "2", "absent"])).map(
                    _bad_jsonrpc
                ),
            ),
            (
                1,
                st.tuples(REQUEST_IDS, st.integers() | st.none() | st.lists(junk, max_size=2) | st.booleans()).map(
                    _method_not_a_string
                ),
            ),
            (1, st.tuples(st.sampled_from([None, "1.0", 2, "absent"]), any_method).map(_bad_jsonrpc_notification)),
            (4, unreadable),
            (2, st.lists(valid | commands | notified, max_size=4).map(_batch)),
            (
                3,
                st.tuples(
                    RECENT_IDS | st.text(max_size=8).map("stray-{}".format) | st.integers(-(2**40), -1) | bad_ids,
                    st.integers(0, 2),
                    junk,
                    st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=10)}) | junk,
                ).map(_response),
            ),
            (1, st.just(Item("initialized again", {"jsonrpc": "2.0", "method": "initialized"}, "none"))),
            (
                1,
                self.requests(
                    st.just(("initialize", {"capabilities": {}})), frozenset({INVALID_REQUEST}), "initialize again"
                ),
            ),
            (1, extra),
            (1, self.requests(rare, None, "request, a huge or deep param")),
        )
        self.framed = st.tuples(self.message, st.integers(0, 100 * 2**16 - 1).map(_framing)).map(_framed)

    def requests(self, pairs: Strategy, codes: frozenset[int] | None, kind: str) -> Strategy:
        """Requests of the (method, params) ``pairs``, each with a fresh id, answered with ``codes``."""
        return st.tuples(pairs, REQUEST_IDS, st.booleans()).map(lambda x: _request_item(x, codes, kind))


def _one(value: Any) -> list[Any]:
    return [value]


def _request_item(drawn: tuple[tuple[str, Any], NewId, bool], codes: frozenset[int] | None, kind: str) -> Item:
    (method, params), msg_id, with_params = drawn
    return Item(kind, _envelope(msg_id, method, params, with_params), "id", codes)


def _mutated_pair(drawn: tuple[tuple[str, Any], tuple[int, Any]]) -> tuple[str, Any]:
    (method, params), (choice, junk) = drawn
    return method, _mutated(params, choice, junk)


def _notification(pair: tuple[str, Any]) -> Item:
    method, params = pair
    return Item("notification", {"jsonrpc": "2.0", "method": method, "params": params}, "none")


def _cancel(drawn: tuple[Any]) -> Item:
    return Item("$/cancelRequest", {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": drawn[0]}}, "none")


def _unknown_notification(drawn: tuple[str, bool, Any]) -> Item:
    method, with_params, params = drawn
    message = {"jsonrpc": "2.0", "method": method, **({"params": params} if with_params else {})}
    return Item("unknown notification", message, "none")


def _request_as_notification(pair: tuple[str, Any]) -> Item:
    method, params = pair
    return Item("request sent as a notification", {"jsonrpc": "2.0", "method": method, "params": params}, "none")


def _wrong_id(drawn: tuple[Any, str, Any]) -> Item:
    msg_id, method, params = drawn
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return Item("id of a wrong type", message, "null", null_code=INVALID_REQUEST)


def _not_an_object(value: Any) -> Item:
    return Item("not an object", value, "null", null_code=INVALID_REQUEST)


def _no_message(value: dict[str, Any]) -> Item:
    return Item("an object that is no message", value, "null", null_code=INVALID_REQUEST)


def _id_alone(msg_id: NewId) -> Item:
    return Item("neither request nor response", {"jsonrpc": "2.0", "id": msg_id}, "id", frozenset({INVALID_REQUEST}))


def _bad_jsonrpc(drawn: tuple[NewId, str, Any]) -> Item:
    msg_id, method, version = drawn
    message = _envelope(msg_id, method, {}, True)
    if version == "absent":
        del message["jsonrpc"]
    else:
        message["jsonrpc"] = version
    return Item("bad jsonrpc", message, "id", frozenset({INVALID_REQUEST}))


def _method_not_a_string(drawn: tuple[NewId, Any]) -> Item:
    msg_id, method = drawn
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {}}
    return Item("method not a string", message, "id", frozenset({INVALID_REQUEST}))


def _bad_jsonrpc_notification(drawn: tuple[Any, str]) -> Item:
    version, method = drawn
    message: dict[str, Any] = {"method": method, "params": {}}
    if version != "absent":
        message["jsonrpc"] = version
    return Item("notification with a bad jsonrpc", message, "null", null_code=INVALID_REQUEST)


def _two_in_one(drawn: tuple[str, int]) -> bytes:
    method, msg_id = drawn
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method}).encode() * 2


def _batch(items: list[Item]) -> Item:
    return Item("batch array", [i.message for i in items], "null", null_code=INVALID_REQUEST)


def _with_extra_field(drawn: tuple[Item, str, Any]) -> Item:
    item, name, value = drawn
    return Item("request with an extra field", {**item.message, f"x-{name}": value}, item.answer, item.codes)


def frame(body: bytes, framing: Framing) -> bytes:
    """``body`` on the wire. A frame the server cannot see as a message (``no_length``) and the bytes a short
    Content-Length leaves over end in CRLF, so that the server's reader reads them as one header line it ignores
    and finds the next frame's header after it (without it, the next frame's header would be lost too)."""
    n, kind = len(body), framing.kind
    content_type = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
    if kind == "plain":
        return b"Content-Length: %d\r\n\r\n" % n + body
    if kind == "content_type":
        return content_type + b"Content-Length: %d\r\n\r\n" % n + body
    if kind == "extra_headers":
        return b"X-Fuzz: 1\r\nContent-Length: %d\r\n" % n + content_type + b"X-Other:\r\n\r\n" + body
    if kind == "leading_zeros":
        return b"Content-Length: 000%d\r\n\r\n" % n + body
    if kind in ("long_ws", "long_junk"):
        return b"Content-Length: %d\r\n\r\n" % (n + len(framing.pad)) + body + framing.pad
    if kind == "short":
        cut = 1 + framing.variant % (n - 1)  # 1 .. n-1 bytes short: a cut JSON object or array is never JSON
        return b"Content-Length: %d\r\n\r\n" % (n - cut) + body + b"\r\n"
    assert kind == "no_length", kind
    header = BAD_LENGTH_HEADERS[framing.variant]
    return (header % n if b"%" in header else header) + b"\r\n" + body + b"\r\n"


def _key(msg_id: Any) -> str:
    return json.dumps(msg_id, sort_keys=True)


def _safe(message: Any, run: str) -> Any:
    """No drawn command may start a real run or a report: ``evoteam.evolve`` and ``evoteam.report`` get no
    ``file:`` URI (so no kernel task) and not the real run."""
    if not isinstance(message, dict) or message.get("method") != "workspace/executeCommand":
        return message
    params = message.get("params")
    if not isinstance(params, dict) or params.get("command") not in ("evoteam.evolve", "evoteam.report"):
        return message
    return {**message, "params": {**params, "arguments": _defused(params.get("arguments"), run)}}


def _defused(value: Any, run: str) -> Any:
    if isinstance(value, str):
        if value.lower().startswith("file:"):
            return "file:///nonexistent/kernel.cpp"
        return "nope" if value == run else value
    if isinstance(value, list):
        return [_defused(v, run) for v in value]
    if isinstance(value, dict):
        return {k: _defused(v, run) for k, v in value.items()}
    return value


# -- the session -----------------------------------------------------------------------------------------------------
class Session:
    """Sends drawn items with fresh ids, records what each must be answered with, and tallies what came back."""

    def __init__(self, wire: Wire, run: str) -> None:
        self.wire = wire
        self.run = run
        self.counter = 0
        self.recent: deque[Any] = deque(maxlen=41)
        self.expect: dict[str, frozenset[int] | None] = {}
        """Request id → the error codes its one answer may have (None: any answer)."""
        self.never: set[str] = set()
        """Ids that must get no answer (inside a batch array, an unreadable body, a response)."""
        self.maybe: set[str] = set()
        """Ids inside frames the server cannot see as messages (no Content-Length): at most one answer."""
        self.method: dict[str, str] = {}
        self.null: Counter[int] = Counter()
        self.kinds: Counter[str] = Counter()
        self.frames: Counter[str] = Counter()
        self.messages = 0
        self.got: Counter[str] = Counter()
        self.first: dict[str, dict[str, Any]] = {}
        self.nulls: Counter[int] = Counter()
        self.malformed: list[dict[str, Any]] = []
        self.seen = 0
        self.waited = 0.0
        """Seconds spent waiting for the server's answers (the rest is drawing and sending)."""

    def new_id(self, placeholder: NewId) -> Any:
        self.counter += 1
        n = self.counter
        return {
            "int": n,
            "negative": -n,
            "big": 2**53 + n,
            "huge": 2**70 + n,
            "str": f"{placeholder.prefix}#{n}",
        }[placeholder.style]

    def fill(self, value: Any, fresh: list[Any]) -> Any:
        """``value`` with its placeholders replaced (fresh ids appended to ``fresh``)."""
        if isinstance(value, NewId):
            fresh.append(self.new_id(value))
            return fresh[-1]
        if isinstance(value, RecentId):
            return self.recent[-1 - value.back % len(self.recent)] if self.recent else 0
        if isinstance(value, list):
            return [self.fill(v, fresh) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v, fresh) for k, v in value.items()}
        return value

    def send(self, item: Item) -> list[str]:
        """Sends one item; the keys of the ids that must be answered."""
        fresh: list[Any] = []
        message = self.fill(item.message, fresh)
        message = [_safe(m, self.run) for m in message] if isinstance(message, list) else _safe(message, self.run)
        framing = item.framing
        self.wire.write(frame(encode(message), framing))
        self.messages += 1
        self.kinds[item.kind] += 1
        self.frames[framing.kind] += 1
        readable = framing.kind not in ("no_length", "short", "long_junk")
        wanted: list[str] = []
        for n, msg_id in enumerate(fresh):  # an item answered by id has one fresh id: the message's own
            key = _key(msg_id)
            if framing.kind == "no_length":
                self.maybe.add(key)
            elif readable and item.answer == "id" and n == 0:
                self.expect[key] = item.codes
                self.method[key] = f"{item.kind}: {message.get('method')!r}"
                self.recent.append(msg_id)
                wanted.append(key)
            else:
                self.never.add(key)
        if framing.kind in ("short", "long_junk"):
            self.null[PARSE_ERROR] += 1
        elif readable and item.answer == "null":
            assert item.null_code is not None
            self.null[item.null_code] += 1
        return wanted

    def absorb(self) -> None:
        """Tallies the answers that came since the last call."""
        for response in self.wire.responses[self.seen :]:
            well_formed = response.get("jsonrpc") == "2.0" and ("result" in response) != ("error" in response)
            if "error" in response:
                error = response["error"]
                well_formed = (
                    well_formed and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
                )
            if not well_formed or "id" not in response:
                self.malformed.append(response)
                continue
            if response["id"] is None:
                if "error" in response:
                    self.nulls[response["error"]["code"]] += 1
                else:
                    self.malformed.append(response)
                continue
            key = _key(response["id"])
            self.got[key] += 1
            self.first.setdefault(key, response)
        self.seen = len(self.wire.responses)

    async def batch(self, items: list[Item]) -> None:
        """Sends ``items``; returns when every request of them has its answer (and every expected null one)."""
        wanted: list[str] = []
        for n, item in enumerate(items):
            wanted += self.send(item)
            if n % 10 == 9:
                await self.wire.drain()
        await self.wire.drain()

        def answered() -> bool:
            self.absorb()
            return all(self.got[k] for k in wanted) and self.nulls.total() >= self.null.total()

        began = time.monotonic()
        try:
            await self.wire.until(answered, 60, "the answers to a batch")
            self.waited += time.monotonic() - began
        except AssertionError:
            missing = [self.method[k] + f" (id {k})" for k in wanted if not self.got[k]]
            raise AssertionError(
                f"{len(missing)} requests unanswered (e.g. {missing[:5]}); errors for id null: {dict(self.nulls)},"
                f" expected {dict(self.null)}; server exit code {self.wire.proc.returncode}"
            ) from None
        twice = [f"{self.method[k]} (id {k}): {self.got[k]}" for k in wanted if self.got[k] > 1]
        assert not twice, f"answered more than once: {twice[:5]}"

    def problems(self, ours: set[str]) -> list[str]:
        """What broke the promise, after the session's end (everything the server wrote read)."""
        self.absorb()
        found = []
        missing = [f"{self.method[k]} (id {k})" for k in self.expect if self.got[k] == 0]
        twice = [f"{self.method[k]} (id {k}) x{self.got[k]}" for k in self.expect if self.got[k] > 1]
        if missing:
            found.append(f"{len(missing)} requests unanswered, e.g. {missing[:5]}")
        if twice:
            found.append(f"{len(twice)} requests answered more than once, e.g. {twice[:5]}")
        answered_never = [k for k in self.never if self.got[k]]
        if answered_never:
            found.append(f"{len(answered_never)} ids answered that are no request, e.g. {answered_never[:5]}")
        maybe_twice = [k for k in self.maybe if self.got[k] > 1]
        if maybe_twice:
            found.append(f"{len(maybe_twice)} ids of unframed requests answered more than once: {maybe_twice[:5]}")
        known = set(self.expect) | self.never | self.maybe | ours
        unasked = [k for k in self.got if k not in known]
        if unasked:
            found.append(f"answers for ids nobody sent: {unasked[:5]}")
        if self.nulls != self.null:
            found.append(f"errors for id null {dict(self.nulls)}, expected {dict(self.null)}")
        if self.malformed:
            found.append(f"{len(self.malformed)} malformed answers, e.g. {self.malformed[:3]}")
        wrong = []
        for key, allowed in self.expect.items():
            answer = self.first.get(key)
            if allowed is not None and answer is not None and answer.get("error", {}).get("code") not in allowed:
                wrong.append(f"{self.method[key]} (id {key}): {answer}, not {sorted(allowed)}")
        if wrong:
            found.append(f"{len(wrong)} answers with an unexpected code, e.g. {wrong[:3]}")
        return found


class Batch:
    """One example's items, shown by their kinds: hypothesis prints a failing example, and the items' bodies (some
    of hundreds of kB) would make it too long to print."""

    def __init__(self, items: list[Item]) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"Batch({[(i.kind, i.framing.kind) for i in self.items]})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


def run_examples(traffic: Traffic, session: Session, runner: asyncio.Runner, draw_seed: int, examples: int) -> None:
    """``examples`` hypothesis examples of ``BATCH`` messages each, all to the one server of ``session``."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the server's state goes on between examples
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
        report_multiple_bugs=False,
        print_blob=False,
    )
    @seed(draw_seed)
    @given(st.lists(traffic.framed, min_size=BATCH, max_size=BATCH).map(Batch))
    def one_batch(batch: Batch) -> None:
        runner.run(session.batch(batch.items))

    one_batch()


@pytest.mark.hardening
@pytest.mark.slow
def test_hypothesis_traffic_gets_exactly_one_answer_per_request(evolved: tuple[Path, str], tmp_path: Path) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    state = fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events())
    ctx = Context(
        kernel_uri=kernel.as_uri(),
        repo_uris=tuple((repo / name).as_uri() for name in ("evoteam.toml", "scale_add.json", ".evoteam", "")),
        run=run,
        candidates=tuple(state.candidates),
        kernel_text=kernel.read_text(),
    )
    strategies = Traffic(ctx)
    log = tmp_path / "server.log"
    print(f"hypothesis fuzz seed {SEED} (EVOTEAM_FUZZ_SEED draws another), {COUNT} messages (EVOTEAM_FUZZ_COUNT)")
    failure: Exception | None = None
    alive = False
    started = fuzzed = time.monotonic()
    with asyncio.Runner() as runner:
        wire = runner.run(start(repo, log))
        session = Session(wire, run)
        try:
            init = {"processId": None, "rootUri": repo.as_uri(), "capabilities": {"workspace": {"configuration": True}}}
            assert "capabilities" in runner.run(wire.call("init", "initialize", init))["result"]
            wire.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            draws = 0
            while session.messages < COUNT:  # more examples, on the next seed, should hypothesis have run fewer
                examples = math.ceil((COUNT - session.messages) / BATCH)
                if draws:
                    print(f"{session.messages} messages sent: {examples} more examples from seed {SEED + draws}")
                run_examples(strategies, session, runner, SEED + draws, examples)
                draws += 1
            fuzzed = time.monotonic()
            alive = wire.proc.returncode is None
            runner.run(finale(wire, ctx, repo))
        except Exception as exc:
            failure = exc
            alive = wire.proc.returncode is None
        finally:
            runner.run(stop(wire))
        ended = time.monotonic()

    problems = session.problems({_key(k) for k in ("init", "status", "hover", "down", "late")})
    if failure is not None:
        problems.insert(0, f"{type(failure).__name__}: {str(failure)[:2000]}")
    requests = len(session.expect)
    once = sum(1 for k in session.expect if session.got[k] == 1)
    codes = Counter(
        str(session.first[k].get("error", {}).get("code", "result")) for k in session.expect if k in session.first
    )
    internal = [session.method[k] for k in session.expect if _code(session.first.get(k)) == INTERNAL_ERROR]
    unframed = sum(1 for k in session.maybe if session.got[k])
    traceback_lines = _tracebacks(log)
    unexpected = _unexpected(log)
    if unexpected:
        problems.append(f"unexpected exceptions in the server's log: {dict(unexpected)}")
    print(f"{session.messages} messages ({dict(session.kinds)})")
    print(f"frames: {dict(session.frames)}")
    if failure is None:
        print(
            f"drawn, sent and answered in {fuzzed - started:.1f} s ({session.waited:.1f} s waiting for answers);"
            f" the end of the session {ended - fuzzed:.1f} s"
        )
    print(f"answers to requests: {dict(codes)}; errors for id null: {dict(session.nulls)}")
    print(f"requests in unreadable frames answered: {unframed} of {len(session.maybe)}")
    print(f"internal errors ({len(internal)}): {Counter(internal).most_common(8)}")
    print(f"server log: {log.stat().st_size} bytes, tracebacks: {dict(traceback_lines)}, unexpected: {len(unexpected)}")
    figure = (
        f"{session.messages} messages, {requests} requests, {once} answered once, server {'alive' if alive else 'DOWN'}"
    )
    ok = not problems and alive and session.messages >= COUNT and once == requests
    record("lsp", "hypothesis fuzz: requests answered exactly once", figure, ok)
    if failure is not None:
        raise failure
    assert not problems, f"seed {SEED}: " + "; ".join(problems)
    assert alive and session.messages >= COUNT and once == requests, figure


def _code(answer: dict[str, Any] | None) -> Any:
    return (answer or {}).get("error", {}).get("code")


async def finale(wire: Wire, ctx: Context, repo: Path) -> None:
    """The session goes on after the fuzz: a real status and hover, then a clean ``shutdown`` and ``exit``."""
    status = await wire.call("status", "evoteam/status", {})
    assert status["result"]["runs"] == [ctx.run] and status["result"]["root"] == str(repo.resolve()), status
    uri = ctx.kernel_uri
    wire.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
    document = {"uri": uri, "languageId": "cpp", "version": 1, "text": ctx.kernel_text}
    wire.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": document}})
    line = entry_line(ctx.kernel_text, "scale_add")
    hover = await wire.call(
        "hover", "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": 3}}
    )
    text = hover["result"]["contents"]["value"]
    assert "### evoteam · scale_add" in text and f"run `{ctx.run}`" in text, hover
    assert hover["result"]["range"]["start"]["line"] == line, hover
    assert (await wire.call("down", "shutdown", None))["result"] is None
    late = await wire.call("late", "evoteam/status", {})
    assert late["error"]["code"] == INVALID_REQUEST, late
    wire.send({"jsonrpc": "2.0", "method": "exit"})
    await wire.drain()
    assert await asyncio.wait_for(wire.proc.wait(), 20) == 0, f"exit code {wire.proc.returncode}"
    await asyncio.wait_for(wire.reader, 10)  # everything the server wrote has been read


UNEXPECTED = ("cannot handle message", "Exception in callback", "exception was never retrieved", "Connection to the")
"""Log lines nothing in the server expects: the protocol's last resort (an exception while reading a message),
asyncio's (an exception in a callback, a task's left unread), pygls's lost connection."""


def _unexpected(log: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        for marker in UNEXPECTED:
            if marker in line:
                found[marker] += 1
    return found


def _tracebacks(log: Path) -> Counter[str]:
    """The exception lines that end each traceback in the server's log, by exception type."""
    found: Counter[str] = Counter()
    lines = log.read_text(errors="replace").splitlines()
    for n, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for after in lines[n + 1 :]:
                if not after.startswith((" ", "\t")):
                    found[re.split(r"[:(]", after, maxsplit=1)[0].strip()] += 1
                    break
    return found
