"""Whether a server records OpenTelemetry spans, and the seam through which the engine records
them.

OpenTelemetry is an optional extra (``mcp-engine[otel]``), and this module never imports it. A
server records spans unless ``ENGINE_TRACING=off``, once it has a tracer provider: one given as
``tracer_provider=``, or one configured in the process (``opentelemetry-instrument``, or
``trace.set_tracer_provider``). Whoever configures OpenTelemetry in a process imports it, so
until then a request costs a look into ``sys.modules``, and nothing of OpenTelemetry is loaded;
once it is imported, the provider is looked for again at most once a second.
``ENGINE_TRACING=on`` records through the global provider whatever it is (an error at start
without the extra).

The spans themselves are made in :mod:`engine._internal.otel_spans`; the rest of the engine
sees them through the protocols below.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from time import monotonic
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from engine._internal.otel_spans import Spans

TracingMode = Literal["auto", "on", "off"]

INSTALL_HINT = "install the otel extra: pip install 'mcp-engine[otel]'"
PROVIDER_LOOK_INTERVAL = 1.0
"""Seconds between looks for a provider once OpenTelemetry is imported without one: a
provider set later is used from the next look on."""


class RoundTrace(Protocol):
    """The span of one round: current while the round runs, ended once its response is kept."""

    recording: bool
    """Whether the span records anything (not when a sampler left the call out of the trace,
    or the API has no provider): if not, only :meth:`carried` and :meth:`leave` matter."""

    def carried(self) -> bytes | None:
        """The trace context the next round's requestState carries (``None``: none to carry)."""
        ...

    def answered(
        self, outcome: str, questions: Collection[str], error: BaseException | None
    ) -> None:
        """What the round came to, the kinds of the questions it asked, and what it raised
        unexpectedly (a tool's error result)."""
        ...

    def leave(self) -> None:
        """The round's code is done: its span stops being the current one."""
        ...

    def resume(self) -> Any:
        """A context manager under which the span is current again (keeping the response)."""
        ...

    def failed(self, error: BaseException) -> None:
        """The round raised: recorded, and the span ended."""
        ...

    def end(self) -> None: ...


class RequestTrace(Protocol):
    """The span of one MCP request, made once its parent is known: at its first round, whose
    requestState may carry the call's trace, or at its end."""

    def enter_round(
        self, target: str, role: str, call_id: bytes, round_no: int, carried: bytes | None
    ) -> RoundTrace: ...

    def carried(self) -> bytes | None:
        """What the current round's next requestState carries."""
        ...

    def recorded_trace(self) -> str | None:
        """The trace id (32 hex digits) of the request's round when its span records (the
        journal keeps it, to link the round to its trace); ``None`` otherwise."""
        ...

    def failed(self, error: BaseException) -> None: ...

    def ended(self, outcome: str | None) -> None: ...


class StoreSpans(Protocol):
    """What the metrics seam (``Metrics.store_operation``) hands store operations to."""

    def store_operation(self, operation: str, seconds: float, links: Sequence[Any] = ()) -> None:
        """A store operation that just took ``seconds``: a span under the current round, or,
        for a write batched across calls, one linking the rounds it wrote for."""
        ...

    def current_link(self) -> Any:
        """The current round's span, for a batched write to link to later (``None``: none)."""
        ...


class Tracing:
    """A server's switch for spans, and its :class:`Spans` once there is a provider."""

    __slots__ = (
        "_next_look",
        "_on_spans",
        "_replica_id",
        "_settled",
        "_spans",
    )

    def __init__(
        self,
        mode: TracingMode,
        provider: Any,
        replica_id: str,
        on_spans: Callable[[StoreSpans], None] | None = None,
    ) -> None:
        """``on_spans(spans)`` is told once the spans exist (the metrics seam takes them)."""
        self._replica_id = replica_id
        self._on_spans = on_spans
        self._spans: Spans | None = None
        self._settled = mode == "off"
        """Nothing more to look for: spans made, or tracing off."""
        self._next_look = 0.0
        """When to ask OpenTelemetry for its provider again (asking costs more than a request
        should pay each time)."""
        if mode == "on" or (mode == "auto" and provider is not None):
            self._make(provider)

    def spans(self) -> Spans | None:
        """The spans of this request, or ``None`` when nothing records them."""
        spans = self._spans
        if spans is not None or self._settled:
            return spans
        api = sys.modules.get("opentelemetry.trace")
        if api is None:  # nobody configured OpenTelemetry in this process
            return None
        now = monotonic()
        if now < self._next_look:
            return None
        self._next_look = now + PROVIDER_LOOK_INTERVAL
        provider = api.get_tracer_provider()
        if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
            return None  # the API's defaults: no provider configured yet
        return self._make(provider)

    def _make(self, provider: Any) -> Spans:
        try:
            from engine._internal.otel_spans import Spans
        except ImportError as exc:
            raise RuntimeError(f"ENGINE_TRACING=on needs OpenTelemetry: {INSTALL_HINT}") from exc
        spans = self._spans = Spans(provider, self._replica_id)
        self._settled = True
        if self._on_spans is not None:
            self._on_spans(spans)
        return spans
