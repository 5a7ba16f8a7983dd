"""The JSON-RPC protocol with no silent drops: every request gets exactly one answer, whatever arrives.

pygls on its own drops, with a log line and no answer, a request whose params do not fit the method's type, one
that arrives after ``shutdown``, one whose ``id`` is not an integer or a string, a body that is not JSON and a
JSON value that is not a message; and it structures every nested object that happens to carry a ``jsonrpc`` key
as if it were a message. Here a whole message is read once, at the top, and:

- a body that is not JSON → ParseError (-32700) with id null (``parse_error``, called by the server's error hook);
- not a message object, a bad ``jsonrpc``/``method``, an ``id`` of the wrong type → InvalidRequest (-32600), with
  the request's id when it has a usable one, else null;
- params that do not fit the method → InvalidParams (-32602) for a request; a notification is logged and dropped;
- a request before ``initialize`` → ServerNotInitialized (-32002); a second ``initialize``, any request after
  ``shutdown`` and a notification method sent with an id → InvalidRequest; a second ``initialized`` is dropped;
- a response from the client that cannot be read fails the server's own pending request instead of leaving it;
  one that answers no request of the server (an id it never sent, or one of the client's own requests) is dropped.

Everything else is pygls's. This module imports no evoteam code.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("evoteam.server")

MsgId = int | str


class EvoteamProtocol(LanguageServerProtocol):
    _initialize_seen = False
    _initialized_seen = False

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls's JSON object hook, called for every object of a body, innermost first: objects stay plain here
        and ``handle_message`` reads the whole message once."""
        return data

    def handle_message(self, message: Any) -> None:
        try:
            self._handle(message)
        except Exception:  # never out into the reader loop: that would drop the message without an answer
            log.exception("cannot handle message %.200r", message)
            msg_id = message.get("id") if isinstance(message, dict) else getattr(message, "id", None)
            if _usable_id(msg_id) and isinstance(message, dict) and "method" in message:
                self._error(msg_id, JsonRpcInternalError("internal error while reading the request"))

    def parse_error(self, error: BaseException) -> None:
        """A body the reader could not parse as JSON: ParseError for id null (its id cannot be known)."""
        log.warning("unreadable message body: %s", _first_line(error))
        self._error(None, JsonRpcParseError(f"the message body is not JSON: {_first_line(error)}"))

    # -- reading one message ---------------------------------------------------------------------------------
    def _handle(self, data: Any) -> None:
        if not isinstance(data, dict):
            self._invalid(None, f"a message is a JSON object, not {type(data).__name__}")
            return
        msg_id = data.get("id")
        if "method" not in data:
            self._response(data, msg_id)
            return
        method = data["method"]
        request = "id" in data
        known = msg_id if _usable_id(msg_id) else None
        if data.get("jsonrpc") != self.VERSION:
            self._invalid(known, f'"jsonrpc" must be "2.0", not {data.get("jsonrpc")!r}')
        elif not isinstance(method, str):
            self._invalid(known, f'"method" must be a string, not {type(method).__name__}')
        elif request and known is None:
            self._invalid(None, f"the id of {method} must be an integer or a string, not {msg_id!r}")
        elif not isinstance(data.get("params", {}), dict | list | None):
            self._bad_params(known, method, "params must be an object or an array")
        elif request and known is not None:
            self._request({"params": None, **data}, known, method)  # JSON-RPC: params may be left out
        else:
            self._notification({"params": None, **data}, method)

    def _request(self, data: dict[str, Any], msg_id: MsgId, method: str) -> None:
        if self._shutdown and method != lsp.EXIT:
            self._error(msg_id, JsonRpcInvalidRequest(f"the server is shut down; {method} is not served"))
            return
        if method == lsp.INITIALIZE and self._initialize_seen:
            self._error(msg_id, JsonRpcInvalidRequest("the server is already initialized"))
            return
        if method != lsp.INITIALIZE and not self._initialize_seen:
            self._error(msg_id, JsonRpcServerNotInitialized(f"{method} before initialize"))
            return
        if self._kind(method) == "notification":  # it would run and never be answered
            self._invalid(msg_id, f"{method} is a notification: it is sent without an id")
            return
        try:
            message = super().structure_message(data)
        except Exception as exc:
            self._bad_params(msg_id, method, _first_line(exc.__cause__ or exc))
            return
        if method == lsp.INITIALIZE:
            self._initialize_seen = True
        super().handle_message(message)

    def _notification(self, data: dict[str, Any], method: str) -> None:
        if method != lsp.EXIT and (self._shutdown or not self._initialize_seen):
            log.warning("dropped %s: %s", method, "after shutdown" if self._shutdown else "before initialize")
            return
        if method == lsp.INITIALIZED:
            if self._initialized_seen:
                log.warning("dropped a second %s", method)
                return
            self._initialized_seen = True
        if self._kind(method) == "request":
            self._bad_params(None, method, f"{method} is a request: it needs an id")
            return
        if method == lsp.CANCEL_REQUEST and not (
            isinstance(data["params"], dict) and _usable_id(data["params"].get("id"))
        ):
            self._bad_params(None, method, "params.id must be an integer or a string")
            return
        try:
            message = super().structure_message(data)
        except Exception as exc:  # a notification has no answer: say it in the log (and the client's)
            self._bad_params(None, method, _first_line(exc.__cause__ or exc))
            return
        super().handle_message(message)

    def _response(self, data: dict[str, Any], msg_id: Any) -> None:
        """The client's answer to one of the server's requests (or something that is neither)."""
        if "id" not in data or not ("result" in data or "error" in data):
            self._invalid(msg_id if _usable_id(msg_id) else None, "neither a request, a notification nor a response")
            return
        if not (_usable_id(msg_id) and msg_id in self._result_types):  # the ids of the server's pending requests
            # pygls keeps the client's requests in progress among its own: it would answer one with the value of a
            # response carrying its id (and drop the handler's answer), and fail on an id that is a list or object
            log.warning("dropped a response to no request of the server (id %.200r)", msg_id)
            return
        try:
            message = super().structure_message(data)
        except Exception as exc:
            reason = f"malformed response from the client: {_first_line(exc.__cause__ or exc)}"
            log.warning("%s (id %r)", reason, msg_id)
            if _usable_id(msg_id) and msg_id in self._request_futures:
                self._handle_response(msg_id, None, lsp.ResponseError(code=JsonRpcInvalidRequest.CODE, message=reason))
            return
        super().handle_message(message)

    def _kind(self, method: str) -> str | None:
        """Whether an LSP method is a "request" or a "notification" (None: not an LSP method)."""
        message_type = self.get_message_type(method)
        if message_type is None or not attrs.has(message_type):
            return None
        return "request" if "id" in attrs.fields_dict(message_type) else "notification"

    # -- answers -----------------------------------------------------------------------------------------------
    def _bad_params(self, msg_id: MsgId | None, method: str, reason: str) -> None:
        log.warning("invalid params for %s (id %r): %s", method, msg_id, reason)
        if msg_id is not None:
            self._error(msg_id, JsonRpcInvalidParams(f"invalid params for {method}: {reason}"))
        elif self.writer is not None:
            text = f"evoteam: ignored {method}: invalid params: {reason}"
            self.notify(lsp.WINDOW_LOG_MESSAGE, lsp.LogMessageParams(type=lsp.MessageType.Warning, message=text))

    def _invalid(self, msg_id: MsgId | None, reason: str) -> None:
        log.warning("invalid request (id %r): %s", msg_id, reason)
        self._error(msg_id, JsonRpcInvalidRequest(f"invalid request: {reason}"))

    def _error(self, msg_id: MsgId | None, error: JsonRpcException) -> None:
        if msg_id is not None:
            self._send_response(msg_id, None, error.to_response_error())
            return
        # lsprotocol leaves a None id out of the message; JSON-RPC wants "id": null
        answer = {"jsonrpc": self.VERSION, "id": None, "error": {"code": error.code, "message": error.message}}
        self._send_data(answer)


def _usable_id(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    detail = getattr(exc, "exceptions", None)
    if detail:  # cattrs' class validation error: name the first field that failed
        return f"{lines[0]}: {_first_line(detail[0])}"[:300]
    return lines[0][:300]
