"""How runs look in the terminal: the live progress line per round, and ``evoteam show``'s tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from evoteam.supervisor.state import RunConfig, RunState


class Progress:
    """Prints one line per finished round: round, team, best speedup, tokens used / budget."""

    def __init__(self, config: RunConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console(stderr=True)
        self._shown = 0

    def update(self, state: RunState) -> None:
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

    def done(self, state: RunState) -> None:
        best = (
            f"{state.best} at {state.best_speedup:.3f}x" if state.best_speedup is not None else "no passing candidate"
        )
        self.console.print(f"[bold]run {self.config.run}[/] finished ({state.finished}): best {best}")
        if state.best is not None:
            self.console.print(
                f"  review: git log evoteam/{self.config.run}/best · accept: evoteam accept {self.config.run}"
            )


def show(state: RunState, console: Console) -> None:
    config = state.config
    assert config is not None
    best = f"{state.best_speedup:.3f}x ({state.best})" if state.best_speedup is not None else "none"
    console.print(
        f"[bold]{config.run}[/] kernel {config.kernel} · team {config.mode} · llm {config.llm} · "
        f"{len(state.rounds_finished)}/{config.rounds} rounds · {state.finished or 'running or stopped'} · "
        f"best {best} · tokens {state.spent}/{config.budget}"
    )
    table = Table("round", "candidate", "role", "status", "speedup", "faster", "rationale")
    for c in sorted(state.candidates.values(), key=lambda c: (c.round, c.id)):
        r = c.record
        table.add_row(
            str(c.round),
            c.id,
            c.role,
            (r.status.value + (" vetoed" if r.vetoed else "")) if r else "not evaluated",
            f"{r.geomean_speedup:.3f}x" if r and r.geomean_speedup is not None else "-",
            f"{r.faster}/{r.total}" if r else "-",
            c.rationale[:60],
        )
    console.print(table)
    for decision in state.decisions:
        console.print(f"- {decision.note()}")
        for signal in decision.signals:
            console.print(f"    signal {signal.name}: {signal.summary}")
