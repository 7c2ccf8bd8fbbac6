"""Drive ``examples/fleet_server.py`` through nginx with the official ``mcp`` Client.

``FleetClient`` wraps one SDK ``Client`` (2026-07-28, its automatic ``input_required`` loop) over
an ``httpx2.AsyncClient`` whose event hooks record every ``tools/call`` POST: which call (the
``tag`` argument), whether it resumed a call, the size of its requestState, the serving replica
(the ``x-engine-replica`` header and the result's ``_meta["engine/replica"]``), the status, and
the request and response bytes (for byte-for-byte replays).

The callbacks answer deterministically: the sampled note for ``(tag, size)`` is
:func:`note_for`, the confirmation is signed by :data:`SIGNER`, the roots are :data:`ROOTS`.

``LegacyFleetClient`` is the same client in ``mode="legacy"`` (2025-11-25: ``initialize``, an
``MCP-Session-Id``, questions sent as server→client requests on the call's event stream and
answered by POSTs of their own), with the same callbacks; its hooks record every request of the
session (initialize, calls, answers, stream resumptions) and the replica that answered it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

MODE = "2026-07-28"
SIGNER = "Ada"
ROOTS = [types.Root(uri="file:///srv/fleet/books", name="books")]
NOTE_PROMPT = re.compile(r"^Write a note of exactly (\d+) characters for (\S+)\.$")
STORE_ERROR = -32603

RESPONSES = TypeAdapter(dict[str, types.InputResponse])


def note_for(tag: str, size: int) -> str:
    """The note the sampling callback writes: ``size`` characters, different for every tag."""
    unit = f"{tag}|"
    return (unit * (size // len(unit) + 1))[:size]


def expected_receipt(tag: str, size: int) -> dict[str, Any]:
    """The parts of ``checkout``'s receipt that follow from the arguments and the answers."""
    note = note_for(tag, size).encode()
    return {
        "tag": tag,
        "note_bytes": len(note),
        "note_sha256": hashlib.sha256(note).hexdigest(),
        "roots": [str(root.uri) for root in ROOTS],
        "signed_by": SIGNER,
        "sent": True,
    }


def is_store_error(exc: MCPError) -> bool:
    """The engine's answer while its store is down: -32603, naming the store, saying retry."""
    return exc.error.code == STORE_ERROR and "store is unavailable" in exc.error.message


@dataclass
class Exchange:
    """One ``tools/call`` POST and what came back."""

    tag: str | None
    tool: str | None
    resumed: bool
    state_chars: int
    request_bytes: int
    sent_at: float
    params: dict[str, Any]
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int = 0
    header_replica: str | None = None
    meta_replica: str | None = None
    response_body: bytes = b""
    error: dict[str, Any] | None = None
    done_at: float = 0.0

    @property
    def result_type(self) -> str | None:
        if not self.response_body:
            return None
        try:
            message = json.loads(self.response_body)
        except ValueError:
            return None
        result = message.get("result") if isinstance(message, dict) else None
        return result.get("resultType") if isinstance(result, dict) else None


class Recorder:
    """The httpx2 event hooks: every ``tools/call`` exchange, grouped by the call's tag."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.by_tag: dict[str, list[Exchange]] = defaultdict(list)

    async def on_request(self, request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        body = request.content
        try:
            message = json.loads(body)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return
        params = message.get("params") or {}
        arguments = params.get("arguments") or {}
        tag = arguments.get("tag") if isinstance(arguments, dict) else None
        state = params.get("requestState")
        exchange = Exchange(
            tag=tag if isinstance(tag, str) else None,
            tool=params.get("name"),
            resumed=state is not None,
            state_chars=len(state) if isinstance(state, str) else 0,
            request_bytes=len(body),
            sent_at=time.monotonic(),
            params=params,
            request_headers=[
                (k, v)
                for k, v in request.headers.items()
                if k.lower() not in ("content-length", "host")
            ],
            request_body=body,
        )
        request.extensions["fleet_exchange"] = exchange
        self.exchanges.append(exchange)
        if exchange.tag is not None:
            self.by_tag[exchange.tag].append(exchange)

    async def on_response(self, response: httpx2.Response) -> None:
        exchange = response.request.extensions.get("fleet_exchange")
        if not isinstance(exchange, Exchange):
            return
        exchange.status = response.status_code
        exchange.header_replica = response.headers.get("x-engine-replica")
        if response.headers.get("content-type", "").startswith("application/json"):
            exchange.response_body = await response.aread()
            try:
                message = json.loads(exchange.response_body)
            except ValueError:
                message = None
            if isinstance(message, dict):
                result = message.get("result")
                if isinstance(result, dict):
                    meta = result.get("_meta") or {}
                    exchange.meta_replica = meta.get("engine/replica")
                error = message.get("error")
                exchange.error = error if isinstance(error, dict) else None
        exchange.done_at = time.monotonic()

    def last(self, tag: str) -> Exchange | None:
        rounds = self.by_tag.get(tag)
        return rounds[-1] if rounds else None

    def served_by(self, tag: str) -> list[str | None]:
        """The replica that served each round of one call, in order."""
        return [e.header_replica for e in self.by_tag.get(tag, [])]


@dataclass
class CallStats:
    """What happened to the calls a test drove."""

    completed: dict[str, types.CallToolResult] = field(default_factory=dict)
    store_errors: list[tuple[str, int, str]] = field(default_factory=list)
    other_errors: list[tuple[str, str]] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Calls started again from round one (a failed first round leaves no state to resume)."""
    resumes: int = 0


Gate = Callable[[str], Awaitable[None]]


class FleetClient:
    """The official client on one nginx URL, with recording hooks and answering callbacks."""

    def __init__(
        self,
        url: str,
        *,
        before_confirm: Gate | None = None,
        read_timeout: float = 60.0,
    ) -> None:
        self.url = url
        self.recorder = Recorder()
        self.stats = CallStats()
        self.before_confirm = before_confirm
        self.read_timeout = read_timeout
        self._client: Client | None = None

    # --- the callbacks ----------------------------------------------------------------------

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        [message] = params.messages
        assert isinstance(message.content, types.TextContent)
        match = NOTE_PROMPT.match(message.content.text)
        if match is None:
            return types.ErrorData(code=-32602, message=f"unexpected prompt {message.content!r}")
        size, tag = int(match[1]), match[2]
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=note_for(tag, size)),
            model="fleet-stub",
        )

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if params.message.startswith("Send the"):
            if self.before_confirm is not None:
                await self.before_confirm(params.message)
            return types.ElicitResult(action="accept", content={"send": True, "signed_by": SIGNER})
        if params.message.startswith("Start the"):
            return types.ElicitResult(action="accept", content={"go": True})
        return types.ErrorData(code=-32602, message=f"unexpected question {params.message!r}")

    async def roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        return types.ListRootsResult(roots=ROOTS)

    # --- lifecycle --------------------------------------------------------------------------

    mode = MODE
    connections = 64
    client_options: ClassVar[dict[str, Any]] = {"input_required_max_rounds": 200}

    def traffic(self) -> Recorder | LegacyRecorder:
        """What watches every HTTP exchange of this client."""
        return self.recorder

    @asynccontextmanager
    async def open(self) -> AsyncIterator[FleetClient]:
        watch = self.traffic()
        async with (
            httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.read_timeout, connect=5.0),
                trust_env=False,
                limits=httpx2.Limits(
                    max_connections=self.connections,
                    max_keepalive_connections=self.connections // 2,
                ),
                event_hooks={"request": [watch.on_request], "response": [watch.on_response]},
            ) as http,
            Client(
                streamable_http_client(self.url, http_client=http),
                mode=self.mode,
                read_timeout_seconds=self.read_timeout,
                elicitation_callback=self.elicit,
                sampling_callback=self.sample,
                list_roots_callback=self.roots,
                **self.client_options,
            ) as client,
        ):
            self._client = client
            try:
                yield self
            finally:
                self._client = None

    @property
    def client(self) -> Client:
        assert self._client is not None, "use `async with FleetClient(...).open()`"
        return self._client

    # --- calls ------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        retry_store_errors: bool = False,
        deadline: float = 60.0,
    ) -> types.CallToolResult:
        """Call ``tool`` and drive its rounds to the end.

        With ``retry_store_errors``, a round refused because the store is down is sent again,
        exactly as it was sent (same answers, same requestState, so a round that did run is a
        duplicate and gets its first response), until ``deadline`` seconds have passed.
        """
        tag = str(arguments["tag"])
        give_up = time.monotonic() + deadline
        responses: dict[str, types.InputResponse] | None = None
        state: str | None = None
        delay = 0.1
        while True:
            try:
                result = await self.client.call_tool(
                    tool, arguments, input_responses=responses, request_state=state
                )
            except MCPError as exc:
                if not (retry_store_errors and is_store_error(exc)):
                    self.stats.other_errors.append((tag, f"{exc.error.code}: {exc.error.message}"))
                    raise
                self.stats.store_errors.append((tag, exc.error.code, exc.error.message))
                if time.monotonic() > give_up:
                    raise
                responses, state = self._resume_point(tag)
                if state is None:
                    self.stats.restarts[tag] += 1
                else:
                    self.stats.resumes += 1
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            self.stats.completed[tag] = result
            return result

    def _resume_point(self, tag: str) -> tuple[dict[str, types.InputResponse] | None, str | None]:
        """The answers and requestState of the call's last round as sent on the wire."""
        last = self.recorder.last(tag)
        if last is None:
            return None, None
        raw = last.params.get("inputResponses")
        state = last.params.get("requestState")
        answers = RESPONSES.validate_python(raw) if isinstance(raw, dict) else None
        return answers, state if isinstance(state, str) else None

    async def checkout(
        self, tag: str, size: int, *, retry_store_errors: bool = False, deadline: float = 60.0
    ) -> types.CallToolResult:
        return await self.call(
            "checkout",
            {"tag": tag, "size": size},
            retry_store_errors=retry_store_errors,
            deadline=deadline,
        )

    async def side_effects(self, prefix: str) -> dict[str, Any]:
        result = await self.client.call_tool("side_effects", {"prefix": prefix})
        assert not result.is_error, result
        effects: dict[str, Any] = result.structured_content
        return effects


async def wait_until(predicate: Callable[[], bool], interval: float = 0.01) -> None:
    """Poll ``predicate`` (bound the wait with ``anyio.fail_after``)."""
    while True:
        if predicate():
            return
        await anyio.sleep(interval)


async def replay(url: str, exchange: Exchange) -> httpx2.Response:
    """Send one recorded POST again, byte for byte (same JSON-RPC id, same headers)."""
    async with httpx2.AsyncClient(timeout=30.0, trust_env=False) as http:
        response = await http.post(
            url, content=exchange.request_body, headers=dict(exchange.request_headers)
        )
        await response.aread()
        return response


# --- checks and numbers shared by the fleet tests -------------------------------------------------


@dataclass
class Numbers:
    """One test's line in the end-of-session summary."""

    test: str
    calls: int
    rounds: int
    replicas_hit: int
    calls_across_replicas: int
    duplicate_executions: int
    duplicates_served: int
    failures: int
    note: str = ""
    legacy: LegacyTally | None = None
    """Set by the tests of 2025-11-25 sessions; the summary's "legacy calls" row adds them up."""


REPORT: list[Numbers] = []


def duplicate_executions(effects: dict[str, Any], tags: Collection[str]) -> int:
    """Bodies that ran more than once for one call (must be 0)."""
    return sum(max(0, effects["body"].get(tag, 0) - 1) for tag in tags)


def check_receipts(fc: FleetClient, sizes: Mapping[str, int], effects: dict[str, Any]) -> None:
    """Every call completed once, with the receipt its arguments and answers call for.

    The hold in each receipt is the one once-effect the call recorded (``once=True`` ran once
    for the call, whichever replicas served its rounds), and the body ran exactly once.
    """
    completed = fc.stats.completed
    missing = set(sizes) - set(completed)
    assert not missing, f"{len(missing)} calls did not complete: {sorted(missing)[:5]}"
    for tag, size in sizes.items():
        result = completed[tag]
        assert not result.is_error, (tag, result.content)
        receipt = result.structured_content
        assert {k: receipt[k] for k in expected_receipt(tag, size)} == expected_receipt(tag, size)
        assert effects["holds"].get(receipt["hold"]) == tag, (tag, receipt["hold"])
        assert effects["body"].get(tag) == 1, (tag, effects["body"].get(tag))
        assert effects["once"].get(tag) == 1 + fc.stats.restarts.get(tag, 0), tag
        final = fc.recorder.last(tag)
        assert final is not None and final.meta_replica == receipt["replica"], tag


def replicas_of_calls(fc: FleetClient, tags: Collection[str]) -> dict[str, set[str]]:
    """The replicas each call's rounds were served by (from the x-engine-replica header)."""
    return {tag: {r for r in fc.recorder.served_by(tag) if r is not None} for tag in tags}


def served_counts(fc: FleetClient, tool: str = "checkout") -> Counter[str]:
    """Rounds of ``tool`` per serving replica."""
    return Counter(e.header_replica or "?" for e in fc.recorder.exchanges if e.tool == tool)


def note_of(counts: Counter[str]) -> str:
    return "rounds per replica: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


# --- 2025-11-25 sessions: the official client in mode="legacy" ------------------------------------

LEGACY_STOPPED = "stopped before it answered"
"""In the -32603 a legacy call ends with when the replica holding it died."""

UNEXPECTED_ERROR = "Error executing tool checkout"
"""The result of a ``checkout`` whose code raised something other than a tool error."""
STREAM_START_RACE_LOG = (
    "RuntimeError: Expected ASGI message 'http.response.start', but got 'http.response.body'."
)
"""What a replica logs when the stream-start race hits one of its calls."""

SESSION_KINDS = ("initialize", "call", "answer")
"""The requests of a session that say where it was served: initialize, calls, posted answers."""


@dataclass
class LegacyRequest:
    """One HTTP request of a 2025-11-25 session and the replica that answered it.

    ``kind``: ``initialize``, ``notification``, ``call`` (``tools/call``), ``request`` (another
    request), ``answer`` (a response to a server→client request, POSTed), ``stream`` (the
    session's own ``GET`` stream, opened or reopened), ``resume`` (``GET`` + ``Last-Event-ID`` of
    a call's event stream), ``end`` (``DELETE``).
    """

    kind: str
    session: str | None
    tag: str | None
    """The call a ``call`` starts, or the call whose question an ``answer`` answers."""
    rpc_method: str | None
    answers: str | None
    """What an ``answer`` answers, from its shape: elicitation, sampling, roots or error."""
    answer_to: str | None
    body_bytes: int
    sent_at: float
    last_event_id: str | None = None
    status: int = 0
    replica: str | None = None
    done_at: float = 0.0
    error_body: bytes = b""
    """The body of an HTTP error response (4xx, 5xx)."""


def _answer_kind(message: dict[str, Any]) -> str:
    result = message.get("result")
    if not isinstance(result, dict):
        return "error"
    if "action" in result:
        return "elicitation"
    if "roots" in result:
        return "roots"
    return "sampling" if "model" in result else "other"


class LegacyRecorder:
    """httpx2 event hooks for one legacy client: every request, its session and its replica."""

    def __init__(self, tag_of_question: Callable[[str], str | None]) -> None:
        self.tag_of_question = tag_of_question
        self.requests: list[LegacyRequest] = []

    async def on_request(self, request: httpx2.Request) -> None:
        message: Any = None
        body = request.content if request.method == "POST" else b""
        if body:
            with contextlib.suppress(ValueError):
                message = json.loads(body)
        if not isinstance(message, dict):
            message = {}
        method = message.get("method")
        tag: str | None = None
        answers = answer_to = None
        session = request.headers.get("mcp-session-id")
        last_event_id = request.headers.get("last-event-id")
        if request.method == "GET":
            # The session's own stream comes back with the id of its priming event, SESSION-0.
            own = session is not None and (last_event_id or "").startswith(f"{session}-")
            kind = "resume" if last_event_id and not own else "stream"
        elif request.method == "DELETE":
            kind = "end"
        elif method == "initialize":
            kind = "initialize"
        elif method == "tools/call":
            kind = "call"
            arguments = (message.get("params") or {}).get("arguments") or {}
            tag = arguments.get("tag") if isinstance(arguments.get("tag"), str) else None
        elif method is not None:
            kind = "request" if "id" in message else "notification"
        else:
            kind = "answer"
            answer_to = str(message.get("id"))
            tag = self.tag_of_question(answer_to)
            answers = _answer_kind(message)
        entry = LegacyRequest(
            kind=kind,
            session=session,
            tag=tag,
            rpc_method=method if isinstance(method, str) else None,
            answers=answers,
            answer_to=answer_to,
            body_bytes=len(body),
            sent_at=time.monotonic(),
            last_event_id=last_event_id,
        )
        request.extensions["legacy_request"] = entry
        self.requests.append(entry)

    async def on_response(self, response: httpx2.Response) -> None:
        entry = response.request.extensions.get("legacy_request")
        if not isinstance(entry, LegacyRequest):
            return
        entry.status = response.status_code
        entry.replica = response.headers.get("x-engine-replica")
        if entry.session is None:
            entry.session = response.headers.get("mcp-session-id")
        if response.status_code >= 400:
            entry.error_body = (await response.aread())[:2000]
        entry.done_at = time.monotonic()


class LegacyFleetClient(FleetClient):
    """The official client in ``mode="legacy"`` on one nginx URL: one 2025-11-25 session.

    ``initialize`` opens the session; each call is one POST whose event stream carries the
    questions as server→client requests, and the SDK POSTs each answer as a request of its own,
    through nginx, so to any replica. The callbacks are :class:`FleetClient`'s.
    """

    def __init__(
        self, url: str, *, before_confirm: Gate | None = None, read_timeout: float = 30.0
    ) -> None:
        super().__init__(url, before_confirm=before_confirm, read_timeout=read_timeout)
        self.current_tag: str | None = None
        self.questions: dict[str, str | None] = {}
        """Server→client request id → the call that was open when the question came."""
        self.log = LegacyRecorder(self.questions.get)
        self.errors: dict[str, MCPError] = {}
        self.ended_at: dict[str, float] = {}

    mode = "legacy"
    connections = 16
    client_options: ClassVar[dict[str, Any]] = {}

    def traffic(self) -> LegacyRecorder:
        return self.log

    # The callbacks note which call each question belongs to (its answer is POSTed later).

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        self.questions[str(context.request_id)] = self.current_tag
        return await super().sample(context, params)

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.questions[str(context.request_id)] = self.current_tag
        return await super().elicit(context, params)

    async def roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        self.questions[str(context.request_id)] = self.current_tag
        return await super().roots(context)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        retry_store_errors: bool = False,
        deadline: float = 60.0,
    ) -> types.CallToolResult:
        """One legacy call, to its end: one POST, its questions answered as they come.

        Nothing is retried here (a legacy call sent again is a new call).
        """
        tag = str(arguments["tag"])
        self.current_tag = tag
        try:
            result = await self.client.call_tool(tool, arguments)
        except MCPError as exc:
            self.errors[tag] = exc
            self.stats.other_errors.append((tag, f"{exc.error.code}: {exc.error.message}"))
            raise
        finally:
            self.current_tag = None
            self.ended_at[tag] = time.monotonic()
        self.stats.completed[tag] = result
        return result

    @property
    def session_ids(self) -> set[str]:
        return {r.session for r in self.log.requests if r.session is not None}

    def of_kind(self, *kinds: str) -> list[LegacyRequest]:
        return [r for r in self.log.requests if r.kind in kinds]

    def of_tags(self) -> list[str]:
        """The calls with a tag (``checkout``, ``slow``) this client made, in order."""
        return [r.tag for r in self.of_kind("call") if r.tag is not None]

    def call_request(self, tag: str) -> LegacyRequest:
        [request] = [r for r in self.of_kind("call") if r.tag == tag]
        return request

    def holder(self, tag: str) -> str | None:
        """The replica holding the call: the one that answered its POST (the event stream)."""
        return self.call_request(tag).replica

    def answers(self, tag: str) -> list[LegacyRequest]:
        return [r for r in self.of_kind("answer") if r.tag == tag]

    def hit_stream_start_race(self, tag: str) -> bool:
        """Whether the call ended the way the engine's stream-start race ends a call.

        The legacy response stream sets ``started`` before it has sent ``http.response.start``
        (it first registers the stream in the store). Round 1 of ``checkout`` writes two
        questions at once (sampling and roots); the second one, written meanwhile, sends a body
        first and uvicorn raises ``RuntimeError``. That question fails, so the tool fails: the
        call ends with the result "Error executing tool checkout" or, when the other writer was
        cancelled before it sent the response start, with uvicorn's own HTTP 500 (no JSON-RPC
        body, no ``x-engine-replica`` header). The replica logs :data:`STREAM_START_RACE_LOG`.
        """
        request = self.call_request(tag)
        if request.status == 500:
            return request.replica is None and request.error_body == b"Internal Server Error"
        result = self.stats.completed.get(tag)
        if result is None or not result.is_error:
            return False
        text = "".join(getattr(block, "text", "") for block in result.content)
        return text == UNEXPECTED_ERROR

    def session_replicas(self) -> set[str]:
        """Where initialize, the calls and the posted answers of this session were served."""
        return {r.replica for r in self.of_kind(*SESSION_KINDS) if r.replica is not None}


@dataclass
class LegacyTally:
    """The 2025-11-25 part of one test, for the summary's "legacy calls" row."""

    sessions: int
    calls: int
    completed: int
    ended_by_dead_replica: int
    answers: int
    answers_elsewhere: int
    """Answers POSTed to a replica other than the one holding the call (forwarded over the bus)."""
    sessions_across: int
    """Sessions whose initialize, calls and answers were served by two replicas or more."""
    seconds_to_error: list[float] = field(default_factory=list)


def legacy_tally(
    clients: Collection[LegacyFleetClient], seconds_to_error: Collection[float] = ()
) -> LegacyTally:
    answers = [(c, a) for c in clients for a in c.of_kind("answer") if a.tag is not None]
    return LegacyTally(
        sessions=sum(len(c.session_ids) for c in clients),
        calls=sum(len(c.of_tags()) for c in clients),
        completed=sum(1 for c in clients for r in c.stats.completed.values() if not r.is_error),
        ended_by_dead_replica=sum(
            1 for c in clients for e in c.errors.values() if LEGACY_STOPPED in e.error.message
        ),
        answers=len(answers),
        answers_elsewhere=sum(1 for c, a in answers if a.replica != c.holder(str(a.tag))),
        sessions_across=sum(1 for c in clients if len(c.session_replicas()) >= 2),
        seconds_to_error=sorted(seconds_to_error),
    )


def legacy_served_counts(clients: Collection[LegacyFleetClient]) -> Counter[str]:
    """Requests per serving replica: initialize, calls and answers of every session."""
    return Counter(
        r.replica for c in clients for r in c.of_kind(*SESSION_KINDS) if r.replica is not None
    )
