"""Parses and prints an SSH target, ``[ssh://][user@]host[:port]``; imports nothing of asyncssh."""

from __future__ import annotations

import re

from pydantic import BaseModel

_TARGET = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@/:\s]+)@)?(?P<host>\[[^\]\s]+\]|[^@/:\s\[\]]+)(?::(?P<port>\d+))?/?$")


class SshTarget(BaseModel):
    """``[ssh://][user@]host[:port]`` (an IPv6 address in brackets)."""

    host: str
    user: str | None = None
    port: int = 22

    @classmethod
    def parse(cls, text: str) -> SshTarget:
        match = _TARGET.match(text.strip())
        if match is None or not (0 < int(match["port"] or 22) < 65536):
            raise ValueError(f"not an SSH target: {text!r} (expected ssh://user@host[:port])")
        return cls(host=match["host"].strip("[]"), user=match["user"], port=int(match["port"] or 22))

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{user}{host}:{self.port}"
