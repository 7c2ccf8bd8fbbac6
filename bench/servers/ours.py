"""The bench bookshop on ``engine``, served by ``mcp.run`` (uvicorn); runs in the project venv.

Same tool names, same logic and same uvicorn settings as ``bench/servers/official.py``; served
the way the docs serve a server, so with what ``mcp.run`` does besides (draining on SIGTERM,
leaving the objects that exist after startup out of later garbage collections):

    python bench/servers/ours.py --port 8123 [--store redis://127.0.0.1:6379/0?prefix=bench-x]

Every resolver is ``async`` (a sync resolver would add a worker-thread hop on both sides).
Without a store, ``max_token_chars`` is raised to 4 MiB, the official SDK's request-body cap, so
the 1 MB sampled answer can travel inline as it does there (the default refuses it and tells the
operator to configure a store).

With ``BENCH_OTEL=sdk`` the server traces: an OpenTelemetry SDK tracer provider, set globally,
whose batched spans go to an exporter that drops them (the cost of recording spans, without a
collector's); ``BENCH_OTEL=sampled`` samples one call in a hundred (``parentbased_traceidratio``);
``BENCH_OTEL=api`` imports OpenTelemetry and sets no provider.

With ``BENCH_JWKS`` (a JWKS, as ``bench/ab.py``'s ``jwt`` variants set it) the server has auth on:
a ``JWTVerifier`` that fetches that key set from the server's own ``/bench/jwks`` when the first
token arrives, and keeps it, as it would a provider's.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine import (
    AcceptedElicitation,
    AuthSettings,
    Context,
    Elicit,
    JWTVerifier,
    MCPServer,
    Resolve,
    Sample,
)
from engine.types import CreateMessageResult, SamplingMessage, TextContent

KEY = os.environ.get("BENCH_KEY", "bench-shared-secret-0123456789abcdef-0123456789")
INVENTORY = {"Dune": 7, "Neuromancer": 0}
SLOW = 0.05
INLINE_MAX_TOKEN_CHARS = 4 * 1024 * 1024


class Stock(BaseModel):
    title: str
    copies: int


class Backorder(BaseModel):
    confirm: bool = Field(description="Order anyway and wait?")


class Confirm(BaseModel):
    confirm: bool = Field(description="Go ahead?")


# --- 1 round: reserve_book ------------------------------------------------------------------


async def check_stock(title: str) -> Stock:
    return Stock(title=title, copies=INVENTORY.get(title, 0))


async def reserve_book(title: str, stock: Annotated[Stock, Resolve(check_stock)]) -> str:
    """Reserve a copy of a book."""
    if stock.copies == 0:
        return f"{title!r} is out of stock."
    return f"Reserved {title!r} ({stock.copies - 1} copies left)."


# --- 2 rounds: order_book (one elicitation when out of stock) -----------------------------------


async def confirm_backorder(
    title: str, stock: Annotated[Stock, Resolve(check_stock)]
) -> Backorder | Elicit[Backorder]:
    if stock.copies > 0:
        return Backorder(confirm=True)
    return Elicit(f"{title!r} is out of stock (2-3 weeks). Order anyway?", Backorder)


async def order_book(
    title: str,
    stock: Annotated[Stock, Resolve(check_stock)],
    backorder: Annotated[Backorder, Resolve(confirm_backorder)],
) -> str:
    """Order a book from the shop."""
    if not backorder.confirm:
        return "No order placed."
    if stock.copies == 0:
        return f"Backordered {title!r}; it ships in 2-3 weeks."
    return f"Ordered {title!r}."


# --- chain: Sample -> Elicit -> Elicit --------------------------------------------------------


async def suggest_title(genre: str) -> Sample:
    prompt = f"Suggest one {genre} book title. Answer with the title only."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=50,
    )


def _text(result: CreateMessageResult) -> str:
    content = result.content
    return content.text if isinstance(content, TextContent) else "the classics"


async def confirm_pick(
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
) -> Elicit[Confirm]:
    return Elicit(f"Order {_text(suggestion)!r}?", Confirm)


async def confirm_again(
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
    pick: Annotated[Confirm, Resolve(confirm_pick)],
) -> Elicit[Confirm]:
    return Elicit(f"Really order {_text(suggestion)!r}? It ships in 2-3 weeks.", Confirm)


async def recommend_and_order(
    genre: str,
    suggestion: Annotated[CreateMessageResult, Resolve(suggest_title)],
    pick: Annotated[Confirm, Resolve(confirm_pick)],
    again: Annotated[Confirm, Resolve(confirm_again)],
) -> str:
    """Ask the client's model for a title, then confirm twice."""
    if not (pick.confirm and again.confirm):
        return "No order placed."
    return f"Ordered {_text(suggestion)!r} ({genre})."


# --- a 1 MB sampled answer, then one more question ------------------------------------------------


async def write_draft(topic: str) -> Sample:
    prompt = f"Write a long article about {topic}."
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=400_000,
    )


async def approve(draft: Annotated[CreateMessageResult, Resolve(write_draft)]) -> Elicit[Confirm]:
    return Elicit(f"Publish the {len(_text(draft))}-character draft?", Confirm)


async def publish_draft(
    topic: str,
    draft: Annotated[CreateMessageResult, Resolve(write_draft)],
    ok: Annotated[Confirm, Resolve(approve)],
) -> str:
    """Have the client's model draft an article, then ask before publishing it."""
    if not ok.confirm:
        return "Not published."
    return f"Published {len(_text(draft))} characters on {topic!r}."


# --- two independent slow resolvers --------------------------------------------------------------


async def slow_left(item: str) -> str:
    await anyio.sleep(SLOW)
    return f"left:{item}"


async def slow_right(item: str) -> str:
    await anyio.sleep(SLOW)
    return f"right:{item}"


async def slow_pair(
    item: str,
    left: Annotated[str, Resolve(slow_left)],
    right: Annotated[str, Resolve(slow_right)],
) -> str:
    """Two lookups that do not depend on each other, 50 ms each."""
    return f"{left} {right}"


# --- a task: order_book's question, asked by the body of a task --------------------------------


async def order_as_task(title: str, ctx: Context[Any]) -> str:
    """Order a book, as a task that asks before it backorders (a store is needed)."""
    stock = await check_stock(title)
    if stock.copies > 0:
        return f"Ordered {title!r}."
    answer = await ctx.elicit(f"{title!r} is out of stock (2-3 weeks). Order anyway?", Backorder)
    if not (isinstance(answer, AcceptedElicitation) and answer.data.confirm):
        return "No order placed."
    return f"Backordered {title!r}; it ships in 2-3 weeks."


TOOLS: list[Callable[..., Any]] = [
    reserve_book,
    order_book,
    recommend_and_order,
    publish_draft,
    slow_pair,
]


JWT_ISSUER = "https://auth.bench.example/realms/bench"
JWT_AUDIENCE = "bench-bookshop"


def build(store: str | None = None, port: int = 0, **given: object) -> MCPServer:
    """The bookshop; ``given`` are more ``MCPServer`` options (``tracer_provider``, say)."""
    options: dict[str, object] = dict(given)
    if store is None:
        options["max_token_chars"] = INLINE_MAX_TOKEN_CHARS
    jwks = os.environ.get("BENCH_JWKS")
    if jwks:
        options["token_verifier"] = JWTVerifier(
            f"http://127.0.0.1:{port}/bench/jwks", issuer=JWT_ISSUER, audience=JWT_AUDIENCE
        )
        options["auth"] = AuthSettings(
            issuer_url=JWT_ISSUER,
            resource_server_url=f"http://127.0.0.1:{port}/mcp",
            required_scopes=["shop"],
        )
    # The load generator is one principal calling as fast as the replica serves: its task
    # budgets are the replica's, not one user's among many.
    for budget in (
        "max_tasks_per_principal",
        "max_tasks_per_replica",
        "max_task_creations_per_minute",
    ):
        options.setdefault(budget, 1 << 30)
    mcp = MCPServer("Bookshop", keys=[KEY], store=store, **options)  # type: ignore[arg-type]
    for tool in TOOLS:
        mcp.add_tool(tool)
    mcp.add_tool(order_as_task, task=True)
    if jwks:
        body = jwks.encode()

        @mcp.custom_route("/bench/jwks")
        async def key_set(scope: Any, receive: Any, send: Any) -> None:
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    return mcp


# --- serving -----------------------------------------------------------------------------------


def trace_as_asked() -> None:
    """``BENCH_OTEL``: ``sdk`` (spans recorded, then dropped), ``sampled`` (1% of calls),
    ``api`` (no provider), unset."""
    mode = os.environ.get("BENCH_OTEL")
    if not mode:
        return
    from opentelemetry import trace

    if mode == "api":
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    sampler = ParentBased(TraceIdRatioBased(0.01)) if mode == "sampled" else None
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", default=None, help="a store URL (default: inline state)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    trace_as_asked()
    build(args.store, args.port).run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        uvicorn_options={
            "workers": 1,
            "loop": "uvloop",
            "http": "httptools",
            "log_level": "critical",
            "access_log": False,
        },
    )


if __name__ == "__main__":
    main()
