"""A span holds no more of what a client sent than its bound, and no source text of a failure.

Requests with a request id of 1,000,000 characters, to a tool that raises (its line of source
quotes what it was given) and to a tool name of 1,000,000 characters, recorded by the SDK's
in-memory exporter: every text a client chose is cut to ``SPAN_TEXT_LIMIT`` characters in the
span's name and attributes, and the exception event names the frames (file, line, function) but
carries neither the message nor a line of the source.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine import MCPServer
from engine._internal.otel_spans import SPAN_TEXT_LIMIT
from tests.conftest import KEY
from tests.http_helpers import asgi_client, assert_result, call, post

pytestmark = pytest.mark.anyio

HUGE = 1_000_000
TITLE = "TITLE-CANARY-5be1"


async def shelve(title: str) -> str:
    raise ValueError(f"cannot shelve {title}: SOURCE-LINE-CANARY")


@pytest.fixture
def recorded() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def texts_of(span: ReadableSpan) -> list[str]:
    """Its name, its status and every attribute of the span and of its events."""
    texts = [span.name, str(span.status.description)]
    for attributes in [span.attributes or {}, *[event.attributes or {} for event in span.events]]:
        texts += [str(value) for value in attributes.values()]
    return texts


async def test_client_text_on_spans_is_bounded_and_errors_carry_no_source(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = recorded
    mcp = MCPServer("Shelf", keys=[KEY], tracer_provider=provider)
    mcp.add_tool(shelve)
    long_id = "7" * HUGE
    async with mcp.running(), asgi_client(mcp.streamable_http_app()) as client:
        asked = call("shelve", {"title": TITLE}, id=long_id)
        failed = assert_result(await post(client, asked), id=long_id)
        assert failed["isError"] is True
        unknown = await post(client, call("s" * HUGE, {}, id=2))
        assert unknown.status_code in (200, 400)
    spans = exporter.get_finished_spans()
    assert spans
    for span in spans:
        for text in texts_of(span):
            if "Traceback" not in text:  # a stack trace: bounded by the code's depth
                assert len(text) <= 2 * SPAN_TEXT_LIMIT + 1, (span.name, text[:80])

    (request,) = [s for s in spans if s.name == "tools/call shelve"]
    request_id = request.attributes["jsonrpc.request.id"]
    assert len(request_id) == SPAN_TEXT_LIMIT and request_id.endswith("...")
    assert request_id.startswith("7" * (SPAN_TEXT_LIMIT - 3))

    (round_span,) = [s for s in spans if s.name == "round shelve"]
    (event,) = round_span.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert event.attributes["exception.message"] == "ValueError"
    stack = str(event.attributes["exception.stacktrace"])
    assert ", in shelve" in stack  # the frame is named
    assert "SOURCE-LINE-CANARY" not in stack and "raise ValueError" not in stack
    assert stack.rstrip().endswith("ValueError")
    for span in spans:
        assert not any(TITLE in text for text in texts_of(span))
