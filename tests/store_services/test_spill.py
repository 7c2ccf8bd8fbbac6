"""State by reference: a large state goes to the store, and the token stays small."""

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from engine import Context, Elicit, MCPServer, Resolve, Sample
from engine.testing import Client
from engine.types import CreateMessageResult, SamplingMessage, TextContent
from stores import MemoryStore, Store, StoreUnavailable
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

BIG = "x" * 1_000_000


def ask_model() -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(text="Write a lot"))], max_tokens=10
    )


def essay_server(store: Store | str | None, counter: list[int]) -> MCPServer:
    from pydantic import BaseModel

    class Ok(BaseModel):
        ok: bool

    mcp = MCPServer("Essays", keys=[KEY], store=store)

    async def confirm(essay: Annotated[CreateMessageResult, Resolve(ask_model)], ctx: Context):
        from engine import Elicit

        return Elicit(f"Publish {len(essay.content.text)} characters?", Ok)  # type: ignore[union-attr]

    @mcp.tool()
    async def publish(
        essay: Annotated[CreateMessageResult, Resolve(ask_model)],
        ok: Annotated[Ok, Resolve(confirm)],
    ) -> str:
        counter.append(1)
        return f"published {len(essay.content.text)} characters"  # type: ignore[union-attr]

    return mcp


def big_answer(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": BIG}, "model": "m"}


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_large_answer_goes_by_reference_and_the_token_stays_small(
    backend: str, redis_url: str
) -> None:
    counter: list[int] = []
    if backend == "memory":
        store = MemoryStore()
        a, b = essay_server(store, counter), essay_server(store, counter)
    else:  # two replicas, each with its own connection to Redis
        a, b = essay_server(redis_url, counter), essay_server(redis_url, counter)
    async with Client(
        a,
        b,
        sampling=big_answer,
        elicitation=lambda p: {"action": "accept", "content": {"ok": True}},
    ) as client:
        result = await client.call_tool("publish", {})
    assert result.text == "published 1000000 characters"
    assert len(result.rounds) == 3
    assert len(result.rounds[1]["requestState"]) <= 300
    assert result.servers == ["0", "1", "0"]


async def test_without_a_store_a_large_state_is_refused_clearly() -> None:
    ok = {"action": "accept", "content": {"ok": True}}
    async with Client(
        essay_server(None, []), sampling=big_answer, elicitation=lambda p: ok
    ) as client:
        result = await client.call_tool("publish", {})
    assert result.is_error
    assert "over the inline limit" in result.text
    assert "Configure a store" in result.text


class NoBlobs(MemoryStore):
    """A memory store that cannot keep a state blob, as if the backend were down."""

    async def put_blob(self, *args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("memory store unavailable: put_blob failed (test)")


class Sure(BaseModel):
    sure: bool


def ask_sure() -> Elicit[Sure]:
    return Elicit("Sure?", Sure)


async def test_a_state_the_store_cannot_keep_travels_inline_when_it_fits() -> None:
    """The round ran (its side effects too): a state that fits the token goes on inline, so the
    client is not told to retry a round that did something."""
    mcp = MCPServer("Spill", keys=[KEY], store=NoBlobs(), spill_threshold=0)
    bodies: list[int] = []

    @mcp.tool()
    def ask(sure: Annotated[Sure, Resolve(ask_sure)]) -> str:
        bodies.append(1)
        return "asked"

    yes = {"action": "accept", "content": {"sure": True}}
    async with Client(mcp, elicitation=lambda p: yes) as client:
        result = await client.call_tool("ask", {})
    assert result.text == "asked"
    assert bodies == [1]
    assert mcp.core.metrics.value("engine_store_errors_total") == 1
    assert mcp.core.metrics.value("engine_state_spills_total") == 0


async def test_a_state_too_large_to_carry_and_unkept_says_side_effects_may_have_run() -> None:
    mcp = MCPServer("Spill", keys=[KEY], store=NoBlobs(), spill_threshold=0, max_inline_state=8)

    @mcp.tool()
    def ask(sure: Annotated[Sure, Resolve(ask_sure)]) -> str:
        return "asked"

    async with Client(mcp, elicitation=lambda p: {"action": "accept", "content": {}}) as client:
        result = await client.send("tools/call", {"name": "ask", "arguments": {}})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "side effects (once=True steps) may have run" in text, text
    assert "Retry" not in text
    assert mcp.core.metrics.value("engine_store_errors_total") == 1
