"""Our retry loop around one model call: exponential backoff with jitter and a cap, ``retry-after`` honoured,
every retry counted and logged, and a ``Sleeper`` seam so tests never really wait. Imports no SDK."""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.llm import FatalLLMError, LLMError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Sleeper(Protocol):
    def sleep(self, seconds: float) -> None: ...


class RealSleeper:
    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class RecordingSleeper:
    """The fake: remembers every pause and returns at once."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    attempts: int = Field(default=6, ge=1)
    """Attempts in all, the first one included."""
    base_s: float = Field(default=1.0, ge=0)
    cap_s: float = Field(default=60.0, ge=0)
    jitter: float = Field(default=0.25, ge=0, le=1)
    """Up to this fraction of each backoff delay is taken off at random, so that agents do not retry in step."""
    max_retry_after_s: float = Field(default=600.0, ge=0)
    """A server's ``retry-after`` is obeyed as given, up to this."""

    def delay(self, failed_attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after attempt number ``failed_attempt`` (1-based) failed."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        backoff = min(self.cap_s, self.base_s * 2.0 ** (failed_attempt - 1))
        return backoff * (1.0 - self.jitter * rng.random())


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as a value: what happened (safe to log), whether trying again can help, and how
    long the server asked us to wait."""

    summary: str
    retryable: bool
    retry_after: float | None = None
    fatal: bool = False
    """No call of the run can succeed either (authentication, an unknown model, a malformed request)."""


class RetryStats:
    """Counters over every call of one backend; thread-safe (agents may share a backend)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.attempts = 0
        self.retries = 0
        self.failures = 0
        """Calls that ended in ``LLMError``."""

    def record(self, attempts: int, retries: int, failed: bool) -> None:
        with self._lock:
            self.calls += 1
            self.attempts += attempts
            self.retries += retries
            self.failures += int(failed)


def call_with_retries(
    call: Callable[[], T],
    classify: Callable[[Exception], Failure | None],
    policy: RetryPolicy,
    sleeper: Sleeper,
    rng: random.Random,
    stats: RetryStats,
    what: str = "model call",
) -> T:
    """Runs ``call`` until it returns, ``classify`` says a failure is final, or the attempts are spent; then
    raises ``LLMError`` with every attempt's summary (``FatalLLMError`` when the last failure is fatal). An
    exception that ``classify`` does not know (returns ``None`` for) is a bug, not a failure of the service, and
    propagates unchanged.

    The ``LLMError`` is raised outside the ``except`` block, so it carries no link to the provider's exception
    (whose request object holds the credentials)."""
    failures: list[Failure] = []
    for attempt in range(1, policy.attempts + 1):
        try:
            value = call()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                stats.record(attempt, attempt - 1, failed=True)
                raise
        else:
            stats.record(attempt, attempt - 1, failed=False)
            return value
        failures.append(failure)
        if not failure.retryable or attempt == policy.attempts:
            break
        pause = policy.delay(attempt, failure.retry_after, rng)
        log.warning(
            "%s failed (attempt %d of %d): %s; retrying in %.2fs",
            what,
            attempt,
            policy.attempts,
            failure.summary,
            pause,
        )
        sleeper.sleep(pause)
    stats.record(len(failures), len(failures) - 1, failed=True)
    last = failures[-1]
    if not last.retryable:
        message = f"{what} failed and is not retried: {last.summary}"
    else:
        message = f"{what} gave up after {len(failures)} attempts; the last: {last.summary}"
    if len(failures) > 1:
        message += " (earlier: " + "; ".join(f.summary for f in failures[:-1]) + ")"
    log.error("%s", message)
    if last.fatal:
        raise FatalLLMError(message)
    raise LLMError(message)


def retry_after(header: Callable[[str], str | None], now: Callable[[], float] = time.time) -> float | None:
    """The server's wait from its response headers (``header(name)`` looks one up): ``retry-after-ms``, or
    ``retry-after`` in seconds or as an HTTP date; None when it gave none."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = header(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            pass
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now())
        except (TypeError, ValueError):
            pass
    return None


FATAL_STATUS = frozenset({401, 403, 404})
"""The key refused (401) or its rights (403), the model not found (404): no later call of the run can succeed."""


def is_fatal(status: int, text: str, too_long: tuple[str, ...]) -> bool:
    """Whether an HTTP error no retry (and no other call of the run) can get past: a status of
    ``FATAL_STATUS``, or a malformed request (400) other than a conversation grown past the context window
    (``text``, the provider's code and message, holds one of its ``too_long`` phrases), which ends only that
    agent's turn."""
    return status in FATAL_STATUS or (status == 400 and not any(s in text.lower() for s in too_long))
