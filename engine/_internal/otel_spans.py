"""The engine's spans as OpenTelemetry records them: a request, its round, the round's store
operations.

The only module of the engine that imports OpenTelemetry, and only once a server traces (see
:mod:`engine._internal.tracing`). One call is one trace, whichever replicas serve its rounds:
round 1's request span is the root (or the child of the client's ``traceparent``), and its
trace id, its span id and the span id of the round just served travel sealed in the next
requestState (:meth:`RoundSpan.carried`). A later round's request span is a child of round 1's
request span, its round span links to the previous round's, and a ``traceparent`` the client
sent with it becomes a link too.

Nothing a client sent as data reaches a span: no argument, answer, requestState or token, no
resource URI (a template's parameters are arguments), and no exception message (one may quote
any of them): an error is its type, its frames and a JSON-RPC code. The frames are file, line
and function, without the source text of the line (a line may quote a value, and reading
source files is no work for a request). What a client names (the method, the tool or prompt,
the request id, the protocol version) is cut to :data:`SPAN_TEXT_LIMIT` characters.
"""

from __future__ import annotations

import traceback
from collections.abc import Collection, Mapping, Sequence
from importlib import metadata
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from engine._internal.trace_field import carried_fields, carry

INSTRUMENTATION = "mcp-engine"
MAX_LINKS = 128
"""Links on a journal batch's span at most: the SDK's default limit (it drops the rest)."""
SPAN_TEXT_LIMIT = 256
"""Characters at most of a text a client chose (a request id, a method, a tool's name) in a
span's name or attributes; a longer one is cut and ends in ``...``."""
PREVIOUS_ROUND = {"engine.link": "previous round"}
INCOMING = {"engine.link": "request parent"}


def carried_context(data: bytes) -> tuple[SpanContext, SpanContext | None] | None:
    """The parent of a later round's request span and the previous round's span, from a
    requestState's trace field; ``None`` for a field this version cannot read."""
    fields = carried_fields(data)
    if fields is None:
        return None
    trace_id, root_id, previous_id, flags = fields
    sampled = TraceFlags(flags)
    parent = SpanContext(trace_id, root_id, is_remote=True, trace_flags=sampled)
    previous = None
    if previous_id:
        previous = SpanContext(trace_id, previous_id, is_remote=True, trace_flags=sampled)
    return parent, previous


def bounded(text: str) -> str:
    """``text`` cut to :data:`SPAN_TEXT_LIMIT` characters."""
    if len(text) <= SPAN_TEXT_LIMIT:
        return text
    return text[: SPAN_TEXT_LIMIT - 3] + "..."


def record_error(span: Span, error: BaseException) -> None:
    """An error on a span, without its message: status ERROR, ``error.type``, and the
    ``exception`` event with the type and the frames it went through.

    The event is added as the semantic conventions describe it, not with ``record_exception``:
    that one formats the message and the source lines, which are left out here.
    """
    code = getattr(error, "code", None)
    kind = str(code) if isinstance(code, int) else type(error).__qualname__
    span.set_attribute("error.type", kind)
    span.add_event(
        "exception",
        {
            "exception.type": exception_type(error),
            "exception.message": type(error).__qualname__,
            "exception.stacktrace": stacktrace(error),
        },
    )
    span.set_status(Status(StatusCode.ERROR, kind))


def exception_type(error: BaseException) -> str:
    """``module.QualName`` of an exception's class (only ``QualName`` for a built-in one)."""
    kind = type(error)
    if kind.__module__ in ("builtins", ""):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def stacktrace(error: BaseException) -> str:
    """A traceback of ``error`` as Python prints one, without the source lines and without the
    message: the file, line and function of each frame, then the exception's type."""
    frames = [
        f'  File "{frame.f_code.co_filename}", line {line}, in {frame.f_code.co_name}\n'
        for frame, line in traceback.walk_tb(error.__traceback__)
    ]
    return "Traceback (most recent call last):\n" + "".join(frames) + exception_type(error)


def _engine_version() -> str | None:
    """The installed engine's version, the instrumentation scope's (``engine.__version__``
    would import the whole engine from its lowest layer)."""
    try:
        return metadata.version(INSTRUMENTATION)
    except metadata.PackageNotFoundError:
        return None


class Spans:
    """Makes one server's spans with the tracer of ``provider`` (``None``: the global one)."""

    __slots__ = ("replica_id", "tracer")

    def __init__(self, provider: Any, replica_id: str) -> None:
        version = _engine_version()
        if provider is None:
            self.tracer = trace.get_tracer(INSTRUMENTATION, version)
        else:
            self.tracer = provider.get_tracer(INSTRUMENTATION, version)
        self.replica_id = replica_id

    def request(
        self,
        method: str,
        target: Any,
        request_id: Any,
        version: str | None,
        headers: Mapping[str, str] | None,
        meta: Mapping[str, Any] | None,
    ) -> RequestSpan:
        return RequestSpan(self, method, target, request_id, version, headers, meta)

    def store_operation(self, operation: str, seconds: float, links: Sequence[Any] = ()) -> None:
        """A span for a store operation that has just ended: under the current round, or, given
        ``links`` (a write batched across calls), linking the rounds it wrote for."""
        if not links and not trace.get_current_span().is_recording():
            return  # no round of ours is being recorded here
        end = time_ns()
        span = self.tracer.start_span(
            f"store {operation}",
            kind=SpanKind.CLIENT,
            attributes={"engine.store.operation": operation},
            links=[Link(context) for context in links[:MAX_LINKS]],
            start_time=end - int(seconds * 1e9),
        )
        if links:  # a trace of its own: say where it ran
            span.set_attribute("engine.store.batch", len(links))
            span.set_attribute("engine.replica", self.replica_id)
        span.end(end_time=end)

    def current_link(self) -> SpanContext | None:
        context = trace.get_current_span().get_span_context()
        return context if context.is_valid and context.trace_flags.sampled else None


class RequestSpan:
    """One MCP request's span; see :class:`~engine._internal.tracing.RequestTrace`."""

    __slots__ = (
        "attributes",
        "first",
        "headers",
        "meta",
        "method",
        "round",
        "span",
        "spans",
        "start",
        "target",
    )

    def __init__(
        self,
        spans: Spans,
        method: str,
        target: Any,
        request_id: Any,
        version: str | None,
        headers: Mapping[str, str] | None,
        meta: Mapping[str, Any] | None,
    ) -> None:
        self.start = time_ns()
        self.spans = spans
        self.method = bounded(method)
        self.target = (
            bounded(target) if isinstance(target, str) and method != "resources/read" else None
        )
        self.headers = headers
        self.meta = meta
        self.span: Span | None = None
        self.round: RoundSpan | None = None
        """The round whose code runs now (a round inside it, then it again)."""
        self.first: RoundSpan | None = None
        """The request's round, ended with the request at the latest."""
        self._attributes_of(request_id, version)

    def _attributes_of(self, request_id: Any, version: str | None) -> None:
        attributes: dict[str, Any] = {
            "mcp.method.name": self.method,
            "engine.replica": self.spans.replica_id,
        }
        if version is not None:
            attributes["mcp.protocol.version"] = bounded(version)
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            attributes["jsonrpc.request.id"] = bounded(str(request_id))
        if self.target is not None:
            if self.method == "tools/call":
                attributes["gen_ai.operation.name"] = "execute_tool"
                attributes["gen_ai.tool.name"] = self.target
            elif self.method == "prompts/get":
                attributes["gen_ai.prompt.name"] = self.target
        self.attributes = attributes

    def _incoming(self) -> SpanContext:
        """The span this request came from: one current around it (an instrumented ASGI
        server, which read the header itself, or an in-process caller), else the client's
        ``traceparent`` header, or ``_meta``'s ``traceparent``."""
        ambient = trace.get_current_span().get_span_context()
        if ambient.is_valid:
            return ambient
        for carrier in (self.headers, self.meta):
            if carrier and "traceparent" in carrier:
                found = trace.get_current_span(extract(carrier)).get_span_context()
                if found.is_valid:
                    return found
        return INVALID_SPAN_CONTEXT

    def _open(self, carried: tuple[SpanContext, SpanContext | None] | None) -> Span:
        incoming = self._incoming()
        links: list[Link] = []
        if carried is not None:
            parent = trace.set_span_in_context(NonRecordingSpan(carried[0]))
            if incoming.is_valid:
                links.append(Link(incoming, INCOMING))
        elif incoming.is_valid:
            parent = trace.set_span_in_context(NonRecordingSpan(incoming))
        else:
            parent = None
        name = self.method if self.target is None else f"{self.method} {self.target}"
        span = self.spans.tracer.start_span(
            name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=self.attributes,
            links=links,
            start_time=self.start,
        )
        self.span = span
        return span

    def enter_round(
        self, target: str, role: str, call_id: bytes, round_no: int, carried: bytes | None
    ) -> RoundSpan:
        outer = self.round
        sealed = carried_context(carried) if carried is not None else None
        span = self.span
        if span is None:
            attributes = self.attributes  # given when the span starts: cheaper than set later
            attributes["engine.call_id"] = call_id.hex()
            attributes["engine.round"] = round_no
            span = self._open(sealed)
        root_id = sealed[0].span_id if sealed is not None else span.get_span_context().span_id
        previous = sealed[1] if sealed is not None else None
        entered = self.round = RoundSpan(
            self, outer, span, target, role, call_id, round_no, root_id, previous
        )
        if self.first is None:
            self.first = entered
        return entered

    def carried(self) -> bytes | None:
        current = self.round
        return None if current is None else current.carried()

    def recorded_trace(self) -> str | None:
        first = self.first
        if first is None or not first.recording or not first.trace_id:
            return None
        return f"{first.trace_id:032x}"

    def failed(self, error: BaseException) -> None:
        span = self.span if self.span is not None else self._open(None)
        if span.is_recording():
            record_error(span, error)
        self._end(span)

    def ended(self, outcome: str | None) -> None:
        span = self.span if self.span is not None else self._open(None)
        if outcome is not None and span.is_recording():
            span.set_attribute("engine.outcome", outcome)
        self._end(span)

    def _end(self, span: Span) -> None:
        first = self.first
        if first is not None and not first.ended:  # its response was never kept
            first.end()
        span.end()


class RoundSpan:
    """One round's span; see :class:`~engine._internal.tracing.RoundTrace`.

    Under a request span that records nothing (the sampler left the trace out) no round span
    is made, but the trace context is still carried, so later rounds stay out of it too.
    """

    __slots__ = (
        "_token",
        "ended",
        "flags",
        "outer",
        "recording",
        "request",
        "root_id",
        "span",
        "trace_id",
    )

    def __init__(
        self,
        request: RequestSpan,
        outer: RoundSpan | None,
        parent: Span,
        target: str,
        role: str,
        call_id: bytes,
        round_no: int,
        root_id: int,
        previous: SpanContext | None,
    ) -> None:
        self.request = request
        self.outer = outer
        self.root_id = root_id
        context = parent.get_span_context()
        self.trace_id = context.trace_id
        self.flags = int(context.trace_flags)
        self.ended = False
        self.span: Span | None = None
        self._token: object = None
        self.recording = parent.is_recording()
        if not self.recording:
            return
        attributes: dict[str, Any] = {
            "engine.call_id": call_id.hex(),
            "engine.round": round_no,
            "engine.replica": request.spans.replica_id,
            "engine.handler": target,
            "engine.role": role,
        }
        if role == "tool":
            attributes["gen_ai.tool.name"] = target
        # A round inside a round (ctx.read_resource) goes under the current span.
        within = trace.set_span_in_context(parent) if outer is None else None
        span = self.span = request.spans.tracer.start_span(
            f"round {target}",
            context=within,
            attributes=attributes,
            links=[Link(previous, PREVIOUS_ROUND)] if previous is not None else (),
        )
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def carried(self) -> bytes | None:
        if not self.trace_id:
            return None  # the API's no-op spans: no trace to continue
        span = self.span
        previous_id = span.get_span_context().span_id if span is not None else 0
        return carry(self.trace_id, self.root_id, previous_id, self.flags)

    def answered(
        self, outcome: str, questions: Collection[str], error: BaseException | None
    ) -> None:
        span = self.span
        if span is None:
            return
        span.set_attribute("engine.outcome", outcome)
        if questions:
            span.set_attribute("engine.questions", list(questions))
        if error is not None:
            record_error(span, error)
        elif outcome == "error":
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "tool_error"))
        request = self.request.span
        if request is not None and request.is_recording():
            request.set_attribute("engine.outcome", outcome)

    def leave(self) -> None:
        token = self._token
        if token is not None:
            self._token = None
            otel_context.detach(token)  # type: ignore[arg-type]
        self.request.round = self.outer

    def resume(self) -> _Current:
        return _Current(self.span)

    def failed(self, error: BaseException) -> None:
        span = self.span
        if span is not None and not self.ended:
            record_error(span, error)
        self.leave()
        self.end()

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            if self.span is not None:
                self.span.end()


class _Current:
    """``with`` it, the round's span is the current one (a class: cheaper than a generator)."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self.token: object = None

    def __enter__(self) -> None:
        if self.span is not None:
            self.token = otel_context.attach(trace.set_span_in_context(self.span))

    def __exit__(self, *exc_info: object) -> None:
        if self.token is not None:
            otel_context.detach(self.token)  # type: ignore[arg-type]


__all__ = ["RequestSpan", "RoundSpan", "Spans", "carried_context"]
