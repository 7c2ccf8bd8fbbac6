"""A JSON-RPC session with one Streamable HTTP endpoint, on httpx.

Each request carries what 2026-07-28 wants with it: the protocol version, client capabilities
and client info in ``_meta``, and the ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and
``Mcp-Param-*`` headers. The response is read from a JSON body or an event stream (one parser,
httpx-sse's, for both the answers and the refusals); anything that keeps the exchange from going
on is a :class:`ProtocolFailure` that says what to try.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from engine.questions.kinds import declared_capabilities

if TYPE_CHECKING:
    import httpx

PROTOCOL = "2026-07-28"


def client_capabilities() -> dict[str, Any]:
    """What this client declares: every kind of question (each kind says how it is answered
    at the terminal), and tasks."""
    return {**declared_capabilities(), "extensions": {"io.modelcontextprotocol/tasks": {}}}


class ProtocolFailure(Exception):
    """The exchange cannot go on; the message says why and what to try."""


Notify = Callable[[str, dict[str, Any]], None]
"""Called with each notification (method, params) that arrives before a request's response."""


def request_meta(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``_meta`` every 2026-07-28 request carries, plus ``extra`` (``progressToken``...)."""
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": client_capabilities(),
        "io.modelcontextprotocol/clientInfo": {"name": "engine-call", "version": "1"},
        **(extra or {}),
    }


def header_text(value: str) -> str:
    """A header value as the protocol wants it: plain when it can be, else ``=?base64?...?=``."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


class Session:
    """JSON-RPC requests to one Streamable HTTP endpoint, with the 2026-07-28 headers, over one
    httpx client (its connections are kept between the rounds of a call)."""

    def __init__(self, url: str, timeout: float, token: str | None = None) -> None:
        import httpx  # imported here: a command that talks to no URL does not load it

        self.url = url
        self.token = token
        """The bearer token every request carries (``--token``, ``ENGINE_TOKEN``)."""
        self.ids = itertools.count(1)
        self.replica = "?"
        self.where = url
        self.notify: Notify | None = None
        # The timeout bounds each step (connecting, each read): a tool that streams progress
        # for longer than it is still followed.
        self.client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def request(
        self,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        import httpx

        request_id = next(self.ids)
        params = {**params, "_meta": request_meta(meta)}
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
            **(headers or {}),
        }
        name = params.get("name", params.get("uri", params.get("taskId")))
        if isinstance(name, str):
            sent["Mcp-Name"] = header_text(name)
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        try:
            with self.client.stream("POST", self.url, content=body, headers=sent) as response:
                message = self._answer(response, request_id)
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise ProtocolFailure(
                f"cannot reach {self.url} ({reason}); is the server running? Start one with "
                "`python -m engine serve FILE.py`"
            ) from None
        if message is None:
            raise ProtocolFailure(f"{self.url} did not answer with a JSON-RPC response")
        return result_of(method, message, self)

    def _answer(self, response: httpx.Response, request_id: int) -> dict[str, Any] | None:
        """The response to ``request_id``, read from a JSON body or an event stream (whose
        notifications go to ``notify`` as they come); a refusal is a ProtocolFailure."""
        self.replica = response.headers.get("x-engine-replica", "?")
        status = response.status_code
        if status in (401, 403) and response.headers.get("www-authenticate"):
            raise ProtocolFailure(self._refused(status, response.read()))
        if "text/event-stream" in response.headers.get("content-type", ""):
            message, text = read_events(response, request_id, self.notify), ""
        else:
            raw = response.read()
            message, text = json_object(raw), raw.decode(errors="replace").strip()[:200]
        if message is None and not response.is_success:
            raise ProtocolFailure(
                f"HTTP {status} from {self.url}: {text or response.reason_phrase}; is this the "
                "MCP endpoint (usually ending in /mcp)?"
            )
        return message

    def _refused(self, status: int, raw: bytes) -> str:
        """What a 401 or 403 said, and what to do about it."""
        said = json_object(raw) or {}
        error = str(said.get("error_description") or "")
        if status == 401 and self.token is None:
            hint = "pass an access token with --token TOKEN or ENGINE_TOKEN"
        elif status == 401:
            hint = "the token was refused: get a new one and pass it with --token or ENGINE_TOKEN"
        else:
            hint = "get a token with the scopes named and pass it with --token or ENGINE_TOKEN"
        return f"HTTP {status} from {self.url}: {error or 'unauthorized'}; {hint}"


def result_of(method: str, message: Mapping[str, Any], session: Any) -> dict[str, Any]:
    """A JSON-RPC response's result object, or the ProtocolFailure its error says."""
    error = message.get("error")
    if isinstance(error, dict):
        data = f" {json.dumps(error['data'])}" if error.get("data") is not None else ""
        raise ProtocolFailure(f"{method} failed: {error.get('code')} {error.get('message')}{data}")
    result = message.get("result")
    if not isinstance(result, dict):
        raise ProtocolFailure(f"{method}: the response has no result object")
    meta = result.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("engine/replica"), str):
        session.replica = meta["engine/replica"]
    return result


def read_events(
    response: httpx.Response, request_id: int, notify: Notify | None
) -> dict[str, Any] | None:
    """Read an event stream as it comes: notifications go to ``notify`` (so progress shows while
    the tool runs), and the response with ``request_id`` ends it; ``None`` if it never came."""
    from httpx_sse import EventSource

    for event in EventSource(response).iter_sse():
        message = json_object(event.data.encode())
        if message is None:
            continue
        if message.get("id") == request_id and ("result" in message or "error" in message):
            return message
        if "id" not in message and isinstance(message.get("method"), str) and notify:
            params = message.get("params")
            notify(message["method"], params if isinstance(params, dict) else {})
    return None


def json_object(raw: bytes) -> dict[str, Any] | None:
    """``raw`` as a JSON object, or ``None`` when it is not one."""
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def param_headers(tool: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-*`` headers for the arguments the tool's schema marks with ``x-mcp-header``."""
    headers: dict[str, str] = {}
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    for name, prop in props.items():
        header = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        value = arguments.get(name)
        if not isinstance(header, str) or value is None or isinstance(value, dict | list):
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        headers[f"Mcp-Param-{header}"] = header_text(text)
    return headers
