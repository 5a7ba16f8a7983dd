"""The hard token budget of a run: checked before every model call, charged after, kept per role and agent.

One ``TokenBudget`` is shared by every agent of a run and by the supervisor; it is thread-safe. Tokens are
counted as the provider reports them (input + output + cache write + cache read); dollars come from a
pricing table that is recorded with the run. An agent sees it through a ``RoleShare``: its role's share of
what the round started with, so that one role cannot spend what the team's shares give the others; a call
over the share is refused like one over the total (``ShareExhausted`` is a ``BudgetExhausted``).
"""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam.roles.llm import Usage


class BudgetExhausted(Exception):
    """A call would not fit in what is left; carries what was asked and what remained."""

    def __init__(self, needed: int, remaining: int, who: str) -> None:
        super().__init__(f"{who}: the call needs up to {needed} tokens but {remaining} remain in the budget")
        self.needed = needed
        self.remaining = remaining
        self.who = who


class ShareExhausted(BudgetExhausted):
    """A call would not fit in what is left of its role's share of the round."""

    def __init__(self, needed: int, remaining: int, who: str, role: str, cap: int) -> None:
        super().__init__(needed, remaining, who)
        self.args = (
            f"{who}: the call needs up to {needed} tokens but {remaining} remain of {role}'s share of this round "
            f"({cap} tokens)",
        )


class Budget(Protocol):
    """What an agent may do with the budget: ask whether a call fits, pay for it, see what is left."""

    @property
    def remaining(self) -> int: ...

    @property
    def pricing(self) -> PricingTable: ...

    def check(self, needed: int, who: str = "") -> None: ...

    def charge(self, usage: Usage, role: str, agent: str, model: str) -> None: ...


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    """Cached input tokens read back (priced below fresh input)."""


# Public list prices (USD per million tokens) for the models evoteam names; a run records the table it used.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(input=5.0, output=25.0, cache_write=6.25, cache_read=0.5),
    "claude-opus-4": Price(input=15.0, output=75.0, cache_write=18.75, cache_read=1.5),
    "claude-sonnet-4": Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3),
    "claude-haiku-4": Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1),
}


class PricesError(ValueError):
    """A price file that cannot be read (missing, not JSON or TOML, an entry without its four prices)."""


def load_prices(path: Path) -> dict[str, Price]:
    """A user's price table: a JSON or TOML file (by its suffix; JSON otherwise) that maps model names (or
    prefixes) to ``{input, output, cache_write, cache_read}`` in USD per million tokens."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PricesError(f"cannot read the price file {path}: {exc.strerror or exc}") from exc
    try:
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise PricesError(f"{path} is not {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise PricesError(f'{path} must map model names to prices, e.g. {{"my-model": {PRICE_EXAMPLE}}}')
    prices = {}
    for model, entry in raw.items():
        try:
            prices[model] = Price.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
            raise PricesError(f"{path}: the price of {model!r}: {problems} (expected {PRICE_EXAMPLE})") from exc
    return prices


PRICE_EXAMPLE = '{"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}'


class PricingTable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    @classmethod
    def with_overrides(cls, overrides: dict[str, Price]) -> PricingTable:
        """The built-in table with the user's entries added or replacing ours."""
        return cls(prices={**DEFAULT_PRICES, **overrides})

    def price(self, model: str) -> Price | None:
        """The entry whose name is the longest prefix of ``model`` (``claude-sonnet-4-5`` → ``claude-sonnet-4``)."""
        best = max((name for name in self.prices if model.startswith(name)), key=len, default=None)
        return self.prices[best] if best is not None else None

    def usd(self, model: str, usage: Usage) -> float:
        p = self.price(model)
        if p is None:
            return 0.0
        return (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_creation_input_tokens * p.cache_write
            + usage.cache_read_input_tokens * p.cache_read
        ) / 1e6


class Account(BaseModel):
    """What one (role, agent) pair has spent."""

    model_config = ConfigDict(extra="forbid")
    role: str
    agent: str
    usage: Usage = Field(default_factory=Usage)
    usd: float = 0.0
    calls: int = 0


class TokenBudget:
    def __init__(self, total: int, pricing: PricingTable | None = None) -> None:
        if total < 0:
            raise ValueError(f"a token budget cannot be negative: {total}")
        self.total = total
        self.pricing = pricing or PricingTable()
        self._lock = threading.Lock()
        self._accounts: dict[tuple[str, str], Account] = {}
        self._spent = 0

    @property
    def spent(self) -> int:
        with self._lock:
            return self._spent

    @property
    def remaining(self) -> int:
        with self._lock:
            return max(0, self.total - self._spent)

    def check(self, needed: int, who: str = "") -> None:
        """Raises ``BudgetExhausted`` unless ``needed`` tokens (input estimate + max_tokens) fit."""
        remaining = self.remaining
        if needed > remaining:
            raise BudgetExhausted(needed, remaining, who or "a model call")

    def charge(self, usage: Usage, role: str, agent: str, model: str) -> None:
        with self._lock:
            account = self._accounts.setdefault((role, agent), Account(role=role, agent=agent))
            account.usage = account.usage + usage
            account.usd += self.pricing.usd(model, usage)
            account.calls += 1
            self._spent += usage.total

    def accounts(self) -> list[Account]:
        with self._lock:
            return [a.model_copy(deep=True) for a in self._accounts.values()]

    def by_role(self) -> dict[str, Usage]:
        totals: dict[str, Usage] = {}
        for a in self.accounts():
            totals[a.role] = totals.get(a.role, Usage()) + a.usage
        return totals

    def usd(self) -> float:
        return sum(a.usd for a in self.accounts())


class RoleShare:
    """One role's share of a round: at most ``cap`` tokens, ``spent`` of them already (a resumed round's), on
    top of the run's total. Every agent of the role in the round holds the same share; it is thread-safe."""

    def __init__(self, budget: TokenBudget, role: str, cap: int, spent: int = 0) -> None:
        if cap < 0 or spent < 0:
            raise ValueError(f"a share cannot be negative: cap {cap}, spent {spent}")
        self.budget, self.role, self.cap = budget, role, cap
        self._lock = threading.Lock()
        self._spent = spent

    @property
    def spent(self) -> int:
        with self._lock:
            return self._spent

    @property
    def pricing(self) -> PricingTable:
        return self.budget.pricing

    @property
    def remaining(self) -> int:
        with self._lock:
            own = max(0, self.cap - self._spent)
        return min(own, self.budget.remaining)

    def check(self, needed: int, who: str = "") -> None:
        with self._lock:
            own = max(0, self.cap - self._spent)
        if needed > own:
            raise ShareExhausted(needed, own, who or self.role, self.role, self.cap)
        self.budget.check(needed, who)

    def charge(self, usage: Usage, role: str, agent: str, model: str) -> None:
        self.budget.charge(usage, role, agent, model)
        with self._lock:
            self._spent += usage.total


def split(pool: int, shares: dict[str, float]) -> dict[str, int]:
    """``pool`` tokens split in proportion to ``shares`` (each role's weight), rounded down."""
    if any(w <= 0 for w in shares.values()):
        raise ValueError(f"shares must be positive: {shares}")
    total = sum(shares.values())
    return {role: int(pool * w / total) for role, w in shares.items()} if total else {}


EVALUATIONS_REFUSED = "refused: no evaluations left"
"""How the result of an ``evaluate`` call over its role's share begins."""


class EvaluationShare:
    """One role's share of a round's evaluations (the run's ``evaluation_budget``): ``cap`` calls of
    ``evaluate`` at most, ``spent`` of them already (a resumed round's). Thread-safe; ``take`` is atomic."""

    def __init__(self, role: str, cap: int, spent: int = 0) -> None:
        if cap < 0 or spent < 0:
            raise ValueError(f"an evaluation share cannot be negative: cap {cap}, spent {spent}")
        self.role, self.cap = role, cap
        self._lock = threading.Lock()
        self._spent = spent

    @property
    def remaining(self) -> int:
        with self._lock:
            return max(0, self.cap - self._spent)

    def take(self) -> bool:
        """Counts one evaluation if the share has one left; whether it had."""
        with self._lock:
            if self._spent >= self.cap:
                return False
            self._spent += 1
            return True

    def give_back(self) -> None:
        """Returns one taken evaluation (the call did not evaluate: the workspace held no kernel)."""
        with self._lock:
            self._spent = max(0, self._spent - 1)

    def refusal(self) -> str:
        return (
            f"{EVALUATIONS_REFUSED} in {self.role}'s share of this round ({self.cap} evaluations of the run's "
            "evaluation budget); submit what you have or stop"
        )


def split_whole(pool: int, shares: dict[str, float]) -> dict[str, int]:
    """``pool`` whole units (evaluations) split in proportion to ``shares``, every unit given: each role gets
    its proportion rounded down, and what rounding left goes one by one to the largest remainders."""
    if any(w <= 0 for w in shares.values()):
        raise ValueError(f"shares must be positive: {shares}")
    total = sum(shares.values())
    exact = {role: pool * w / total for role, w in shares.items()}
    given = {role: int(x) for role, x in exact.items()}
    for role in sorted(exact, key=lambda r: given[r] - exact[r])[: pool - sum(given.values())]:
        given[role] += 1
    return given
