"""The ``anthropic`` backend: the real SDK (strict response validation) against the fake Messages server on
loopback — replies, tool round trips, streaming, our retries, timeouts, cache breakpoints and counters, and
the API key kept out of logs, exceptions and settings dumps."""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from evoteam.roles.backends import fake_messages_script as script
from evoteam.roles.backends.anthropic_api import AnthropicLLM, estimate_tokens, to_params
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_prompt_cache import PromptCacheEmulator, request_tokens
from evoteam.roles.backends.retry import RecordingSleeper
from evoteam.roles.backends.settings import DEFAULT_MODEL, AnthropicSettings
from evoteam.roles.llm import (
    FatalLLMError,
    LLMError,
    Message,
    Request,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)

pytestmark = pytest.mark.integration

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-sonnet-4-5"
SYSTEM = [
    "You are one agent of a team that optimizes GPU kernels. " * 20,
    "Role: Optimizer. Make the kernel faster without changing its results. " * 10,
    "Task: scale_add on float32 vectors; the baseline is a naive loop. " * 10,
    "Knowledge: coalesced loads helped; shared memory tiling did not. " * 10,
]
VIEW = ToolSpec(
    name="view",
    description="Show a file of the workspace with line numbers.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
def server() -> Iterator[FakeMessagesServer]:
    with FakeMessagesServer(api_key=KEY, cache=PromptCacheEmulator(min_tokens=100)) as srv:
        yield srv


class Backend:
    def __init__(self, server: FakeMessagesServer, **settings: Any) -> None:
        self.settings = AnthropicSettings(
            **{"api_key": KEY, "base_url": server.base_url, "max_retries": 3, "timeout_s": 60.0, **settings}
        )
        self.client = anthropic.Anthropic(
            api_key=KEY, base_url=server.base_url, max_retries=0, _strict_response_validation=True
        )
        self.sleeper = RecordingSleeper()
        self.llm = AnthropicLLM(self.settings, client=self.client, sleeper=self.sleeper, rng=random.Random(7))


@pytest.fixture
def make(server: FakeMessagesServer) -> Iterator[Any]:
    made: list[Backend] = []

    def factory(**settings: Any) -> Backend:
        made.append(Backend(server, **settings))
        return made[-1]

    yield factory
    for backend in made:
        backend.client.close()


def ask(text: str = "Make scale_add faster.", **fields: Any) -> Request:
    return Request(
        model=MODEL, system=SYSTEM, messages=[Message(role="user", content=[TextBlock(text=text)])], **fields
    )


def test_a_text_reply(server: FakeMessagesServer, make: Any) -> None:
    server.push(script.text("Use vectorized float4 loads."))
    reply = make().llm.complete(ask())
    assert reply.content == [TextBlock(text="Use vectorized float4 loads.")]
    assert reply.stop_reason == "end_turn" and reply.model == MODEL
    assert reply.usage.output_tokens > 0
    assert server.message_bodies()[0].get("stream") is None


def test_a_tool_use_round_trip(server: FakeMessagesServer, make: Any) -> None:
    server.push(script.tool_use("view", {"path": "kernel.cu"}, say="Let me read the kernel."), script.text("Done."))
    llm = make().llm
    request = ask(tools=[VIEW])
    first = llm.complete(request)
    assert first.stop_reason == "tool_use"
    call = first.content[-1]
    assert isinstance(call, ToolUseBlock) and call.name == "view" and call.input == {"path": "kernel.cu"}
    result = ToolResultBlock(tool_use_id=call.id, content="1 | __global__ void scale_add(...)")
    follow_up = request.model_copy(
        update={
            "messages": [
                *request.messages,
                Message(role="assistant", content=first.content),
                Message(role="user", content=[result]),
            ]
        }
    )
    assert llm.complete(follow_up).content == [TextBlock(text="Done.")]
    sent = server.message_bodies()[1]
    assert sent["tools"] == [{"name": "view", "description": VIEW.description, "input_schema": VIEW.input_schema}]
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "Let me read the kernel."},
        {"type": "tool_use", "id": call.id, "name": "view", "input": {"path": "kernel.cu"}},
    ]
    assert sent["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": call.id,
            "content": "1 | __global__ void scale_add(...)",
            "cache_control": {"type": "ephemeral"},
        }
    ]


def test_long_outputs_stream(server: FakeMessagesServer, make: Any) -> None:
    long_text = "".join(f"Step {i}: unroll the loop by {i % 8 + 1} and check the registers.\n" for i in range(400))
    server.push(script.text(long_text), script.tool_use("view", {"path": "a.cu", "lines": [1, 2, 3]}))
    llm = make(stream_threshold=8000).llm
    reply = llm.complete(ask(max_tokens=8000))
    assert reply.content == [TextBlock(text=long_text)]
    assert reply.stop_reason == "end_turn"
    assert reply.usage.output_tokens > 1 and reply.usage.cache_creation_input_tokens > 0
    tool = llm.complete(ask(max_tokens=9000))
    call = tool.content[0]
    assert isinstance(call, ToolUseBlock)
    assert (call.name, call.input) == ("view", {"path": "a.cu", "lines": [1, 2, 3]})
    assert [b.get("stream") for b in server.message_bodies()] == [True, True]


def test_a_rate_limit_honours_retry_after(server: FakeMessagesServer, make: Any, caplog: Any) -> None:
    server.push(script.rate_limited(retry_after=7), script.text("ok"))
    backend = make()
    with caplog.at_level(logging.WARNING):
        reply = backend.llm.complete(ask())
    assert reply.content == [TextBlock(text="ok")]
    assert backend.sleeper.pauses == [7.0]
    assert (backend.llm.stats.attempts, backend.llm.stats.retries) == (2, 1)
    assert "429 rate_limit_error" in caplog.text and "retrying in 7.00s" in caplog.text
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0"]  # the SDK did not retry


def test_overloaded_then_success_backs_off_with_jitter(server: FakeMessagesServer, make: Any) -> None:
    server.push(script.overloaded(), script.overloaded(), script.text("ok"))
    backend = make(retry_base_s=2.0)
    assert backend.llm.complete(ask()).content == [TextBlock(text="ok")]
    first, second = backend.sleeper.pauses
    assert 1.5 <= first <= 2.0 and 3.0 <= second <= 4.0  # base·2^k, up to 25% taken off
    assert backend.llm.stats.retries == 2


def test_backoff_is_capped(server: FakeMessagesServer, make: Any) -> None:
    server.push(*[script.server_error(502)] * 4, script.text("ok"))
    backend = make(max_retries=4, retry_base_s=10.0, retry_cap_s=15.0)
    assert backend.llm.complete(ask()).content == [TextBlock(text="ok")]
    assert max(backend.sleeper.pauses) <= 15.0 and len(backend.sleeper.pauses) == 4


@pytest.mark.parametrize(
    ("broken", "logged"),
    [
        (script.mid_stream_error(after_events=4), "error event in the stream: overloaded_error: Overloaded"),
        # The SDK raises the cut as its connection error or as httpx's, depending on where its reading was;
        # either is retried, and the log names the cause.
        (script.dropped_stream(after_events=5), "peer closed connection without sending complete message body"),
        (script.truncated_stream(after_events=6), "the stream ended before the message was complete"),
    ],
)
def test_a_broken_stream_is_retried_whole(
    server: FakeMessagesServer, make: Any, caplog: Any, broken: script.FakeReply, logged: str
) -> None:
    server.push(broken, script.text("the whole answer"))
    backend = make(stream_threshold=1000)
    with caplog.at_level(logging.WARNING):
        reply = backend.llm.complete(ask(max_tokens=2000))
    assert reply.content == [TextBlock(text="the whole answer")]
    assert backend.llm.stats.retries == 1 and len(server.message_bodies()) == 2
    assert logged in caplog.text


def test_a_connection_cut_before_the_answer_is_retried(server: FakeMessagesServer, make: Any, caplog: Any) -> None:
    server.push(script.dropped_stream(), script.text("ok"))
    backend = make()
    with caplog.at_level(logging.WARNING):
        assert backend.llm.complete(ask()).content == [TextBlock(text="ok")]
    assert "connection error" in caplog.text and backend.llm.stats.retries == 1


def test_giving_up_raises_llm_error(server: FakeMessagesServer, make: Any) -> None:
    server.push(*[script.overloaded()] * 3)
    backend = make(max_retries=2)
    with pytest.raises(LLMError, match=r"gave up after 3 attempts; the last: 529 overloaded_error: Overloaded"):
        backend.llm.complete(ask())
    assert len(backend.sleeper.pauses) == 2 and len(server.message_bodies()) == 3
    assert backend.llm.stats.failures == 1


def test_a_bad_request_is_not_retried(server: FakeMessagesServer, make: Any) -> None:
    server.push(script.FakeFailure(status=400, error_type="invalid_request_error", message="messages: bad order"))
    backend = make()
    with pytest.raises(LLMError, match="not retried: 400 invalid_request_error: messages: bad order"):
        backend.llm.complete(ask())
    assert backend.sleeper.pauses == [] and len(server.message_bodies()) == 1


def test_each_call_has_a_timeout(server: FakeMessagesServer, make: Any, caplog: Any) -> None:
    # A reply 60 s late against a 3 s limit: "in time" needs no more than a busy machine's seconds, and the
    # late reply's wait ends when the server stops.
    server.push(script.text("too late", delay_s=60.0), script.text("in time"))
    backend = make(timeout_s=3.0)
    with caplog.at_level(logging.WARNING):
        assert backend.llm.complete(ask()).content == [TextBlock(text="in time")]
    assert "timed out after 3s" in caplog.text
    server.push(script.text("too late", delay_s=60.0))
    with pytest.raises(LLMError, match="timed out"):
        make(timeout_s=3.0, max_retries=0).llm.complete(ask())


def test_connection_errors_are_retried_then_reported(make: Any) -> None:
    closed = FakeMessagesServer()
    closed.stop()  # its port is free again: nothing listens there
    settings = AnthropicSettings(api_key=KEY, base_url=closed.base_url, max_retries=2)
    sleeper = RecordingSleeper()
    llm = AnthropicLLM(settings, sleeper=sleeper)
    with pytest.raises(LLMError, match="gave up after 3 attempts; the last: connection error"):
        llm.complete(ask())
    llm.close()
    assert len(sleeper.pauses) == 2


def test_usage_and_cache_counters_are_mapped(server: FakeMessagesServer, make: Any) -> None:
    server.push(script.tool_use("view", {"path": "kernel.cu"}, call_id="toolu_1"), script.text("Done."))
    llm = make().llm
    first_request = ask(tools=[VIEW])
    first = llm.complete(first_request)
    second_request = first_request.model_copy(
        update={
            "messages": [
                *first_request.messages,
                Message(role="assistant", content=first.content),
                Message(role="user", content=[ToolResultBlock(tool_use_id="toolu_1", content="int main() {}")]),
            ]
        }
    )
    second = llm.complete(second_request)
    body1, body2 = server.message_bodies()
    assert first.usage == Usage(
        input_tokens=0,
        output_tokens=first.usage.output_tokens,
        cache_creation_input_tokens=request_tokens(body1),
        cache_read_input_tokens=0,
    )
    assert second.usage == Usage(
        input_tokens=0,
        output_tokens=second.usage.output_tokens,
        cache_creation_input_tokens=request_tokens(body2) - request_tokens(body1),
        cache_read_input_tokens=request_tokens(body1),
    )


def test_cache_breakpoints_are_placed_on_the_system_prefix_its_last_part_and_the_last_block(
    server: FakeMessagesServer, make: Any
) -> None:
    server.push(script.text("ok"))
    request = Request(
        model=MODEL,
        system=SYSTEM,
        tools=[VIEW],
        messages=[
            Message(role="user", content=[TextBlock(text="Start.")]),
            Message(
                role="assistant", content=[TextBlock(text="Reading."), ToolUseBlock(id="t1", name="view", input={})]
            ),
            Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="log", is_error=True)]),
        ],
        temperature=0.2,
    )
    make().llm.complete(request)
    sent = server.message_bodies()[0]
    # after the task (reused by the role's next agent, whose knowledge may differ) and after the knowledge
    mark = {"type": "ephemeral"}
    assert [part.get("cache_control") for part in sent["system"]] == [None, None, mark, mark]
    assert [part["text"] for part in sent["system"]] == SYSTEM
    marks = [(i, j) for i, m in enumerate(sent["messages"]) for j, b in enumerate(m["content"]) if "cache_control" in b]
    assert marks == [(2, 0)]
    assert sent["messages"][2]["content"][0]["is_error"] is True
    assert all("cache_control" not in tool for tool in sent["tools"])
    assert sent["temperature"] == 0.2 and sent["model"] == MODEL


def test_count_tokens_estimates_an_upper_bound_offline_or_asks_the_api(server: FakeMessagesServer, make: Any) -> None:
    request = ask(tools=[VIEW])
    offline = make().llm
    estimate = offline.count_tokens(request)
    assert estimate == estimate_tokens(to_params(request, MODEL))
    assert estimate >= request_tokens(to_params(request, MODEL)) and server.requests == []
    exact = make(exact_count=True).llm.count_tokens(request)
    assert server.requests[-1].path == "/v1/messages/count_tokens"
    assert exact == request_tokens(server.requests[-1].body)


def test_count_tokens_falls_back_to_the_estimate(server: FakeMessagesServer, caplog: Any) -> None:
    settings = AnthropicSettings(api_key="sk-wrong", base_url=server.base_url, exact_count=True)
    llm = AnthropicLLM(settings)
    with caplog.at_level(logging.WARNING):
        assert llm.count_tokens(ask()) == estimate_tokens(to_params(ask(), MODEL))
    llm.close()
    assert "authentication_error" in caplog.text


def test_the_key_stays_out_of_logs_and_exceptions(server: FakeMessagesServer, make: Any, caplog: Any) -> None:
    echoing = script.FakeFailure(status=401, error_type="authentication_error", message=f"invalid x-api-key {KEY}")
    server.push(script.rate_limited(0.5), script.text("ok"), echoing)
    backend = make()
    with caplog.at_level(logging.DEBUG):
        backend.llm.complete(ask())
        with pytest.raises(LLMError) as caught:
            backend.llm.complete(ask())
    assert "[redacted]" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    told = "".join(traceback.format_exception(caught.value))
    assert KEY not in told and KEY not in caplog.text
    assert "401 authentication_error" in caplog.text


def test_settings_keep_the_key_secret_and_read_the_environment() -> None:
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
        "EVOTEAM_ANTHROPIC_BASE_URL": "http://127.0.0.1:2",
        "EVOTEAM_MODEL": "",
    }
    settings = AnthropicSettings.from_env(env, timeout_s=30)
    assert settings.key() == KEY and settings.base_url == "http://127.0.0.1:2"
    assert settings.model == DEFAULT_MODEL and settings.timeout_s == 30
    for shown in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert KEY not in shown
    assert AnthropicSettings.from_env({"ANTHROPIC_BASE_URL": "http://x"}, api_key="explicit").key() == "explicit"
    assert AnthropicSettings.from_env({"EVOTEAM_MODEL": "claude-haiku-4-5"}).model == "claude-haiku-4-5"
    assert AnthropicSettings.from_env({}).api_key is None


def test_the_backend_needs_a_key_and_owns_the_retries() -> None:
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        AnthropicLLM(AnthropicSettings())
    client = anthropic.Anthropic(api_key=KEY, base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="max_retries=0"):
        AnthropicLLM(AnthropicSettings(api_key=KEY), client=client)
    client.close()


@pytest.mark.parametrize(
    ("failure", "fatal"),
    [
        (script.FakeFailure(status=401, error_type="authentication_error", message="invalid x-api-key"), True),
        (script.FakeFailure(status=403, error_type="permission_error", message="no access to this model"), True),
        (script.FakeFailure(status=404, error_type="not_found_error", message="model: claude-nonexistent"), True),
        (script.FakeFailure(status=400, error_type="invalid_request_error", message="messages: field required"), True),
        (
            script.FakeFailure(
                status=400, error_type="invalid_request_error", message="prompt is too long: 250000 > 200000"
            ),
            False,
        ),
        (script.FakeFailure(status=500, error_type="api_error", message="internal"), False),
    ],
)
def test_an_error_no_retry_can_fix_is_fatal_and_not_retried(
    server: FakeMessagesServer, make: Any, failure: script.FakeFailure, fatal: bool
) -> None:
    server.push(*[failure] * 8)
    with pytest.raises(LLMError) as caught:
        make().llm.complete(ask())
    assert isinstance(caught.value, FatalLLMError) is fatal, str(caught.value)
    attempts = len(server.message_bodies())
    assert attempts == (4 if failure.status == 500 else 1)  # a 4xx is never retried; a 500 until the attempts end
