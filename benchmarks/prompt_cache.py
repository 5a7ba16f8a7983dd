"""Prompt-cache hit rate of the ``anthropic`` backend over a 20-turn agent conversation, offline.

One agent conversation runs through ``AnthropicLLM`` (the real SDK) against the fake Messages server on
loopback, which emulates Anthropic's prompt caching (breakpoints, 20-block lookback, 5-minute entries, 1024-
token minimum). The system prompt is the size of a real one: the team's system prompt, the Optimizer's
mission, a task description with its workloads, and a knowledge store of a few dozen notes (a few thousand
tokens). Each turn the model calls one tool (view a file, compile, evaluate, edit) and gets a realistic result
(a numbered source listing, an nvcc/ptxas log, a per-workload table); the last turn answers in text.

Printed: per turn, the input tokens the server reports as plain, cache write and cache read, and the share
served from the cache, cache_read / (input + cache_write + cache_read); then the same over all turns. The goal
is at least 90% overall; the exit status is 1 below it. Run: ``python benchmarks/prompt_cache.py``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from importlib.resources import files
from string import Template
from typing import Any

import anthropic
from rich.console import Console
from rich.table import Table

from evoteam.roles.backends import fake_messages_script as script
from evoteam.roles.backends.anthropic_api import AnthropicLLM
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer
from evoteam.roles.backends.retry import RecordingSleeper
from evoteam.roles.backends.settings import AnthropicSettings
from evoteam.roles.budget import PricingTable
from evoteam.roles.llm import Block, Message, Request, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock, Usage

KEY = "sk-benchmark-local"
MODEL = "claude-sonnet-4-5"
GOAL = 0.90
TOOLS = ["view", "compile", "evaluate", "str_replace"]


def prompt(name: str, **values: str) -> str:
    return Template((files("evoteam.roles") / "prompts" / f"{name}.md").read_text()).safe_substitute(values)


def system_parts(rng: random.Random) -> list[str]:
    common = {
        "role": "Optimizer",
        "kernel": "gemm_bf16_tn",
        "tools": ", ".join([*TOOLS, "read_knowledge", "write_note", "submit_candidate"]),
        "target": "NVIDIA H100 (sm_90a)",
        "entry_file": "gemm.cu",
        "entry": "gemm_bf16_tn",
        "language": "cuda",
        "constraints": "- must contain `wgmma.mma_async` in SASS\n- no cuBLAS calls",
    }
    workloads = "\n".join(
        f"- workload {i:02d}: M={m}, N={n}, K={k}, reference {m * n * k * 2 / 1e9 / (0.02 + rng.random()):.1f} TFLOP/s"
        for i, (m, n, k) in enumerate((2**a, 2**b, 2**c) for a in (7, 10, 12) for b in (10, 12, 13) for c in (11, 12))
    )
    summary = (
        "C[M, N] = A[M, K] · B[N, K]^T in bfloat16 with float32 accumulation, row-major A and B, C written as "
        "bfloat16. Inputs are random normal; tolerances atol 1e-2, rtol 1e-2.\n\nWorkloads:\n" + workloads
    )
    notes = []
    for i in range(36):
        kind = ("hardware", "strategy", "failed attempt")[i % 3]
        tile = (64, 128, 256)[i % 3]
        stages = 2 + i % 4
        notes.append(
            f"- [{kind}] round {1 + i // 6}, candidate c{i:03d}: tile {tile}x{tile // 2}x64, {stages} pipeline "
            f"stages, {'TMA' if i % 2 else 'cp.async'} loads: geomean {0.7 + rng.random():.2f}x over "
            f"{20 + i % 7}/{18} workloads; registers {96 + 8 * (i % 9)}, spills {i % 4 * 16} bytes, smem "
            f"{tile * 64 * 2 * stages // 1024} KiB. Observation: "
            + ("bank conflicts in the epilogue store" if i % 5 == 0 else "occupancy limited by shared memory")
        )
    return [
        prompt("system", **common),
        prompt("optimizer", **common),
        prompt("task", **common, definition_summary=summary),
        prompt("knowledge", **common, knowledge="\n".join(notes)),
    ]


def tool_result(tool: str, turn: int, rng: random.Random) -> str:
    """What the tool would answer on this turn: realistic in size and shape."""
    if tool == "view":
        return "\n".join(
            f"{line:4d} | "
            + ("    " * (line % 4))
            + f"acc[{line % 8}] = __hfma2(a_frag[{line % 4}], b_frag[{line % 2}], acc);"
            for line in range(1, 90)
        )
    if tool == "compile":
        return "\n".join(
            [f"nvcc -arch=sm_90a -O3 -lineinfo gemm.cu (turn {turn})"]
            + [
                f'gemm.cu({40 + i}): warning #{177 + i}-D: variable "tmp{i}" was declared but never referenced'
                for i in range(rng.randint(3, 8))
            ]
            + [
                "ptxas info    : Compiling entry function 'gemm_bf16_tn' for 'sm_90a'",
                f"ptxas info    : Used {rng.randint(128, 168)} registers, {rng.choice((0, 16, 48))} bytes spill stores",
                f"ptxas info    : {rng.randint(96, 200)} KiB shared memory, 0 bytes cmem[2]",
            ]
        )
    if tool == "evaluate":
        rows = []
        for i in range(18):
            ours, reference = 0.05 + rng.random(), 0.06 + rng.random()
            rows.append(f"| {i:02d} | PASSED | {ours:.3f} ms | {reference:.3f} ms | {reference / ours:.2f}x |")
        return "| workload | status | latency | reference | speedup |\n|---|---|---|---|---|\n" + "\n".join(rows)
    return f"Replaced 1 occurrence in gemm.cu (lines {20 + turn}-{26 + turn}); the file has 212 lines."


def responder(turns: int) -> script.Responder:
    def answer(body: dict[str, Any]) -> script.ScriptItem:
        turn = (len(body["messages"]) + 1) // 2
        if turn >= turns:
            return script.text("Summary: TMA loads with 4 stages gave 1.31x geomean; next, a persistent schedule.")
        tool = TOOLS[turn % len(TOOLS)]
        arguments: dict[str, Any] = {"path": "gemm.cu"} if tool != "evaluate" else {"candidate": f"c{turn:03d}"}
        return script.tool_use(tool, arguments, say=f"Turn {turn}: next I {tool} to check the change.")

    return answer


def run(turns: int, seed: int) -> list[tuple[int, str, Usage]]:
    rng = random.Random(seed)
    specs = [ToolSpec(name=t, description=f"The {t} tool.", input_schema={"type": "object"}) for t in TOOLS]
    rows: list[tuple[int, str, Usage]] = []
    with FakeMessagesServer(responder(turns), api_key=KEY) as server:
        client = anthropic.Anthropic(
            api_key=KEY, base_url=server.base_url, max_retries=0, _strict_response_validation=True
        )
        settings = AnthropicSettings(api_key=KEY, base_url=server.base_url, model=MODEL)
        llm = AnthropicLLM(settings, client=client, sleeper=RecordingSleeper())
        messages = [
            Message(role="user", content=[TextBlock(text="Brief: make gemm_bf16_tn faster; start by reading it.")])
        ]
        system = system_parts(rng)
        for turn in range(1, turns + 1):
            reply = llm.complete(Request(model=MODEL, system=system, messages=messages, tools=specs, max_tokens=4096))
            calls = [b for b in reply.content if isinstance(b, ToolUseBlock)]
            rows.append((turn, calls[0].name if calls else "(answer)", reply.usage))
            if not calls:
                break
            messages.append(Message(role="assistant", content=reply.content))
            results: list[Block] = [
                ToolResultBlock(tool_use_id=c.id, content=tool_result(c.name, turn, rng)) for c in calls
            ]
            messages.append(Message(role="user", content=results))
        client.close()
    return rows


def share(usage: Usage) -> float:
    total = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    return usage.cache_read_input_tokens / total if total else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(args.turns, args.seed)
    table = Table(title=f"Prompt cache over {len(rows)} turns (fake Messages server, Anthropic's caching rules)")
    for column in ("turn", "tool called", "input", "cache write", "cache read", "read share"):
        table.add_column(column, justify="left" if column == "tool called" else "right")
    total = Usage()
    for turn, tool, usage in rows:
        total = total + usage
        table.add_row(
            str(turn), tool, f"{usage.input_tokens:,}", f"{usage.cache_creation_input_tokens:,}",
            f"{usage.cache_read_input_tokens:,}", f"{share(usage):.1%}",
        )  # fmt: skip
    table.add_section()
    table.add_row(
        "all", "", f"{total.input_tokens:,}", f"{total.cache_creation_input_tokens:,}",
        f"{total.cache_read_input_tokens:,}", f"{share(total):.1%}",
    )  # fmt: skip
    console = Console()
    console.print(table)
    met = share(total) >= GOAL
    console.print(
        f"share of input tokens served from the cache: {share(total):.1%} (goal ≥ {GOAL:.0%}: "
        f"{'met' if met else 'NOT met'}); {time.perf_counter() - started:.1f}s"
    )
    pricing = PricingTable()
    charged = pricing.usd(MODEL, total)  # what evoteam's cost figures charge: reads and writes at their own rates
    fresh = total.input_tokens + total.cache_creation_input_tokens + total.cache_read_input_tokens
    uncached = pricing.usd(MODEL, Usage(input_tokens=fresh, output_tokens=total.output_tokens))
    console.print(
        f"cost at {MODEL} list prices: ${charged:.4f} as charged (cache reads at the cache-read rate), "
        f"${uncached:.4f} were every input token fresh ({charged / uncached:.0%} of it)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
