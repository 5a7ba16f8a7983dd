"""The fake Messages server: prompt-caching emulation (unit, with a fake clock) and the HTTP/SSE shapes it
answers with (over loopback, with the standard library's HTTP client, independent of the SDK)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from evoteam.roles.backends import fake_messages_script as script
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_prompt_cache import (
    CacheRequestError,
    PromptCacheEmulator,
    block_tokens,
    request_tokens,
)

KEY = "sk-fake-test-key"
EPHEMERAL = {"type": "ephemeral"}
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": KEY, "content-type": "application/json"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(system: str, turns: list[str], model: str = "m", ttl: str | None = None) -> dict[str, Any]:
    """A request with breakpoints on the system prompt and on the last block of the last message."""
    control: dict[str, Any] = {**EPHEMERAL, "ttl": ttl} if ttl else dict(EPHEMERAL)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(turns)
    ]
    messages[-1]["content"][-1]["cache_control"] = control
    return {
        "model": model,
        "max_tokens": 100,
        "system": [{"type": "text", "text": system, "cache_control": control}],
        "messages": messages,
    }


SYSTEM = "You optimize CUDA kernels. " * 40


def tokens_of_text(value: str) -> int:
    return block_tokens({"type": "text", "text": value})


# --- caching emulation -------------------------------------------------------------------------------------


@pytest.mark.unit
def test_first_request_writes_and_the_same_request_reads() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    request = body(SYSTEM, ["hello"])
    first = cache.account(request)
    assert (first.input_tokens, first.cache_read_input_tokens) == (0, 0)
    assert first.cache_creation_input_tokens == request_tokens(request) == first.ephemeral_5m_input_tokens
    second = cache.account(request)
    assert (second.input_tokens, second.cache_creation_input_tokens) == (0, 0)
    assert second.cache_read_input_tokens == request_tokens(request)


@pytest.mark.unit
def test_a_growing_conversation_reads_the_previous_turn_through_the_lookback() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    turn1 = body(SYSTEM, ["view kernel.cu"])
    turn2 = body(SYSTEM, ["view kernel.cu", "here it is", "now compile it"])
    cache.account(turn1)
    account = cache.account(turn2)
    assert account.cache_read_input_tokens == request_tokens(turn1)
    assert account.cache_creation_input_tokens == request_tokens(turn2) - request_tokens(turn1)
    assert account.input_tokens == 0


@pytest.mark.unit
def test_content_after_the_last_breakpoint_is_plain_input() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    request = body(SYSTEM, ["question"])
    del request["messages"][0]["content"][0]["cache_control"]
    account = cache.account(request)
    assert account.cache_creation_input_tokens == tokens_of_text(SYSTEM)
    assert account.input_tokens == tokens_of_text("question")


@pytest.mark.unit
def test_a_changed_system_prompt_or_tool_misses_the_cache() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    tool = {"name": "view", "description": "show a file", "input_schema": {"type": "object"}}
    base = {**body(SYSTEM, ["hi"]), "tools": [tool]}
    cache.account(base)
    changed_system = {**body(SYSTEM + " Be brief.", ["hi"]), "tools": [tool]}
    assert cache.account(changed_system).cache_read_input_tokens == 0
    changed_tool = {**body(SYSTEM, ["hi"]), "tools": [{**tool, "description": "show a whole file"}]}
    assert cache.account(changed_tool).cache_read_input_tokens == 0
    assert cache.account(base).cache_read_input_tokens == request_tokens(base)


@pytest.mark.unit
def test_entries_expire_after_five_minutes_and_reads_refresh_them() -> None:
    clock = FakeClock()
    cache = PromptCacheEmulator(min_tokens=10, clock=clock)
    request = body(SYSTEM, ["hi"])
    cache.account(request)
    clock.now += 200
    assert cache.account(request).cache_read_input_tokens > 0  # refreshed at +200
    clock.now += 250
    assert cache.account(request).cache_read_input_tokens > 0  # 250s after the refresh
    clock.now += 301
    expired = cache.account(request)
    assert expired.cache_read_input_tokens == 0
    assert expired.cache_creation_input_tokens == request_tokens(request)


@pytest.mark.unit
def test_one_hour_entries_outlive_five_minutes() -> None:
    clock = FakeClock()
    cache = PromptCacheEmulator(min_tokens=10, clock=clock)
    request = body(SYSTEM, ["hi"], ttl="1h")
    first = cache.account(request)
    assert first.ephemeral_1h_input_tokens == first.cache_creation_input_tokens > 0
    clock.now += 3000
    assert cache.account(request).cache_read_input_tokens == request_tokens(request)
    clock.now += 3601
    assert cache.account(request).cache_read_input_tokens == 0


@pytest.mark.unit
def test_prefixes_below_the_minimum_are_not_cached() -> None:
    cache = PromptCacheEmulator(min_tokens=1024, clock=FakeClock())
    request = body("short system prompt", ["hi"])
    for _ in range(2):
        account = cache.account(request)
        assert account.cache_creation_input_tokens == account.cache_read_input_tokens == 0
        assert account.input_tokens == request_tokens(request)


@pytest.mark.unit
def test_the_lookback_stops_after_twenty_blocks() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    short = body(SYSTEM, ["first question"])
    cache.account(short)
    turns = ["first question"] + [f"turn {i}" for i in range(1, 22)]  # 21 blocks after the cached prefix
    long = body(SYSTEM, turns)
    long["system"][0].pop("cache_control")
    assert cache.account(long).cache_read_input_tokens == 0


@pytest.mark.unit
def test_more_than_four_breakpoints_are_refused() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    request = body(SYSTEM, ["a", "b", "c", "d"])
    for message in request["messages"]:
        message["content"][-1]["cache_control"] = dict(EPHEMERAL)
    with pytest.raises(CacheRequestError, match="maximum of 4"):
        cache.account(request)


@pytest.mark.unit
def test_top_level_cache_control_marks_the_last_block_and_models_have_separate_caches() -> None:
    cache = PromptCacheEmulator(min_tokens=10, clock=FakeClock())
    request = {
        "model": "a",
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "hi"}],
        "cache_control": EPHEMERAL,
    }
    assert cache.account(request).cache_creation_input_tokens == request_tokens(request)
    assert cache.account(request).cache_read_input_tokens == request_tokens(request)
    assert cache.account({**request, "model": "b"}).cache_read_input_tokens == 0


# --- HTTP and SSE ------------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeMessagesServer]:
    with FakeMessagesServer(api_key=KEY, cache=PromptCacheEmulator(min_tokens=10)) as srv:
        yield srv


def post(
    server: FakeMessagesServer, path: str, payload: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    port = int(server.base_url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(payload), headers=headers or HEADERS)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in raw.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


@pytest.mark.integration
def test_a_json_reply_has_the_api_shape_and_the_request_is_recorded(server: FakeMessagesServer) -> None:
    server.push(script.text("Hello."))
    request = {**body(SYSTEM, ["hi"]), "metadata": {"user_id": "u1"}, "context_management": {"edits": []}}
    headers = {**HEADERS, "anthropic-beta": "prompt-caching-scope-2026-01-05"}
    status, response_headers, raw = post(server, "/v1/messages?beta=true", request, headers)
    assert status == 200 and response_headers["content-type"] == "application/json"
    message = json.loads(raw)
    assert message["type"] == "message" and message["role"] == "assistant" and message["model"] == "m"
    assert message["id"].startswith("msg_") and message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": "Hello."}]
    assert message["usage"]["cache_creation_input_tokens"] == request_tokens(request)
    assert message["usage"]["input_tokens"] == message["usage"]["cache_read_input_tokens"] == 0
    recorded = server.requests[-1]
    assert (recorded.method, recorded.path, recorded.query) == ("POST", "/v1/messages", "beta=true")
    assert recorded.headers["anthropic-beta"] == "prompt-caching-scope-2026-01-05"
    assert recorded.body == request
    assert server.message_bodies() == [request]


@pytest.mark.integration
def test_a_stream_sends_the_event_sequence_of_the_api(server: FakeMessagesServer) -> None:
    arguments = {"path": "kernel.cu", "view_range": [1, 120]}
    server.push(script.tool_use("view", arguments, say="Let me look at the kernel first."))
    status, headers, raw = post(server, "/v1/messages", {**body(SYSTEM, ["go"]), "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = parse_sse(raw)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["cache_creation_input_tokens"] > 0
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "text": "", "json": ""}
        elif name == "content_block_delta":
            delta, block = data["delta"], blocks[data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta"
                block["json"] += delta["partial_json"]
    assert names.count("content_block_stop") == 2
    assert blocks[0]["type"] == "text" and blocks[0]["text"] == "Let me look at the kernel first."
    assert blocks[1]["type"] == "tool_use" and blocks[1]["name"] == "view" and blocks[1]["id"].startswith("toolu_")
    assert json.loads(blocks[1]["json"]) == arguments
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert final["usage"]["output_tokens"] > 1
    assert final["usage"]["cache_creation_input_tokens"] == start["usage"]["cache_creation_input_tokens"]


@pytest.mark.integration
def test_a_mid_stream_error_event_ends_the_stream(server: FakeMessagesServer) -> None:
    server.push(script.mid_stream_error(after_events=3))
    status, _, raw = post(server, "/v1/messages", {**body(SYSTEM, ["go"]), "stream": True})
    events = parse_sse(raw)
    assert status == 200 and len(events) == 4
    assert [name for name, _ in events[:3]] == ["message_start", "ping", "content_block_start"]
    assert events[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


@pytest.mark.integration
def test_a_dropped_stream_is_cut_off(server: FakeMessagesServer) -> None:
    server.push(script.dropped_stream(after_events=4))
    with pytest.raises(http.client.IncompleteRead):
        post(server, "/v1/messages", {**body(SYSTEM, ["go"]), "stream": True})


@pytest.mark.integration
def test_a_truncated_stream_ends_cleanly_but_early(server: FakeMessagesServer) -> None:
    server.push(script.truncated_stream(after_events=5))
    status, _, raw = post(server, "/v1/messages", {**body(SYSTEM, ["go"]), "stream": True})
    names = [name for name, _ in parse_sse(raw)]
    assert status == 200 and len(names) == 5 and "message_stop" not in names and "error" not in names


@pytest.mark.integration
@pytest.mark.parametrize(
    ("item", "status", "error_type"),
    [
        (script.rate_limited(retry_after=7), 429, "rate_limit_error"),
        (script.overloaded(), 529, "overloaded_error"),
        (script.server_error(503), 503, "api_error"),
    ],
)
def test_http_failures_have_anthropic_error_bodies(
    server: FakeMessagesServer, item: script.FakeFailure, status: int, error_type: str
) -> None:
    server.push(item)
    got, headers, raw = post(server, "/v1/messages", body(SYSTEM, ["go"]))
    error = json.loads(raw)
    assert got == status
    assert error["type"] == "error" and error["error"]["type"] == error_type and error["error"]["message"]
    assert headers.get("retry-after") == ("7" if status == 429 else None)


@pytest.mark.integration
def test_headers_are_checked(server: FakeMessagesServer) -> None:
    request = body(SYSTEM, ["go"])
    status, _, raw = post(server, "/v1/messages", request, {**HEADERS, "x-api-key": "wrong"})
    assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error"
    without_version = {k: v for k, v in HEADERS.items() if k != "anthropic-version"}
    status, _, raw = post(server, "/v1/messages", request, without_version)
    assert status == 400 and "anthropic-version" in json.loads(raw)["error"]["message"]
    server.push(script.text("ok"))
    bearer = {**without_version, "anthropic-version": "2023-06-01", "authorization": f"Bearer {KEY}"}
    del bearer["x-api-key"]
    assert post(server, "/v1/messages", request, bearer)[0] == 200


@pytest.mark.integration
def test_bad_requests_and_unknown_paths(server: FakeMessagesServer) -> None:
    status, _, raw = post(server, "/v1/messages", {"model": "m", "messages": []})
    assert status == 400 and json.loads(raw)["error"]["message"] == "max_tokens: Field required"
    status, _, raw = post(server, "/v1/messages", body(SYSTEM, ["script is empty"]))
    assert status == 400 and "no reply left" in json.loads(raw)["error"]["message"]
    server.push(script.text("unused"))
    too_many = body(SYSTEM, ["a", "b", "c", "d"])
    for message in too_many["messages"]:
        message["content"][-1]["cache_control"] = dict(EPHEMERAL)
    status, _, raw = post(server, "/v1/messages", too_many)
    assert status == 400 and "maximum of 4" in json.loads(raw)["error"]["message"]
    status, _, raw = post(server, "/v1/complete", {})
    assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error"


@pytest.mark.integration
def test_count_tokens_and_a_callable_script() -> None:
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> script.ScriptItem:
        seen.append(request)
        return script.text(f"{len(request['messages'])} messages")

    with FakeMessagesServer(responder, api_key=None) as srv:
        request = body(SYSTEM, ["a", "b", "c"])
        status, _, raw = post(srv, "/v1/messages/count_tokens", request, {"anthropic-version": "2023-06-01"})
        assert status == 200 and json.loads(raw) == {"input_tokens": request_tokens(request)}
        status, _, raw = post(srv, "/v1/messages", request, {"anthropic-version": "2023-06-01"})
        assert status == 200 and json.loads(raw)["content"][0]["text"] == "3 messages"
    assert seen == [request]
