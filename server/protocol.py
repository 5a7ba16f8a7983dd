"""The JSON-RPC protocol with no silent drops: every request gets exactly one answer.

pygls on its own logs and drops a request whose params do not fit the method's type (there is no answer for
its id) and one that arrives after ``shutdown``. Here the first is answered with InvalidParams (-32602) and the
second with InvalidRequest (-32600); everything else is pygls's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("evoteam.server")


@dataclass
class BadRequest:
    """A request whose params could not be read: answered with an error for its id."""

    id: int | str
    method: str
    reason: str
    jsonrpc: str = "2.0"


class EvoteamProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception as exc:
            msg_id = data.get("id")
            method = data.get("method")
            if isinstance(msg_id, int | str) and not isinstance(msg_id, bool) and isinstance(method, str):
                cause = exc.__cause__ or exc
                return BadRequest(msg_id, method, _first_line(cause))
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, BadRequest):
            log.warning("invalid params for %s (id %r): %s", message.method, message.id, message.reason)
            invalid = JsonRpcInvalidParams(f"invalid params for {message.method}: {message.reason}")
            self._send_response(message.id, None, invalid.to_response_error())
            return
        method = getattr(message, "method", "")
        if self._shutdown and method != lsp.EXIT and getattr(message, "id", None) is not None and method:
            refused = JsonRpcInvalidRequest(f"the server is shut down; {method} is not served")
            self._send_response(message.id, None, refused.to_response_error())
            return
        super().handle_message(message)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    detail = getattr(exc, "exceptions", None)
    if detail:  # cattrs' class validation error: name the first field that failed
        return f"{lines[0]}: {_first_line(detail[0])}"[:300]
    return lines[0][:300]
