"""How runs look in the terminal: the live progress of a run, and ``evoteam show``'s tables."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from evoteam.supervisor.state import RunConfig, RunState


class Progress:
    """The live view of a run: a status panel (round, team, best speedup, tokens used / budget, the latest thing an
    agent did) that redraws in place on a terminal, above it one printed line per finished round and its decision.
    Off a terminal (a log file, a detached run) only the lines are printed."""

    def __init__(self, config: RunConfig, console: Console | None = None, live: bool | None = None) -> None:
        self.config = config
        self.console = console or Console(stderr=True, soft_wrap=True)  # a log file keeps whole lines
        self._shown = 0
        self._state: RunState | None = None
        self._activity = "starting"
        self._started = time.monotonic()
        self._lock = threading.Lock()
        on = self.console.is_terminal if live is None else live
        self._live = Live(console=self.console, refresh_per_second=4, transient=True) if on else None

    def __enter__(self) -> Progress:
        if self._live is not None:
            self._live.update(self.panel())
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def activity(self, line: str) -> None:
        with self._lock:
            self._activity = line
            self._redraw()

    def update(self, state: RunState) -> None:
        with self._lock:
            self._state = state
            for record in state.rounds_finished[self._shown :]:
                best = f"{state.best_speedup:.3f}x" if state.best_speedup is not None else "none yet"
                self.console.print(
                    f"[bold]round {record.round}/{self.config.rounds}[/] team {', '.join(record.roles)} "
                    f"({record.protocol}) · {len(record.candidates)} candidate(s) · best {best} · "
                    f"tokens {state.spent}/{self.config.budget}"
                )
                decision = next((d for d in state.decisions if d.round == record.round), None)
                if decision is not None:
                    self.console.print(f"  [dim]{decision.note()}[/]")
            self._shown = len(state.rounds_finished)
            self._redraw()

    def panel(self) -> Panel:
        state = self._state
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        current = (max(state.rounds_started) if state and state.rounds_started else 0) or 1
        grid.add_row("round", f"{current}/{self.config.rounds} · {int(time.monotonic() - self._started)} s")
        if state is not None and state.team is not None:
            order = " → " if state.team.protocol == "sequential" else " ‖ "
            grid.add_row("team", order.join(state.team.roles) + f" ({state.team.protocol})")
        best = "none yet"
        if state is not None and state.best_speedup is not None:
            best = f"{state.best_speedup:.3f}x ({state.best})"
        grid.add_row("best", best)
        spent = state.spent if state is not None else 0
        grid.add_row("tokens", f"{spent:,} / {self.config.budget:,}")
        grid.add_row("latest", self._activity)
        return Panel(grid, title=f"evoteam {self.config.run}", title_align="left")

    def _redraw(self) -> None:
        if self._live is not None:
            self._live.update(self.panel())

    def done(self, state: RunState) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        best = (
            f"{state.best} at {state.best_speedup:.3f}x over the start"
            if state.best_speedup is not None
            else "none: no improvement over the start"
        )
        self.console.print(f"[bold]run {self.config.run}[/] finished ({state.finished}): best {best}")
        if state.finished_error is not None:
            self.console.print(f"  stopped by: {escape(state.finished_error)}", highlight=False)
        if state.best is not None:
            self.console.print(
                f"  review: git log evoteam/{self.config.run}/best · accept: evoteam accept {self.config.run}"
            )


def show(state: RunState, console: Console) -> None:
    config = state.config
    assert config is not None
    best = f"{state.best_speedup:.3f}x ({state.best})" if state.best_speedup is not None else "none"
    if state.best is None and state.finished is not None:
        best = "none (no improvement over the start)"
    start = state.start
    console.print(
        f"[bold]{config.run}[/] kernel {config.kernel} · team {config.mode} · llm {config.llm} · "
        f"{len(state.rounds_finished)}/{config.rounds} rounds · {state.finished or 'running or stopped'} · "
        f"best {best} · tokens {state.spent}/{config.budget}"
        + (" · [red]sandbox not required (--unsafe-no-sandbox)[/]" if config.unsafe_no_sandbox else "")
    )
    if state.finished_error is not None:
        console.print(f"stopped by: {state.finished_error}", markup=False, highlight=False)
    if start is not None:
        console.print(
            f"start (r00-start, the incumbent): {start.status.value} · {start.speed()} over the task's baseline",
            highlight=False,
        )
    table = Table("round", "candidate", "role", "status", "vs start (95% CI)", "faster", "rationale")
    for c in sorted(state.candidates.values(), key=lambda c: (c.round, c.id)):
        r = c.record
        table.add_row(
            str(c.round),
            c.id + (" ★" if c.id == state.best else ""),
            c.role,
            (r.status.value + (" vetoed" if r.vetoed else "")) if r else "not evaluated",
            r.speed() if r else "-",
            f"{r.faster}/{r.total}" if r else "-",
            c.rationale[:60],
        )
    console.print(table)
    for decision in state.decisions:
        console.print(f"- {decision.note()}")
        for signal in decision.signals:
            console.print(f"    signal {signal.name}: {signal.summary}")
