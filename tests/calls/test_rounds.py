"""The round machine: resolvers, questions, checkpoints, replicas."""

import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from engine import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    ElicitURL,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from engine.testing import Client, ProtocolError
from engine.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from examples.bookshop import Backorder, build
from stores import MemoryStore
from tests.conftest import KEY
from tests.store_services.helpers import order_server

pytestmark = pytest.mark.anyio

YES = {"action": "accept", "content": {"confirm": True}}


def always(answer: Any):
    return lambda params: answer


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str = Field(description="Favourite colour")


async def test_two_replicas_resume_each_others_calls() -> None:
    a, b = build(keys=[KEY]), build(keys=[KEY])
    async with Client(a, b, elicitation=always(YES)) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.servers == ["0", "1"]
    assert result.text == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


async def test_a_replica_with_other_keys_cannot_resume() -> None:
    a, b = build(keys=[KEY]), build(keys=["x" * 40])
    async with Client(a, b, elicitation=always(YES)) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("order_book", {"title": "Neuromancer"})
    assert caught.value.message == "Invalid or expired requestState"


def shop_with_hold(counter: list[int]) -> MCPServer:
    mcp = MCPServer("Holds", keys=[KEY])

    async def hold_copy(title: str) -> str:
        counter.append(1)
        return f"hold-{title}-{len(counter)}"

    async def ask_name(title: str) -> Name | Elicit[Name]:
        return Elicit(f"Who is collecting {title}?", Name)

    async def ask_color(name: Annotated[Name, Resolve(ask_name)]) -> Color | Elicit[Color]:
        return Elicit(f"Wrapping colour for {name.name}?", Color)

    @mcp.tool()
    async def reserve(
        title: str,
        hold: Annotated[str, Resolve(hold_copy, once=True)],
        color: Annotated[Color, Resolve(ask_color)],
    ) -> str:
        return f"{hold} wrapped in {color.color}"

    return mcp


async def test_once_resolver_runs_once_over_three_rounds_and_two_replicas() -> None:
    counter: list[int] = []
    a, b = shop_with_hold(counter), shop_with_hold(counter)

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        if "Who" in params["message"]:
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "accept", "content": {"color": "blue"}}

    async with Client(a, b, elicitation=answer) as client:
        result = await client.call_tool("reserve", {"title": "Dune"})
    assert len(result.rounds) == 3
    assert result.servers == ["0", "1", "0"]
    assert result.text == "hold-Dune-1 wrapped in blue"
    assert counter == [1]


def body_elicit_server(asked: list[str]) -> MCPServer:
    mcp = MCPServer("Body", keys=[KEY])

    @mcp.tool()
    async def greet(ctx: Context) -> str:
        first = await ctx.elicit("Your name?", Name)
        asked.append("name")
        assert isinstance(first, AcceptedElicitation)
        second = await ctx.elicit(f"Colour for {first.data.name}?", Color)
        if isinstance(second, DeclinedElicitation):
            return f"Hello {first.data.name}"
        return f"Hello {first.data.name} in {second.data.color}"

    return mcp


async def test_body_level_elicit_replays_across_replicas() -> None:
    asked: list[str] = []
    a, b = body_elicit_server(asked), body_elicit_server(asked)

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        if params["message"] == "Your name?":
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "accept", "content": {"color": "teal"}}

    async with Client(a, b, elicitation=answer) as client:
        result = await client.call_tool("greet", {})
    assert result.text == "Hello Ada in teal"
    assert [list(r.get("inputRequests", {})) for r in result.rounds] == [
        ["elicit#1"],
        ["elicit#2"],
        [],
    ]
    assert result.servers == ["0", "1", "0"]


def pay_server(charges: list[int]) -> MCPServer:
    mcp = MCPServer("Pay", keys=[KEY])

    def charge(amount: int) -> str:
        charges.append(amount)
        return f"receipt-{amount}"

    @mcp.tool()
    async def pay(amount: int, ctx: Context) -> str:
        receipt = await ctx.once(charge, amount)
        ok = await ctx.elicit(f"Send {receipt} by mail?", Backorder)
        return f"{receipt} mailed={ok.data.confirm}"

    return mcp


async def test_body_level_once_checkpoints_a_side_effect() -> None:
    charges: list[int] = []
    async with Client(pay_server(charges), pay_server(charges), elicitation=always(YES)) as client:
        result = await client.call_tool("pay", {"amount": 5})
    assert result.text == "receipt-5 mailed=True"
    assert result.servers == ["0", "1"]
    assert charges == [5]


async def test_independent_resolvers_run_concurrently() -> None:
    mcp = MCPServer("Slow", keys=[KEY])

    async def slow_a() -> str:
        await anyio.sleep(0.3)
        return "a"

    async def slow_b() -> str:
        await anyio.sleep(0.3)
        return "b"

    @mcp.tool()
    async def both(a: Annotated[str, Resolve(slow_a)], b: Annotated[str, Resolve(slow_b)]) -> str:
        return a + b

    async with Client(mcp) as client:
        started = time.monotonic()
        result = await client.call_tool("both", {})
        elapsed = time.monotonic() - started
    assert result.text == "ab"
    assert elapsed < 0.55


async def test_sync_resolvers_and_tools_run_in_a_worker_thread() -> None:
    mcp = MCPServer("Threads", keys=[KEY])
    loop_thread = threading.get_ident()

    def where() -> int:
        return threading.get_ident()

    @mcp.tool()
    def check(resolver_thread: Annotated[int, Resolve(where)]) -> str:
        return f"{resolver_thread != loop_thread} {threading.get_ident() != loop_thread}"

    async with Client(mcp) as client:
        result = await client.call_tool("check", {})
    assert result.text == "True True"


async def test_elicitation_result_lets_the_body_branch() -> None:
    mcp = MCPServer("Branch", keys=[KEY])

    async def ask(title: str) -> Elicit[Backorder]:
        return Elicit(f"Backorder {title}?", Backorder)

    @mcp.tool()
    async def order(
        title: str, answer: Annotated[ElicitationResult[Backorder], Resolve(ask)]
    ) -> str:
        if isinstance(answer, AcceptedElicitation):
            return f"ordered={answer.data.confirm}"
        return f"suggest another title instead of {title} ({answer.action})"

    async with Client(mcp, elicitation=always({"action": "decline"})) as client:
        declined = await client.call_tool("order", {"title": "Dune"})
    async with Client(mcp, elicitation=always(YES)) as client:
        accepted = await client.call_tool("order", {"title": "Dune"})
    assert declined.text == "suggest another title instead of Dune (decline)"
    assert not declined.is_error
    assert accepted.text == "ordered=True"


async def test_independent_questions_go_out_together() -> None:
    mcp = MCPServer("Batch", keys=[KEY])

    def topic() -> Sample:
        message = SamplingMessage(role="user", content=TextContent(text="Pick a topic"))
        return Sample([message], max_tokens=10)

    def roots() -> ListRoots:
        return ListRoots()

    async def name() -> Elicit[Name]:
        return Elicit("Name?", Name)

    @mcp.tool()
    async def everything(
        t: Annotated[CreateMessageResult, Resolve(topic)],
        r: Annotated[ListRootsResult, Resolve(roots)],
        n: Annotated[Name, Resolve(name)],
    ) -> str:
        assert t.content.type == "text"
        return f"{t.content.text} {r.roots[0].uri} {n.name}"

    async with Client(
        mcp,
        sampling=always(
            {"role": "assistant", "content": {"type": "text", "text": "owls"}, "model": "m"}
        ),
        roots=always({"roots": [{"uri": "file:///work"}]}),
        elicitation=always({"action": "accept", "content": {"name": "Ada"}}),
    ) as client:
        result = await client.call_tool("everything", {})
    assert sorted(result.rounds[0]["inputRequests"]) == ["name", "roots", "topic"]
    assert len(result.rounds) == 2
    assert result.text == "owls file:///work Ada"


async def test_missing_capability_is_refused_only_when_the_question_must_be_asked() -> None:
    mcp = build(keys=[KEY])
    async with Client(mcp, capabilities={}) as client:
        in_stock = await client.call_tool("order_book", {"title": "Dune"})
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("order_book", {"title": "Neuromancer"})
    assert in_stock.text == "Ordered 'Dune'."
    assert caught.value.code == -32021
    assert caught.value.status == 400
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert "confirm_backorder" in caught.value.message


async def test_url_elicitation_from_a_resolver() -> None:
    mcp = MCPServer("Url", keys=[KEY])
    connected: list[bool] = []

    async def github_token() -> str | ElicitURL:
        if connected:
            return "token-123"
        connected.append(True)
        return ElicitURL("Connect your GitHub account", "https://example.com/connect")

    @mcp.tool()
    async def repos(token: Annotated[str, Resolve(github_token)]) -> str:
        return f"listing with {token}"

    async with Client(mcp, elicitation=always({"action": "accept"})) as client:
        result = await client.call_tool("repos", {})
    first = result.rounds[0]["inputRequests"]["github_token"]
    assert first["params"] == {
        "mode": "url",
        "message": "Connect your GitHub account",
        "url": "https://example.com/connect",
    }
    assert result.text == "listing with token-123"


async def test_url_elicitation_needs_the_url_capability() -> None:
    mcp = MCPServer("Url", keys=[KEY])

    async def sign_in() -> ElicitURL:
        return ElicitURL("Sign in", "https://example.com/sign-in")

    @mcp.tool()
    async def secret(token: Annotated[str, Resolve(sign_in)]) -> str:
        return token

    async with Client(mcp, capabilities={"elicitation": {}}) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("secret", {})
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}


async def test_dependency_overrides_swap_a_resolver() -> None:
    mcp = build(keys=[KEY])
    from examples.bookshop import Stock, check_stock

    async def plenty(title: str) -> Stock:
        return Stock(title=title, copies=99)

    mcp.dependency_overrides[check_stock] = plenty
    async with Client(mcp) as client:
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert result.text == "Ordered 'Neuromancer'."
    mcp.dependency_overrides.clear()
    async with Client(mcp, capabilities={}) as client:
        with pytest.raises(ProtocolError):
            await client.call_tool("order_book", {"title": "Neuromancer"})


async def test_generator_resolvers_clean_up_after_suspend_and_failure() -> None:
    mcp = MCPServer("Gen", keys=[KEY])
    events: list[str] = []

    async def connection() -> AsyncIterator[str]:
        events.append("open")
        try:
            yield "conn"
        finally:
            events.append("close")

    def sync_connection() -> Iterator[str]:
        events.append("sync-open")
        yield "sync"
        events.append("sync-close")

    async def ask(conn: Annotated[str, Resolve(connection)]) -> Elicit[Name]:
        return Elicit("Name?", Name)

    @mcp.tool()
    async def use(
        conn: Annotated[str, Resolve(connection)],
        other: Annotated[str, Resolve(sync_connection)],
        name: Annotated[Name, Resolve(ask)],
    ) -> str:
        if name.name == "boom":
            raise RuntimeError("boom")
        return f"{conn} {other} {name.name}"

    async with Client(
        mcp, elicitation=always({"action": "accept", "content": {"name": "Ada"}})
    ) as client:
        result = await client.call_tool("use", {})
    assert result.text == "conn sync Ada"
    assert events.count("open") == 2 and events.count("close") == 2
    assert events.count("sync-close") == 2
    events.clear()
    async with Client(
        mcp, elicitation=always({"action": "accept", "content": {"name": "boom"}})
    ) as client:
        failed = await client.call_tool("use", {})
    assert failed.is_error
    assert events.count("close") == 2


async def test_malformed_answers_ask_again_and_extra_keys_are_ignored() -> None:
    mcp = build(keys=[KEY])
    async with Client(mcp, elicitation=always(YES)) as client:
        first = await client.send(
            "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        )
        state = first["requestState"]
        for bad in (
            12345,
            {"action": "accept"},
            {"action": "accept", "content": {"confirm": "x"}},
            {"action": "maybe"},
            None,
        ):
            again = await client.send(
                "tools/call",
                {
                    "name": "order_book",
                    "arguments": {"title": "Neuromancer"},
                    "inputResponses": {"confirm_backorder": bad},
                    "requestState": state,
                },
            )
            assert again["resultType"] == "input_required"
            assert list(again["inputRequests"]) == ["confirm_backorder"]
        done = await client.send(
            "tools/call",
            {
                "name": "order_book",
                "arguments": {"title": "Neuromancer"},
                "inputResponses": {"confirm_backorder": YES, "extra": {"x": 1}},
                "requestState": state,
            },
        )
        with pytest.raises(ProtocolError) as caught:
            await client.send(
                "tools/call",
                {
                    "name": "order_book",
                    "arguments": {"title": "Neuromancer"},
                    "inputResponses": "yes",
                    "requestState": state,
                },
            )
    assert done["content"][0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
    assert caught.value.code == -32602


async def test_an_answer_without_state_is_not_trusted_by_default() -> None:
    mcp = build(keys=[KEY])
    async with Client(mcp, elicitation=always(YES)) as client:
        result = await client.send(
            "tools/call",
            {
                "name": "order_book",
                "arguments": {"title": "Neuromancer"},
                "inputResponses": {"confirm_backorder": YES},
            },
        )
    assert result["resultType"] == "input_required"


async def test_a_changed_question_is_asked_again() -> None:
    a = MCPServer("Shop", keys=[KEY])
    b = MCPServer("Shop", keys=[KEY])

    def register(mcp: MCPServer, wording: str) -> None:
        async def confirm() -> Elicit[Backorder]:
            return Elicit(wording, Backorder)

        @mcp.tool()
        async def order(ok: Annotated[Backorder, Resolve(confirm)]) -> str:
            return f"ok={ok.confirm}"

    register(a, "Order anyway?")
    register(b, "Order anyway, really?")
    async with Client(a, b, elicitation=always(YES)) as client:
        first = await client.send("tools/call", {"name": "order"}, server=0)
        second = await client.send(
            "tools/call",
            {
                "name": "order",
                "inputResponses": {"confirm": YES},
                "requestState": first["requestState"],
            },
            server=1,
        )
    assert second["resultType"] == "input_required"
    assert second["inputRequests"]["confirm"]["params"]["message"] == "Order anyway, really?"


@pytest.mark.parametrize("with_store", [False, True])
async def test_rounds_leave_no_reference_cycles_behind(with_store: bool) -> None:
    """Every round is freed as soon as it is answered: nothing waits for the cycle collector,
    whose passes over a busy server's heap would cost more than the rounds themselves."""
    import gc

    counter: list[int] = []
    mcp = order_server(MemoryStore(), counter) if with_store else build(keys=[KEY])
    async with Client(mcp, elicitation=lambda p: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})  # warm every cache
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(5):
                result = await client.call_tool("order_book", {"title": "Neuromancer"})
                assert (
                    result.content[0]["text"] == "Backordered 'Neuromancer'; it ships in 2-3 weeks."
                )
            await anyio.sleep(0.05)  # the journal writers take their events
            gc.collect()
            left = [type(o).__qualname__ for o in gc.garbage]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert left == []
