"""Prompt caching as Anthropic documents it, emulated for the fake Messages server: prefixes (tools, then
system, then messages) end at ``cache_control`` breakpoints, are written on first sight and read while fresh.

The rules kept: at most 4 breakpoints; the prefix up to each breakpoint is stored (5 minutes, or an hour with
``ttl: "1h"``), every read refreshes it; a breakpoint also finds a stored prefix that ends at an earlier block
boundary, looking back up to 20 blocks; prefixes below a minimum length are not cached; the cache is per
model. Tokens are counted deterministically: about four characters a token over each block's JSON.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_S = {"5m": 300.0, "1h": 3600.0}


class CacheRequestError(ValueError):
    """The request breaks a caching rule (the server answers 400 ``invalid_request_error``)."""


@dataclass(frozen=True)
class CacheAccount:
    """Input tokens of one request, split the way the API reports them."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


@dataclass(frozen=True)
class _Item:
    key: str
    tokens: int
    cache_control: dict[str, Any] | None


def block_tokens(block: Any) -> int:
    """The deterministic token count of one block (tool, system part or message content block)."""
    return max(1, -(-len(_canonical(block)) // 4))


def request_tokens(body: dict[str, Any]) -> int:
    """All input tokens of a request, as ``/v1/messages/count_tokens`` reports them."""
    return sum(item.tokens for item in _items(body))


class PromptCacheEmulator:
    def __init__(self, min_tokens: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_tokens = min_tokens
        """Anthropic's minimum cacheable prompt (1024 tokens for Sonnet and Opus); shorter ones are not cached."""
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, float]] = {}  # prefix hash -> (expiry, ttl)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def account(self, body: dict[str, Any]) -> CacheAccount:
        """Splits the request's input into plain, written and read tokens, and updates the cache."""
        items = _items(body)
        n = len(items)
        seed = hashlib.sha256(str(body.get("model", "")).encode()).hexdigest()
        hashes, cum = [seed], [0]
        for item in items:
            hashes.append(hashlib.sha256((hashes[-1] + item.key).encode()).hexdigest())
            cum.append(cum[-1] + item.tokens)
        ttls = {k + 1: _ttl(item.cache_control) for k, item in enumerate(items) if item.cache_control is not None}
        automatic = body.get("cache_control")
        if isinstance(automatic, dict) and n and n not in ttls:
            ttls[n] = _ttl(automatic)  # top-level cache_control: a breakpoint on the last block
        if len(ttls) > MAX_BREAKPOINTS:
            raise CacheRequestError(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
            )
        breakpoints = sorted(ttls)
        with self._lock:
            now = self._clock()
            self._entries = {h: e for h, e in self._entries.items() if e[0] > now}
            read_end = 0
            for b in breakpoints:
                for k in range(b, max(0, b - LOOKBACK_BLOCKS), -1):
                    if hashes[k] in self._entries:
                        read_end = max(read_end, k)
                        break
            cached = [b for b in breakpoints if cum[b] >= self.min_tokens]
            write_end = max(cached, default=0)
            split = {"5m": 0, "1h": 0}
            start = read_end
            for b in cached:
                if b > start:
                    split["1h" if ttls[b] == TTL_S["1h"] else "5m"] += cum[b] - cum[start]
                    start = b
            for b in cached:
                self._entries[hashes[b]] = (now + ttls[b], ttls[b])
            if read_end:
                ttl = self._entries[hashes[read_end]][1]
                self._entries[hashes[read_end]] = (now + ttl, ttl)
        return CacheAccount(
            input_tokens=cum[n] - cum[max(read_end, write_end)],
            cache_creation_input_tokens=split["5m"] + split["1h"],
            cache_read_input_tokens=cum[read_end],
            ephemeral_5m_input_tokens=split["5m"],
            ephemeral_1h_input_tokens=split["1h"],
        )


def _ttl(cache_control: dict[str, Any]) -> float:
    return TTL_S.get(str(cache_control.get("ttl", "5m")), TTL_S["5m"])


def _canonical(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _item(where: str, block: Any) -> _Item:
    control = block.get("cache_control") if isinstance(block, dict) else None
    return _Item(
        key=f"{where}|{_canonical(block)}",
        tokens=block_tokens(block),
        cache_control=control if isinstance(control, dict) else None,
    )


def _items(body: dict[str, Any]) -> list[_Item]:
    items = [_item("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        items.append(_item("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        items.extend(_item("system", block) for block in system)
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        items.extend(_item(f"message {i} {role}", block) for block in blocks)
    return items
