"""OpenTelemetry spans of real calls, recorded by the SDK's in-memory exporter.

A 3-round call whose rounds reach three replicas (three servers, their own replica ids, one
Redis store and the same keys) is one trace: request spans, round spans numbered 1 to 3 on three
replicas, store operation spans under the rounds, and the journal's batched writes linking the
rounds they wrote. No span carries an argument, an answer, a requestState or a key.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from engine import Context, Elicit, MCPServer, Resolve, Sample
from engine.testing import inspect_request_state
from engine.types import CreateMessageResult, SamplingMessage, TextContent
from tests.conftest import KEY
from tests.http_helpers import asgi_client, assert_result, call, post, request

pytestmark = pytest.mark.anyio

TITLE = "ARGUMENT-3c9e1f"
"""An argument value no span may show."""
GENRE = "ANSWER-7d2a55"
"""What the user answers to the form."""
DRAFT = "ANSWER-SAMPLED-b81f04"
"""What the client's model answers."""
CAPABILITIES = {"elicitation": {}, "sampling": {}}
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


class Genre(BaseModel):
    genre: str


async def pick_genre(title: str) -> Elicit[Genre]:
    return Elicit(f"Which genre is {title}?", Genre)


async def draft_blurb(title: str, genre: Annotated[Genre, Resolve(pick_genre)]) -> Sample:
    text = f"Write a blurb for {title}, a {genre.genre} book."
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return Sample([message], max_tokens=100)


async def write_blurb(
    title: str,
    genre: Annotated[Genre, Resolve(pick_genre)],
    blurb: Annotated[CreateMessageResult, Resolve(draft_blurb)],
) -> str:
    """Three rounds: a form, then a sampled draft, then the result."""
    content = blurb.content
    return f"{title} ({genre.genre}): {content.text if isinstance(content, TextContent) else ''}"


async def broken(title: str) -> str:
    """Fails with a message that quotes its argument."""
    raise ValueError(f"cannot shelve {title}")


def shop(replica: str, provider: TracerProvider, store: str | None, **options: Any) -> MCPServer:
    mcp = MCPServer(
        "Blurbs",
        keys=[KEY],
        store=store,
        replica_id=replica,
        tracer_provider=provider,
        spill_threshold=0,  # every state by reference: spill and fetch_state spans too
        **options,
    )
    mcp.add_tool(write_blurb)
    mcp.add_tool(broken)
    return mcp


@pytest.fixture
def recorded() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@contextlib.asynccontextmanager
async def replicas(
    provider: TracerProvider, store: str | None, names: Sequence[str]
) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for name in names:
            mcp = shop(name, provider, store)
            await stack.enter_async_context(mcp.running())
            clients.append(await stack.enter_async_context(asgi_client(mcp.streamable_http_app())))
        yield clients


def answer_to(result: dict[str, Any]) -> dict[str, Any]:
    (key, asked), *_ = result["inputRequests"].items()
    if asked["method"] == "elicitation/create":
        return {key: {"action": "accept", "content": {"genre": GENRE}}}
    assert asked["method"] == "sampling/createMessage"
    sampled = {"role": "assistant", "content": {"type": "text", "text": DRAFT}, "model": "m"}
    return {key: sampled}


async def three_rounds(
    clients: Sequence[httpx.AsyncClient], headers: dict[str, str] | None = None
) -> list[str]:
    """``write_blurb``, round n on ``clients[n - 1]``: the requestStates it was given."""
    arguments = {"title": TITLE}
    body = call("write_blurb", arguments, capabilities=CAPABILITIES)
    result = assert_result(await post(clients[0], body, headers=headers))
    tokens = []
    for client in clients[1:]:
        assert result["resultType"] == "input_required", result
        tokens.append(result["requestState"])
        params = {
            "name": "write_blurb",
            "arguments": arguments,
            "inputResponses": answer_to(result),
            "requestState": result["requestState"],
        }
        body = request("tools/call", params, capabilities=CAPABILITIES)
        result = assert_result(await post(client, body, headers=headers))
    assert result["resultType"] == "complete", result
    assert GENRE in result["content"][0]["text"]
    return tokens


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def texts_of(span: ReadableSpan) -> list[str]:
    """Everything a span says: its name, status, attributes, events and links, as text."""
    texts = [span.name, str(span.status.description)]
    attribute_sets = [span.attributes or {}]
    attribute_sets += [event.attributes or {} for event in span.events]
    attribute_sets += [link.attributes or {} for link in span.links]
    texts += [event.name for event in span.events]
    for attributes in attribute_sets:
        for key, value in attributes.items():
            texts += [key, str(value)]
    return texts


def assert_nothing_secret(spans: Sequence[ReadableSpan], secrets: Sequence[str]) -> None:
    """No argument value, answer, requestState or key in any span."""
    assert spans
    for span in spans:
        for text in texts_of(span):
            for secret in secrets:
                assert secret not in text, f"{secret[:24]!r} in span {span.name!r}: {text[:200]!r}"


@pytest.mark.redis
async def test_a_call_across_three_replicas_is_one_trace(
    redis_url: str, recorded: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = recorded
    async with replicas(provider, redis_url, ["replica-a", "replica-b", "replica-c"]) as clients:
        tokens = await three_rounds(clients)
    spans = exporter.get_finished_spans()

    requests = named(spans, "tools/call")
    rounds = named(spans, "round ")
    journal = named(spans, "store journal")
    call_spans = [span for span in spans if span not in journal]
    assert len({span.context.trace_id for span in call_spans}) == 1, "one trace for the call"
    trace_id = call_spans[0].context.trace_id

    assert [span.attributes["engine.round"] for span in rounds] == [1, 2, 3]
    assert [span.attributes["engine.replica"] for span in rounds] == [
        "replica-a",
        "replica-b",
        "replica-c",
    ]
    assert len({span.attributes["engine.call_id"] for span in rounds}) == 1
    assert [span.attributes["engine.outcome"] for span in rounds] == [
        "input_required",
        "input_required",
        "complete",
    ]
    assert [span.attributes.get("engine.questions") for span in rounds] == [
        ("elicit",),
        ("sample",),
        None,
    ]
    assert all(span.attributes["gen_ai.tool.name"] == "write_blurb" for span in rounds)

    # Round 1's request is the root; later requests are its children; each round is its
    # request's child, and links the round before it.
    assert [span.name for span in requests] == ["tools/call write_blurb"] * 3
    assert all(span.kind is SpanKind.SERVER for span in requests)
    root = requests[0]
    assert root.parent is None
    for request_span in requests[1:]:
        assert request_span.parent is not None
        assert request_span.parent.span_id == root.context.span_id
    for request_span, round_span in zip(requests, rounds, strict=True):
        assert round_span.parent is not None
        assert round_span.parent.span_id == request_span.context.span_id
    assert not rounds[0].links
    for previous, later in itertools.pairwise(rounds):
        assert [link.context.span_id for link in later.links] == [previous.context.span_id]

    # Store operations are spans under the round that did them.
    def children(parent: ReadableSpan) -> list[str]:
        return sorted(
            span.name
            for span in spans
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        )

    by_round = {span.attributes["engine.round"]: children(span) for span in rounds}
    assert by_round == {
        1: ["store spill"],
        2: ["store claim", "store complete", "store fetch_state", "store spill"],
        3: ["store claim", "store complete", "store fetch_state"],
    }
    # The journal's writes are batched across calls: their spans link the rounds they wrote.
    linked = {link.context.span_id for span in journal for link in span.links}
    assert linked == {span.context.span_id for span in rounds}
    assert all(link.context.trace_id == trace_id for span in journal for link in span.links)

    assert_nothing_secret(spans, [TITLE, GENRE, DRAFT, KEY, *tokens])


async def test_an_incoming_traceparent_is_the_parent_of_round_1_and_a_link_later(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = recorded
    async with replicas(provider, None, ["replica-a", "replica-b", "replica-c"]) as clients:
        tokens = await three_rounds(clients, headers={"traceparent": TRACEPARENT})
    spans = exporter.get_finished_spans()
    assert {format(span.context.trace_id, "032x") for span in spans} == {CLIENT_TRACE}
    opened = inspect_request_state(shop("any", provider, None), tokens[-1])
    assert opened["claims"]["trace"]["trace_id"] == CLIENT_TRACE  # what `engine inspect` shows
    first, *later = named(spans, "tools/call")
    assert first.parent is not None
    assert format(first.parent.span_id, "016x") == CLIENT_SPAN
    assert first.parent.is_remote
    for request_span in later:  # the sealed context wins; the header is a link
        assert request_span.parent is not None
        assert request_span.parent.span_id == first.context.span_id
        assert [format(link.context.span_id, "016x") for link in request_span.links] == [
            CLIENT_SPAN
        ]


async def test_a_traceparent_in_meta_is_honoured(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = recorded
    async with replicas(provider, None, ["replica-a"]) as (client,):
        body = call("write_blurb", {"title": TITLE}, capabilities=CAPABILITIES)
        body["params"]["_meta"]["traceparent"] = TRACEPARENT
        assert_result(await post(client, body))
    (request_span,) = named(exporter.get_finished_spans(), "tools/call")
    assert format(request_span.context.trace_id, "032x") == CLIENT_TRACE
    assert request_span.parent is not None
    assert format(request_span.parent.span_id, "016x") == CLIENT_SPAN


async def test_errors_are_recorded_without_their_message(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = recorded
    async with replicas(provider, None, ["replica-a"]) as (client,):
        result = assert_result(await post(client, call("broken", {"title": TITLE})))
        assert result["isError"] is True
        unknown = await post(client, request("tools/call", {"name": "write_blurb"}, id=2))
        assert unknown.status_code == 200  # a tool's error result, for missing arguments
        listing = await post(client, request("tools/list", {}, id=3))
        assert listing.status_code == 200
        bad_token = request(
            "tools/call",
            {"name": "write_blurb", "arguments": {"title": TITLE}, "requestState": "x" * 40},
            id=4,
        )
        assert (await post(client, bad_token)).status_code == 400
    spans = exporter.get_finished_spans()
    failed = next(span for span in named(spans, "round broken"))
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["engine.outcome"] == "error"
    assert failed.attributes["error.type"] == "ValueError"
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ValueError"
    assert "broken" in str(event.attributes["exception.stacktrace"])  # the frames, not the text
    refused = [
        span
        for span in named(spans, "tools/call write_blurb")
        if span.status.status_code is StatusCode.ERROR
    ]
    assert len(refused) == 1 and refused[0].attributes["error.type"] == "-32602"
    assert [span.name for span in named(spans, "tools/list")] == ["tools/list"]
    assert_nothing_secret(spans, [TITLE, "x" * 40, KEY])


async def test_engine_tracing_off_records_nothing(
    recorded: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = recorded
    monkeypatch.setenv("ENGINE_TRACING", "off")
    async with replicas(provider, None, ["replica-a", "replica-b", "replica-c"]) as clients:
        tokens = await three_rounds(clients)
    assert exporter.get_finished_spans() == ()
    assert tokens


async def test_a_round_on_a_replica_that_does_not_trace_leaves_the_call_one_trace(
    recorded: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet turning tracing on replica by replica: the untraced replica's token carries
    the trace context its own token brought, and round 3 continues round 1's trace."""
    provider, exporter = recorded
    servers: list[MCPServer] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for name in ("replica-a", "replica-b", "replica-c"):
            if name == "replica-b":
                monkeypatch.setenv("ENGINE_TRACING", "off")
            else:
                monkeypatch.delenv("ENGINE_TRACING", raising=False)
            mcp = shop(name, provider, None)
            servers.append(mcp)
            await stack.enter_async_context(mcp.running())
            clients.append(await stack.enter_async_context(asgi_client(mcp.streamable_http_app())))
        tokens = await three_rounds(clients)
    spans = exporter.get_finished_spans()
    rounds = named(spans, "round ")
    minted_untraced = inspect_request_state(servers[1], tokens[1])["claims"]["trace"]
    assert minted_untraced["trace_id"] == f"{rounds[0].context.trace_id:032x}"
    assert [span.attributes["engine.round"] for span in rounds] == [1, 3]
    assert [span.attributes["engine.replica"] for span in rounds] == ["replica-a", "replica-c"]
    call_spans = [span for span in spans if not span.name.startswith("store journal")]
    assert len({span.context.trace_id for span in call_spans}) == 1
    (first_request, last_request) = named(spans, "tools/call")
    assert last_request.parent is not None
    assert last_request.parent.span_id == first_request.context.span_id


async def test_a_2025_11_25_call_is_traced_with_its_questions_asked_in_place(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    import httpx2
    import mcp_types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from examples.bookshop import build
    from tests.fleet_helpers import serve_asgi

    async def confirm(context: Any, params: Any) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"confirm": True})

    provider, exporter = recorded
    app = build(keys=[KEY], replica_id="replica-l", tracer_provider=provider).streamable_http_app()
    async with serve_asgi(app) as base, httpx2.AsyncClient(trust_env=False, timeout=20) as http:
        transport = streamable_http_client(base.rstrip("/") + "/mcp", http_client=http)
        async with Client(transport, mode="legacy", elicitation_callback=confirm) as client:
            result = await client.call_tool("order_book", {"title": TITLE})
    assert not result.is_error
    spans = exporter.get_finished_spans()
    (request_span,) = named(spans, "tools/call order_book")
    (round_span,) = named(spans, "round order_book")
    assert request_span.attributes["mcp.protocol.version"] == "2025-11-25"
    assert round_span.parent is not None
    assert round_span.parent.span_id == request_span.context.span_id
    assert round_span.attributes["engine.questions"] == ("elicit",)
    assert round_span.attributes["engine.outcome"] == "complete"
    assert round_span.attributes["engine.replica"] == "replica-l"
    assert named(spans, "initialize")
    assert_nothing_secret(spans, [TITLE, KEY])


async def test_a_resource_read_inside_a_round_is_a_round_under_it(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = recorded
    mcp = shop("replica-a", provider, None)

    @mcp.resource("shelf://catalogue")
    def catalogue() -> str:
        return "Dune, Neuromancer"

    @mcp.tool()
    async def browse(ctx: Context[Any]) -> str:
        contents = await ctx.read_resource("shelf://catalogue")
        return str(contents[0].content)

    async with mcp.running(), asgi_client(mcp.streamable_http_app()) as client:
        result = assert_result(await post(client, call("browse", {})))
    assert "Neuromancer" in result["content"][0]["text"]
    spans = exporter.get_finished_spans()
    (outer,) = named(spans, "round browse")
    (inner,) = named(spans, "round catalogue")
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert inner.attributes["engine.role"] == "resource"
    assert outer.attributes["engine.outcome"] == "complete"
    (request_span,) = named(spans, "tools/call browse")
    assert outer.parent is not None and outer.parent.span_id == request_span.context.span_id


GLOBAL_PROVIDER = """
import json
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from engine import MCPServer
from engine.testing import Client

mcp = MCPServer("Traced", keys=["k" * 32])  # made before any provider is set

@mcp.tool()
async def echo(text: str) -> str:
    return text

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    async with mcp.running(), Client(mcp) as client:
        await client.call_tool("echo", {"text": "hi"})

anyio.run(main)
print(json.dumps(sorted(span.name for span in exporter.get_finished_spans())))
"""


def test_a_global_provider_set_after_the_server_was_made_is_used() -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(ran.stdout.splitlines()[-1]) == ["round echo", "tools/call echo"]


async def test_a_span_around_the_request_is_its_parent(
    recorded: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """An instrumented ASGI server (or an in-process caller) has a span current already: the
    request span goes under it rather than under the header it read."""
    provider, exporter = recorded
    async with replicas(provider, None, ["replica-a"]) as (client,):
        tracer = provider.get_tracer("around")
        with tracer.start_as_current_span("HTTP POST /mcp") as around:
            assert_result(await post(client, request("tools/list", {})))
    (listing,) = named(exporter.get_finished_spans(), "tools/list")
    assert listing.parent is not None
    assert listing.parent.span_id == around.get_span_context().span_id
