"""JSON-RPC 2.0 framing: parsing one message, and building responses as bytes.

Responses are built as bytes once, so a cached result can be replayed byte for byte under a new
request id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json

from engine._internal.json_bytes import dumps as dumps
from engine.errors import INVALID_REQUEST, PARSE_ERROR, MCPError

RequestId = str | int

STRAY_RESPONSE = (
    "Invalid Request: this is a response (result or error, no method), and no request of this "
    "server waits for it: responses answer a server's request in a 2025-11-25 session (send "
    "them with its MCP-Session-Id); on 2026-07-28 answers travel in the retried call's "
    "inputResponses"
)
_ID_TYPES = (str, int)


def loads(data: bytes | str) -> Any:
    try:
        return from_json(data, cache_strings="keys")  # values (tokens, ids) rarely repeat
    except ValueError as exc:  # its reason says where: "number out of range at line 1 column 9"
        raise MCPError(PARSE_ERROR, f"Parse error: the body is not valid JSON ({exc})") from None


@dataclass(slots=True)
class Message:
    """One parsed client message: a request (with ``id``) or a notification."""

    method: str
    params: Any
    id: RequestId | None
    is_request: bool


def is_response(raw: dict[str, Any]) -> bool:
    """A client's answer to a request of the server's: no method, a result or an error."""
    return "method" not in raw and ("result" in raw or "error" in raw)


def parse(raw: Any) -> Message:
    """Check the JSON-RPC shape; :class:`MCPError` ``-32600`` with a reason when it is wrong."""
    if isinstance(raw, list):
        raise MCPError(
            INVALID_REQUEST,
            "Invalid Request: batches are not supported; send one JSON-RPC message per request",
        )
    if not isinstance(raw, dict):
        raise MCPError(INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
    if raw.get("jsonrpc") != "2.0":
        raise MCPError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    method = raw.get("method")
    if method is None and is_response(raw):
        raise MCPError(INVALID_REQUEST, STRAY_RESPONSE)
    if not isinstance(method, str) or not method:
        raise MCPError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string')
    has_id = "id" in raw
    request_id = raw.get("id")
    if has_id and (isinstance(request_id, bool) or not isinstance(request_id, _ID_TYPES)):
        raise MCPError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    return Message(method, raw.get("params"), request_id, has_id)


def request_id_of(raw: Any) -> RequestId | None:
    """The id of a message, if it has a usable one (for echoing it in an error). A response's
    is the id of a request of the server's: an error echoing it could pass for the answer to
    the client's own request of that id, so it has none."""
    if isinstance(raw, dict) and not is_response(raw):
        value = raw.get("id")
        if isinstance(value, _ID_TYPES) and not isinstance(value, bool):
            return value
    return None


def result_bytes(request_id: RequestId | None, result: bytes) -> bytes:
    """A response around an already-serialised result."""
    rid = b"%d" % request_id if type(request_id) is int else dumps(request_id)
    return b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + result + b"}"


def error_bytes(request_id: RequestId | None, error: MCPError) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_error()})


def notification_bytes(method: str, params: dict[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)
