"""``LoopAgent`` end to end over the real ``anthropic`` SDK (strict response validation, no SDK retries) and the
fake Messages server on loopback, on the scale_add task with the real evaluator: tool round trips, a retry
after 429, the budget, bad tool input, path traversal and prompt-cache placement, checked on the report, the
budget's accounts, the submissions and what the server received and answered."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from test_agent_loop import FASTER, Setup

from evoteam.gpu_bench.bench import Evaluator
from evoteam.roles.agent import LoopAgent, limits
from evoteam.roles.backends import fake_messages_script as script
from evoteam.roles.backends.anthropic_api import AnthropicLLM
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.fake_prompt_cache import request_tokens
from evoteam.roles.backends.retry import RecordingSleeper
from evoteam.roles.backends.settings import AnthropicSettings
from evoteam.roles.budget import TokenBudget
from evoteam.roles.llm import Message, Request, TextBlock, Usage

pytestmark = pytest.mark.integration

KEY = "sk-ant-test-agent-loop-0123456789"
MODEL = "claude-sonnet-4-5"  # priced in the default table, so accounts carry dollars
EPHEMERAL = {"type": "ephemeral"}
BRIEF = "Round 3. Your brief from the supervisor:\n\nmake it faster"


def opening(context: Any, max_tokens: int) -> str:
    """The agent's first message: the brief, then its limits (turns, its share of tokens, one reply's length)."""
    return f"{BRIEF}\n\n{limits(context, max_tokens)}"


class Wire:
    """What the fake server answered on ``/v1/messages``, read off the HTTP responses before the SDK parses
    them: the status and, for a 200, the message (JSON, or the usage and content rebuilt from the SSE events)."""

    def __init__(self) -> None:
        self.responses: list[tuple[int, dict[str, Any] | None]] = []

    def hook(self, response: httpx2.Response) -> None:
        if response.request.url.path != "/v1/messages":
            return
        response.read()
        if response.status_code != 200:
            self.responses.append((response.status_code, None))
        elif response.headers.get("content-type", "").startswith("text/event-stream"):
            self.responses.append((200, _from_events(response.text)))
        else:
            self.responses.append((200, response.json()))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m for status, m in self.responses if status == 200 and m is not None]

    def usages(self) -> list[Usage]:
        fields = Usage.model_fields
        return [Usage(**{k: v for k, v in m["usage"].items() if k in fields}) for m in self.messages]

    def tool_ids(self) -> list[list[str]]:
        return [[b["id"] for b in m["content"] if b["type"] == "tool_use"] for m in self.messages]


def _from_events(stream: str) -> dict[str, Any]:
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for chunk in stream.split("\n\n"):
        data = next((line[len("data: ") :] for line in chunk.splitlines() if line.startswith("data: ")), None)
        if data is None:
            continue
        event = json.loads(data)
        if event["type"] == "message_start":
            message = dict(event["message"])
        elif event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
            blocks[event["index"]]["text"] += event["delta"]["text"]
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            partial[event["index"]] = partial.get(event["index"], "") + event["delta"]["partial_json"]
        elif event["type"] == "message_delta":
            message["usage"] = {**message["usage"], **event["usage"]}
            message["stop_reason"] = event["delta"]["stop_reason"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


class SDKRun:
    """The task setup of ``test_agent_loop`` with a real-SDK ``AnthropicLLM`` and the fake server."""

    def __init__(self, setup: Setup, server: FakeMessagesServer, **settings: Any) -> None:
        self.setup = setup
        self.server = server
        self.wire = Wire()
        self.http = anthropic.DefaultHttpxClient(event_hooks={"response": [self.wire.hook]})
        self.client = anthropic.Anthropic(
            api_key=KEY,
            base_url=server.base_url,
            max_retries=0,
            http_client=self.http,
            _strict_response_validation=True,
        )
        self.settings = AnthropicSettings(
            **{"api_key": KEY, "base_url": server.base_url, "max_retries": 3, "timeout_s": 30.0, **settings}
        )
        self.sleeper = RecordingSleeper()
        self.llm = AnthropicLLM(self.settings, client=self.client, sleeper=self.sleeper, rng=random.Random(3))

    def agent(self, max_tokens: int = 1000) -> LoopAgent:
        return LoopAgent(self.llm, MODEL, max_tokens=max_tokens, on_event=self.setup.events.append)

    def bodies(self) -> list[dict[str, Any]]:
        return self.server.message_bodies()

    def close(self) -> None:
        self.llm.close()
        self.http.close()


@pytest.fixture
def server() -> Iterator[FakeMessagesServer]:
    with FakeMessagesServer(api_key=KEY) as srv:  # the documented cache rules, 1024-token minimum included
        yield srv


@pytest.fixture
def setup(tmp_path: Path, evaluator: Evaluator) -> Setup:
    return Setup(tmp_path, evaluator)


@pytest.fixture
def make(setup: Setup, server: FakeMessagesServer) -> Iterator[Any]:
    made: list[SDKRun] = []

    def factory(**settings: Any) -> SDKRun:
        made.append(SDKRun(setup, server, **settings))
        return made[-1]

    yield factory
    for run in made:
        run.close()


def results_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results of the last (user) message of a request body."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def calls_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of the assistant message just before the last message of a request body."""
    previous = body["messages"][-2]
    assert previous["role"] == "assistant"
    return [b for b in previous["content"] if b["type"] == "tool_use"]


def _plain(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reply's content blocks as the next request should carry them back in its assistant message: the same
    text and tool calls, without the ``cache_control`` that only the last message's last block gets."""
    return [
        {"type": "text", "text": b["text"]}
        if b["type"] == "text"
        else {"type": "tool_use", "id": b["id"], "name": b["name"], "input": b["input"]}
        for b in content
    ]


def tree(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file under ``root`` but outside ``skip``, with a hash of its content (links by their target)."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_symlink():
            out[path.relative_to(root).as_posix()] = "-> " + str(path.readlink())
        elif path.is_file():
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_view_write_evaluate_submit_round_trip(
    setup: Setup, server: FakeMessagesServer, make: Any, streamed: bool
) -> None:
    server.push(
        script.tool_use("view", {"path": "honest.cpp"}, say="Let me read the kernel."),
        script.tool_use("write", {"path": "honest.cpp", "content": FASTER}),
        script.tool_use("evaluate", {}),
        script.tool_use("submit_candidate", {"rationale": "restrict pointers and an add instead of a multiply"}),
        script.text("Submitted one candidate: restrict pointers."),
    )
    run = make(stream_threshold=1000 if streamed else 16_000)
    budget = TokenBudget(1_000_000)
    report = run.agent(max_tokens=1000).run(setup.context(budget))

    assert (report.stop, report.turns, report.error) == ("end_turn", 5, None)
    assert report.final_text == "Submitted one candidate: restrict pointers."
    [submission] = report.submissions
    assert setup.submissions == [submission]
    assert (submission.role, submission.agent_id) == ("Optimizer", "opt-1")
    assert re.fullmatch(r"r03-opt-1-[0-9a-f]{10}", submission.solution.name)
    assert submission.solution.sources[0].content == FASTER
    assert submission.evaluation is not None and submission.evaluation["status"] == "PASSED"
    assert (setup.workspace.root / "honest.cpp").read_text() == FASTER
    assert setup.service.calls == 1  # the submission reused the evaluation of the same content

    bodies = run.bodies()
    assert len(bodies) == 5 and len(server.requests) == 5  # no token counting, no retries
    assert [b.get("stream") for b in bodies] == [True if streamed else None] * 5
    first = bodies[0]
    assert first["model"] == MODEL and first["max_tokens"] == 1000
    assert [t["name"] for t in first["tools"]] == setup.role.tools
    assert first["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": opening(setup.context(TokenBudget(1_000_000)), 1000),
                    "cache_control": EPHEMERAL,
                }
            ],
        }
    ]
    assert all(b["system"] == first["system"] and b["tools"] == first["tools"] for b in bodies)
    assert [len(b["messages"]) for b in bodies] == [1, 3, 5, 7, 9]

    # each reply's tool call goes back to the server as it came, and the next request answers it by id
    answered = run.wire.tool_ids()
    assert answered == [["toolu_fake_0001"], ["toolu_fake_0002"], ["toolu_fake_0003"], ["toolu_fake_0004"], []]
    for turn in range(1, 5):
        sent_back = run.wire.messages[turn - 1]["content"]
        assert bodies[turn]["messages"][-2] == {"role": "assistant", "content": _plain(sent_back)}
        [call] = calls_sent(bodies[turn])
        [result] = results_sent(bodies[turn])
        assert result["tool_use_id"] == call["id"] == answered[turn - 1][0]
        assert "is_error" not in result
    viewed, wrote, evaluated, submitted = (results_sent(bodies[t])[0]["content"] for t in range(1, 5))
    assert viewed.startswith("    1\t#include <cstdint>")
    assert wrote.startswith("wrote honest.cpp (")
    assert evaluated.startswith("status: PASSED")
    assert re.match(r"submitted r03-opt-1-[0-9a-f]{10} \(1 submission", submitted), submitted
    assert calls_sent(bodies[2])[0]["input"] == {"path": "honest.cpp", "content": FASTER}

    # usage: what the server reported, call by call, is what the agent summed and the budget charged
    reported = run.wire.usages()
    assert len(reported) == 5
    total = sum(reported, Usage())
    assert report.usage == total
    assert total.cache_creation_input_tokens > 0 and total.cache_read_input_tokens > 0
    [account] = budget.accounts()
    assert (account.role, account.agent, account.calls) == ("Optimizer", "opt-1", 5)
    assert account.usage == total and budget.spent == total.total
    assert account.usd == pytest.approx(budget.pricing.usd(MODEL, total)) and account.usd > 0
    assert [e.usage for e in setup.events if e.kind == "turn"] == reported
    assert (run.llm.stats.calls, run.llm.stats.retries, run.sleeper.pauses) == (5, 0, [])


def test_a_rate_limit_is_retried_after_retry_after_and_the_loop_goes_on(
    setup: Setup, server: FakeMessagesServer, make: Any
) -> None:
    server.push(
        script.tool_use("view", {"path": "honest.cpp", "start_line": 1, "end_line": 1}),
        script.rate_limited(retry_after=4),
        script.text("Read it; nothing to change yet."),
    )
    run = make()
    budget = TokenBudget(1_000_000)
    report = run.agent().run(setup.context(budget))

    assert (report.stop, report.turns, report.error) == ("end_turn", 2, None)
    assert report.final_text == "Read it; nothing to change yet."
    assert run.sleeper.pauses == [4.0]  # the server's retry-after, obeyed as given
    assert (run.llm.stats.calls, run.llm.stats.attempts, run.llm.stats.retries) == (2, 3, 1)
    assert [status for status, _ in run.wire.responses] == [200, 429, 200]
    bodies = run.bodies()
    assert len(bodies) == 3
    assert bodies[1] == bodies[2]  # the retry is the same request again
    [result] = results_sent(bodies[2])
    assert result["tool_use_id"] == "toolu_fake_0001" and result["content"] == "    1\t#include <cstdint>"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0", "0"]  # the SDK never retried
    [account] = budget.accounts()
    assert account.calls == 2  # the refused attempt costs nothing
    assert account.usage == report.usage == sum(run.wire.usages(), Usage())
    assert [(e.kind, e.tool) for e in setup.events] == [
        ("turn", None),
        ("tool", "view"),
        ("turn", None),
        ("stop", None),
    ]


def test_a_budget_exhausted_mid_conversation_stops_before_the_next_request(
    setup: Setup, server: FakeMessagesServer, make: Any
) -> None:
    server.push(
        script.tool_use("write", {"path": "notes.txt", "content": "first step"}),
        script.text("never sent"),
    )
    run = make()
    agent = run.agent(max_tokens=1000)
    fits_one = 0
    for _ in range(3):  # the opening states the budget, so the first request's size depends on it: settle it
        context = setup.context(TokenBudget(fits_one))
        first = Request(
            model=MODEL,
            system=agent.system(context),
            messages=[Message(role="user", content=[TextBlock(text=opening(context, 1000))])],
            tools=context.toolbox.specs(),
            max_tokens=1000,
        )
        fits_one = run.llm.count_tokens(first) + 1000  # exactly what the first check asks; the second asks more
    budget = TokenBudget(fits_one)
    report = agent.run(setup.context(budget))

    assert (report.stop, report.turns) == ("budget", 1)
    assert report.error is not None and report.error.startswith("Optimizer/opt-1: the call needs up to ")
    needed = int(report.error.split("needs up to ")[1].split()[0])
    remaining = int(report.error.split(" but ")[1].split()[0])
    assert needed > fits_one and remaining == budget.remaining == fits_one - report.usage.total
    assert len(run.bodies()) == 1 and len(server.requests) == 1  # the second request never left
    assert server.message_bodies()[0]["messages"] == run.bodies()[0]["messages"]
    assert (setup.workspace.root / "notes.txt").read_text() == "first step"  # the first turn's tool still ran
    [reported] = run.wire.usages()
    [account] = budget.accounts()
    assert account.calls == 1 and account.usage == report.usage == reported
    assert budget.spent == reported.total
    stop = setup.events[-1]
    assert (stop.kind, stop.stop, stop.error, stop.usage) == ("stop", "budget", report.error, reported)
    assert server.next_item({}) == script.text("never sent")  # still queued: nobody asked for it


def test_a_budget_too_small_for_the_first_call_sends_nothing(
    setup: Setup, server: FakeMessagesServer, make: Any
) -> None:
    run = make()
    budget = TokenBudget(500)
    report = run.agent().run(setup.context(budget))
    assert (report.stop, report.turns, report.usage) == ("budget", 0, Usage())
    assert server.requests == [] and budget.accounts() == [] and budget.spent == 0


def test_malformed_tool_input_comes_back_as_an_error_result_and_the_loop_goes_on(
    setup: Setup, server: FakeMessagesServer, make: Any
) -> None:
    server.push(
        script.tool_use("view", {}),
        script.FakeReply(
            content=[
                script.FakeToolUse(name="view", input={"path": 7, "start_line": "first"}),
                script.FakeToolUse(name="write", input={"path": "x.cpp", "content": "int x;", "mode": "append"}),
            ],
            stop_reason="tool_use",
        ),
        script.tool_use("view", {"path": "honest.cpp", "start_line": 1, "end_line": 1}),
        script.text("done"),
    )
    run = make()
    budget = TokenBudget(1_000_000)
    report = run.agent().run(setup.context(budget))

    assert (report.stop, report.turns, report.error) == ("end_turn", 4, None)
    bodies = run.bodies()
    assert len(bodies) == 4
    assert calls_sent(bodies[1])[0]["input"] == {}  # sent back as the model wrote it
    [missing] = results_sent(bodies[1])
    assert missing["is_error"] is True and missing["tool_use_id"] == "toolu_fake_0001"
    assert missing["content"] == "invalid input for view: path: Field required"
    wrong_type, extra = results_sent(bodies[2])
    assert [r["tool_use_id"] for r in (wrong_type, extra)] == ["toolu_fake_0002", "toolu_fake_0003"]
    assert wrong_type["is_error"] is True and extra["is_error"] is True
    assert "path: Input should be a valid string" in wrong_type["content"]
    assert "start_line: Input should be a valid integer" in wrong_type["content"]
    assert "mode: Extra inputs are not permitted" in extra["content"]
    assert not (setup.workspace.root / "x.cpp").exists()  # an invalid call does nothing
    [good] = results_sent(bodies[3])
    assert "is_error" not in good and good["content"] == "    1\t#include <cstdint>"
    assert [e.is_error for e in setup.events if e.kind == "tool"] == [True, True, True, False]
    assert budget.accounts()[0].calls == 4 and report.usage == sum(run.wire.usages(), Usage())


def test_path_traversal_is_refused_and_nothing_outside_the_workspace_is_touched(
    setup: Setup, server: FakeMessagesServer, make: Any
) -> None:
    secret = setup.outside / "secret.txt"
    secret.write_text("TOP-SECRET outside the workspace\n")
    (setup.workspace.root / "link.txt").symlink_to(secret)
    escaped = setup.outside / "escaped.txt"
    before = tree(setup.outside, setup.workspace.root)
    workspace_before = tree(setup.workspace.root)
    attempts = [
        ("view", {"path": "../../../../etc/passwd"}, "outside the workspace"),
        ("view", {"path": "/etc/passwd"}, "is absolute"),
        ("view", {"path": "../secret.txt"}, "outside the workspace"),
        ("view", {"path": "link.txt"}, "outside the workspace"),
        ("write", {"path": "../escaped.txt", "content": "x"}, "outside the workspace"),
        ("write", {"path": str(escaped), "content": "x"}, "is absolute"),
        ("write", {"path": "link.txt", "content": "overwritten"}, "outside the workspace"),
        ("str_replace", {"path": "../secret.txt", "old": "TOP", "new": "BOTTOM"}, "outside the workspace"),
        ("list", {"path": ".."}, "outside the workspace"),
    ]
    server.push(
        script.FakeReply(
            content=[
                script.FakeText(text="Let me look around."),
                *(script.FakeToolUse(name=name, input=arguments) for name, arguments, _ in attempts),
            ],
            stop_reason="tool_use",
        ),
        script.text("I stay in the workspace."),
    )
    run = make()
    report = run.agent().run(setup.context(TokenBudget(1_000_000)))

    assert (report.stop, report.turns) == ("end_turn", 2)
    results = results_sent(run.bodies()[1])
    assert [r["tool_use_id"] for r in results] == [f"toolu_fake_{i:04d}" for i in range(1, len(attempts) + 1)]
    for result, (name, arguments, why) in zip(results, attempts, strict=True):
        assert result["is_error"] is True, (name, arguments)
        assert why in result["content"], (name, arguments, result["content"])
        assert "root:" not in result["content"] and "TOP-SECRET" not in result["content"]
    assert not escaped.exists()
    assert tree(setup.outside, setup.workspace.root) == before  # nothing outside was written
    assert tree(setup.workspace.root) == workspace_before
    assert secret.read_text() == "TOP-SECRET outside the workspace\n"
    assert setup.submissions == [] and setup.service.calls == 0


def test_cache_breakpoints_over_a_multi_turn_conversation(setup: Setup, server: FakeMessagesServer, make: Any) -> None:
    server.push(
        script.tool_use("list", {}, say="First the files."),
        script.tool_use("view", {"path": "honest.cpp"}),
        script.tool_use("read_knowledge", {}),
        script.text("I know enough to start."),
    )
    run = make()
    budget = TokenBudget(1_000_000)
    report = run.agent().run(setup.context(budget))
    assert (report.stop, report.turns) == ("end_turn", 4)

    bodies = run.bodies()
    assert len(bodies) == 4
    for body in bodies:
        assert [part.get("cache_control") for part in body["system"]] == [None, None, EPHEMERAL, EPHEMERAL]
        marks = [
            (i, j) for i, m in enumerate(body["messages"]) for j, b in enumerate(m["content"]) if "cache_control" in b
        ]
        last = len(body["messages"]) - 1
        assert marks == [(last, len(body["messages"][last]["content"]) - 1)]
        assert body["messages"][last]["content"][-1]["cache_control"] == EPHEMERAL
        assert all("cache_control" not in tool for tool in body["tools"])
    assert request_tokens({"tools": bodies[0]["tools"], "system": bodies[0]["system"]}) >= 1024  # cacheable

    reported = run.wire.usages()
    assert len(reported) == 4
    first, *later = reported
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens == request_tokens(bodies[0])
    for turn, usage in enumerate(later, start=1):
        assert usage.cache_read_input_tokens > 0
        # the whole previous request is read back; only what this turn added is written; nothing is uncached
        assert usage.cache_read_input_tokens == request_tokens(bodies[turn - 1])
        assert usage.cache_creation_input_tokens == request_tokens(bodies[turn]) - request_tokens(bodies[turn - 1])
        assert usage.input_tokens == 0
    assert report.usage == sum(reported, Usage())
    [account] = budget.accounts()
    assert account.usage == report.usage and account.calls == 4
