"""The live progress view of ``evoteam evolve``: a redrawn status panel on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from evoteam.cli.runs_view import Progress
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.events import parse_event
from evoteam.supervisor.state import RunState, fold

pytestmark = pytest.mark.unit

CONFIG = RunConfig(run="k-1", kernel="k", config="/nowhere/evoteam.toml", rounds=3, budget=50_000, llm="offline")


def state(*events: tuple[str, dict[str, Any]]) -> RunState:
    started = ("run_started", {"config": CONFIG.model_dump(mode="json")})
    return fold([parse_event(k, d) for k, d in [started, *events]])


ROUND_1 = (
    ("round_started", {"round": 1, "team": {"roles": ["Profiling Scientist", "Optimizer"]}}),
    (
        "tokens",
        {
            "role": "Optimizer",
            "agent": "optimizer-1",
            "model": "m",
            "usage": {"input_tokens": 1200, "output_tokens": 34},
        },
    ),
)
FINISHED_1 = (
    ("best", {"id": "r01-optimizer-1-abc", "sha": "0" * 40, "speedup": 1.5}),
    ("round_finished", {"record": {"round": 1, "roles": ["Profiling Scientist", "Optimizer"]}}),
)


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, color_system=None), out


def test_the_panel_shows_round_team_best_tokens_and_the_latest_activity() -> None:
    console, _ = terminal()
    progress = Progress(CONFIG, console, live=True)
    progress.update(state(*ROUND_1))
    progress.activity("Optimizer (optimizer-1) evaluate: PASSED 1.500x")
    lines = _render(console, progress)
    assert "round   1/3" in lines
    assert "team    Profiling Scientist → Optimizer (sequential)" in lines
    assert "best    none yet" in lines
    assert "tokens  1,234 / 50,000" in lines
    assert "latest  Optimizer (optimizer-1) evaluate: PASSED 1.500x" in lines
    progress.update(state(*ROUND_1, *FINISHED_1))
    assert "best    1.500x (r01-optimizer-1-abc)" in _render(console, progress)


def _render(console: Console, progress: Progress) -> str:
    with console.capture() as captured:
        console.print(progress.panel())
    return captured.get()


def test_on_a_terminal_the_panel_is_redrawn_and_removed_at_the_end() -> None:
    console, out = terminal()
    with Progress(CONFIG, console, live=True) as progress:
        progress.update(state(*ROUND_1))
        progress.activity("Optimizer (optimizer-1) write: wrote k.cpp")
        progress.update(state(*ROUND_1, *FINISHED_1))
    progress.done(state(*ROUND_1, *FINISHED_1, ("run_finished", {"reason": "rounds"})))
    text = out.getvalue()
    assert "round 1/3 team Profiling Scientist, Optimizer (sequential) · 0 candidate(s) · best 1.500x" in text
    assert "tokens 1234/50000" in text
    assert "run k-1 finished (rounds): best r01-optimizer-1-abc at 1.500x" in text
    assert "\x1b[" in text  # the panel was drawn in place (cursor movements), then erased


def test_off_a_terminal_only_the_round_lines_are_printed_once_each() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with Progress(CONFIG, console) as progress:
        progress.update(state(*ROUND_1))
        progress.activity("anything")
        progress.update(state(*ROUND_1, *FINISHED_1))
        progress.update(state(*ROUND_1, *FINISHED_1))  # nothing new: nothing printed again
    text = out.getvalue()
    assert text.count("round 1/3") == 1
    assert "latest" not in text and "anything" not in text and "\x1b[" not in text
