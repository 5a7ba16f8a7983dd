"""The OpenAI-compatible backend over the real ``openai`` SDK (strict response validation on), against the fake
Chat Completions server on 127.0.0.1: requests as the API wants them, tool calls back, usage with cached
tokens, retries, fatal errors, a malformed answer, the key kept out of errors and logs."""

from __future__ import annotations

import json
import logging
import random
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from evoteam.roles.backends.fake_openai_server import FakeCall, FakeCompletion, FakeError, FakeOpenAIServer, call, say
from evoteam.roles.backends.openai_api import OpenAILLM, OpenAISettings, estimate_tokens, to_params
from evoteam.roles.backends.retry import RecordingSleeper
from evoteam.roles.llm import (
    FatalLLMError,
    LLMError,
    Message,
    Request,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)

pytestmark = pytest.mark.integration

KEY = "sk-test-0123456789"
MODEL = "local-model"
VIEW = ToolSpec(
    name="view",
    description="show a file",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=KEY) as fake:
        yield fake


def llm(server: FakeOpenAIServer, key: str = KEY, **settings: Any) -> OpenAILLM:
    chosen = OpenAISettings(model=MODEL, base_url=server.base_url, api_key=key, max_retries=3, **settings)
    return OpenAILLM(chosen, sleeper=RecordingSleeper(), rng=random.Random(0))


def ask(*messages: Message, tools: list[ToolSpec] | None = None) -> Request:
    first = Message(role="user", content=[TextBlock(text="make it faster")])
    return Request(
        model=MODEL, system=["You tune kernels.", "The task: scale_add."], messages=[first, *messages],
        tools=tools or [], max_tokens=512,
    )  # fmt: skip


def test_a_tool_round_trip_is_sent_and_read_as_the_api_wants(server: FakeOpenAIServer) -> None:
    server.push(call("view", {"path": "kernel.cpp"}, text="Let me look."), say("Done."))
    model = llm(server)
    first = model.complete(ask(tools=[VIEW]))
    assert first.stop_reason == "tool_use" and first.model == MODEL
    assert first.content[0] == TextBlock(text="Let me look.")
    use = first.content[1]
    assert isinstance(use, ToolUseBlock) and use.name == "view" and use.input == {"path": "kernel.cpp"}
    result = ToolResultBlock(tool_use_id=use.id, content="no such file", is_error=True)
    second = model.complete(
        ask(Message(role="assistant", content=first.content), Message(role="user", content=[result]), tools=[VIEW])
    )
    assert second.stop_reason == "end_turn" and second.content == [TextBlock(text="Done.")]
    sent = server.requests[1]
    assert sent["messages"][0] == {"role": "system", "content": "You tune kernels.\n\nThe task: scale_add."}
    assert sent["messages"][2]["tool_calls"][0]["function"] == {"name": "view", "arguments": '{"path": "kernel.cpp"}'}
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": use.id, "content": "ERROR: no such file"}
    assert sent["tools"][0] == {
        "type": "function",
        "function": {"name": "view", "description": "show a file", "parameters": VIEW.input_schema},
    }
    assert sent["max_completion_tokens"] == 512 and sent["model"] == MODEL
    assert estimate_tokens(to_params(ask(tools=[VIEW]), MODEL)) >= server.replies[0]["usage"]["prompt_tokens"]


def test_cached_prompt_tokens_are_charged_as_cache_reads(server: FakeOpenAIServer) -> None:
    long_task = "x" * 8000  # over the 1024 tokens a prompt needs before the provider caches it
    turns = [Message(role="user", content=[TextBlock(text=long_task)])]
    server.push(say("one"), say("two"))
    model = llm(server)
    first = model.complete(ask(*turns))
    assert first.usage.cache_read_input_tokens == 0
    turns += [Message(role="assistant", content=first.content), Message(role="user", content=[TextBlock(text="go")])]
    second = model.complete(ask(*turns))
    reported = server.replies[1]["usage"]
    cached = reported["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 1920 and second.usage.cache_read_input_tokens == cached  # the first request, 128-token steps
    assert second.usage.input_tokens == reported["prompt_tokens"] - cached  # not charged twice
    assert second.usage.total == reported["prompt_tokens"] + reported["completion_tokens"]


def test_a_server_that_reports_no_usage_is_charged_an_estimate(server: FakeOpenAIServer) -> None:
    server.push(say("ok").model_copy(update={"usage": False}))
    reply = llm(server).complete(ask())
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


def test_a_rate_limit_is_retried_after_the_servers_wait_and_counted(server: FakeOpenAIServer) -> None:
    server.push(FakeError(status=429, code="rate_limit_exceeded", message="slow down", retry_after=2.5), say("ok"))
    model = llm(server)
    assert model.complete(ask()).content == [TextBlock(text="ok")]
    assert isinstance(model.sleeper, RecordingSleeper) and model.sleeper.pauses == [2.5]
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("error", "fatal"),
    [
        (FakeError(status=404, code="model_not_found", message="The model `nope` does not exist"), True),
        (FakeError(status=403, code=None, message="not allowed"), True),
        (FakeError(status=400, code="invalid_request_error", message="messages[1]: missing field"), True),
        (FakeError(status=400, code="context_length_exceeded", message="maximum context length is 8192"), False),
    ],
)
def test_an_error_no_retry_can_fix_is_fatal_and_sent_once(
    server: FakeOpenAIServer, error: FakeError, fatal: bool
) -> None:
    server.push(error, say("never"))
    with pytest.raises(LLMError) as caught:
        llm(server).complete(ask())
    assert isinstance(caught.value, FatalLLMError) is fatal and str(error.status) in str(caught.value)
    assert len(server.requests) == 1


def test_a_refused_key_is_fatal_and_the_key_stays_out_of_errors_and_logs(server: FakeOpenAIServer, caplog: Any) -> None:
    wrong = "sk-wrong-9876543210"
    with caplog.at_level(logging.DEBUG), pytest.raises(FatalLLMError) as caught:
        llm(server, key=wrong).complete(ask())
    assert "401 invalid_api_key" in str(caught.value)
    told = "".join(traceback.format_exception(caught.value))
    assert wrong not in told and wrong not in caplog.text and KEY not in caplog.text
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_an_answer_without_the_apis_shape_is_an_error_not_half_read(server: FakeOpenAIServer) -> None:
    server.push({"id": "x", "object": "chat.completion", "model": MODEL, "choices": "not a list", "created": 1})
    with pytest.raises(LLMError, match="does not have the API's shape"):
        llm(server, stream=False).complete(ask())
    assert len(server.requests) == 1 and "stream" not in server.requests[0]


def test_a_streamed_reply_is_put_together_text_calls_and_usage(server: FakeOpenAIServer) -> None:
    """Streaming is the default: the text and each call's arguments arrive in 16-character pieces, the usage in
    a last chunk of its own; what is assembled is what the same answer unstreamed says."""
    long_path = "kernels/" + "deep/" * 12 + "kernel.cpp"
    calls = [FakeCall(name="view", arguments=json.dumps({"path": long_path}))]
    calls.append(FakeCall(name="view", arguments='{"path": "k.h"}'))
    answer = FakeCompletion(content="Two files to look at, the kernel and its header.", calls=calls)
    server.push(answer, answer)
    streamed = llm(server).complete(ask(tools=[VIEW]))
    plain = llm(server, stream=False).complete(ask(tools=[VIEW]))
    sent = server.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert streamed.stop_reason == plain.stop_reason == "tool_use" and streamed.model == MODEL
    assert streamed.content[0] == TextBlock(text="Two files to look at, the kernel and its header.")
    first, second = streamed.content[1:]
    assert isinstance(first, ToolUseBlock) and first.input == {"path": long_path} and first.name == "view"
    assert isinstance(second, ToolUseBlock) and second.input == {"path": "k.h"} and first.id != second.id
    [(p1, c1), (p2, c2)] = [(r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]) for r in server.replies]
    assert streamed.usage.total == p1 + c1 and plain.usage.total == p2 + c2 and c1 == c2


def test_a_dropped_stream_is_retried_and_counted(server: FakeOpenAIServer) -> None:
    server.push(say("cut off halfway through").model_copy(update={"break_after": 2}), say("whole"))
    model = llm(server)
    reply = model.complete(ask())
    assert reply.content == [TextBlock(text="whole")] and len(server.requests) == 2
    assert model.stats.retries == 1


def test_arguments_that_are_not_a_json_object_reach_the_tool_as_they_were(server: FakeOpenAIServer) -> None:
    server.push(call("view", "{path: kernel.cpp"))
    reply = llm(server).complete(ask(tools=[VIEW]))
    use = reply.content[0]
    assert isinstance(use, ToolUseBlock) and use.input == {"arguments_not_a_json_object": "{path: kernel.cpp"}


def test_settings_read_the_environment_and_keep_the_key_secret() -> None:
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "EVOTEAM_OPENAI_MODEL": "qwen"}
    settings = OpenAISettings.from_env(env)
    assert settings.model == "qwen" and settings.base_url == "http://127.0.0.1:1/v1" and settings.key() == KEY
    assert KEY not in repr(settings) and KEY not in settings.model_dump_json()
    assert OpenAISettings.from_env(env, model="mine").model == "mine"
    assert OpenAISettings.from_env({}).model == "gpt-5" and OpenAISettings.from_env({}).key() is None
    assert OpenAISettings.from_env({}).stream and not OpenAISettings.from_env({"EVOTEAM_OPENAI_STREAM": "0"}).stream
    with pytest.raises(ValueError, match="needs an API key"):
        OpenAILLM(OpenAISettings())
