"""A handler that asks the client for input itself: it returns an ``InputRequiredResult``, and on
the retry reads ``ctx.input_responses`` and ``ctx.request_state``.

The handler's own string is sealed into the server's ``requestState``: a client can neither read
it nor change it, and a retry is bound to the call like any other round.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

import mcp_types
import pytest
from pydantic import BaseModel

from engine import (
    Context,
    Elicit,
    InvalidSignature,
    MCPServer,
    Resolve,
    returns_input_required,
)
from engine.debug.journal import load_call
from engine.testing import Client, ProtocolError, inspect_request_state, replay_call
from engine.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
)
from stores import MemoryStore
from tests.conftest import KEY
from tests.http_helpers import asgi_client
from tests.protocol.test_legacy import initialize

pytestmark = pytest.mark.anyio

ASK_REGION = ElicitRequest(
    params=ElicitRequestFormParams(
        message="Which region?",
        requested_schema={"type": "object", "properties": {"region": {"type": "string"}}},
    )
)
EU = {"action": "accept", "content": {"region": "eu-west-1"}}


def eu(params: dict[str, Any]) -> dict[str, Any]:
    return EU


async def one_round(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    responses: dict[str, Any] | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    """One ``tools/call`` as sent, its result as received."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return await client.send("tools/call", params)


def provisioner(**options: Any) -> tuple[MCPServer, list[tuple[Any, Any]]]:
    """A tool that asks for a region itself, and what it saw on each round."""
    mcp = MCPServer("Provisioner", keys=[KEY], **options)
    seen: list[tuple[Any, Any]] = []

    @mcp.tool()
    async def provision(name: str, ctx: Context) -> str | InputRequiredResult:
        seen.append((ctx.input_responses, ctx.request_state))
        answer = (ctx.input_responses or {}).get("region")
        if not isinstance(answer, ElicitResult) or answer.content is None:
            return InputRequiredResult(
                input_requests={"region": ASK_REGION}, request_state=f"provision:{name}"
            )
        return f"Provisioned {name!r} in {answer.content['region']}."

    return mcp, seen


async def test_the_first_round_asks_and_the_retry_reads_the_answer_and_the_state() -> None:
    mcp, seen = provisioner()
    async with Client(mcp, elicitation=eu) as client:
        result = await client.call_tool("provision", {"name": "orders"})
    assert result.text == "Provisioned 'orders' in eu-west-1."
    first = result.rounds[0]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"region": ASK_REGION.to_wire()}
    assert seen[0] == (None, None)
    answers, state = seen[1]
    assert answers == {"region": ElicitResult(action="accept", content={"region": "eu-west-1"})}
    assert state == "provision:orders"


async def test_the_handlers_string_is_sealed_never_sent_as_it_is() -> None:
    mcp, _ = provisioner()
    async with Client(mcp) as client:
        first = await one_round(client, "provision", {"name": "orders"})
    token = first["requestState"]
    assert "provision:orders" not in token
    assert b"provision:orders" not in base64.urlsafe_b64decode(token[3:] + "==")
    opened = inspect_request_state(mcp, token)["state"]
    assert opened["handler_request_state"] == "provision:orders"
    assert opened["handler_asked"] == {"region": "elicitation/create"}


async def test_a_token_is_bound_to_its_call_and_cannot_be_forged() -> None:
    mcp, seen = provisioner()
    async with Client(mcp) as client:
        first = await one_round(client, "provision", {"name": "orders"})
        token = first["requestState"]
        for arguments, state in (
            ({"name": "billing"}, token),  # another call's arguments
            ({"name": "orders"}, token[:-2] + ("AA" if token[-2:] != "AA" else "BB")),
        ):
            with pytest.raises(ProtocolError) as refused:
                await one_round(client, "provision", arguments, EU_RESPONSES, state)
            assert (refused.value.code, refused.value.message) == (
                -32602,
                "Invalid or expired requestState",
            )
    assert len(seen) == 1  # the handler never ran with a forged or swapped state


EU_RESPONSES = {"region": EU}


async def test_only_answers_to_what_the_handler_asked_reach_it() -> None:
    mcp, seen = provisioner()
    async with Client(mcp) as client:
        first = await one_round(client, "provision", {"name": "orders"})
        responses = {
            "region": {"roots": []},  # not an answer to a form
            "admin": {"action": "accept", "content": {"ok": True}},  # never asked
        }
        again = await one_round(
            client, "provision", {"name": "orders"}, responses, first["requestState"]
        )
    assert seen[1] == ({}, "provision:orders")
    assert again["resultType"] == "input_required"  # it asks again, as it was written to


async def test_answers_without_the_requestState_are_not_taken() -> None:
    mcp, seen = provisioner()
    async with Client(mcp) as client:
        result = await one_round(client, "provision", {"name": "orders"}, EU_RESPONSES)
    assert result["resultType"] == "input_required"
    assert seen == [(None, None)]


async def test_a_dict_of_the_wire_form_asks_and_a_plain_dict_is_a_result() -> None:
    mcp = MCPServer("Dicts", keys=[KEY])

    @mcp.tool()
    def roots(ctx: Context) -> dict[str, Any]:
        if ctx.input_responses is None:
            asking = {"r": {"method": "roots/list"}}
            return {"resultType": "input_required", "inputRequests": asking}
        answer = ctx.input_responses["r"]
        assert isinstance(answer, ListRootsResult)
        return {"roots": [root.uri for root in answer.roots]}

    listed = {"roots": [{"uri": "file:///work"}]}
    async with Client(mcp, roots=lambda params: listed) as client:
        result = await client.call_tool("roots")
    assert result.rounds[0]["inputRequests"] == {"r": {"method": "roots/list"}}
    assert result.structured_content == {"roots": ["file:///work"]}


async def test_a_prompt_and_a_resource_template_ask_the_same_way() -> None:
    mcp = MCPServer("Briefing", keys=[KEY])

    @mcp.prompt()
    def briefing(ctx: Context) -> str | InputRequiredResult:
        answer = (ctx.input_responses or {}).get("audience")
        if not isinstance(answer, ElicitResult) or answer.content is None:
            return InputRequiredResult(input_requests={"audience": ASK_REGION})
        return f"Write a briefing for {answer.content['region']}."

    @mcp.resource("notes://{topic}")
    def notes(topic: str, ctx: Context) -> str | InputRequiredResult:
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"who": ASK_REGION}, request_state=topic)
        return f"{ctx.request_state} notes for {ctx.input_responses['who'].content['region']}"

    async with Client(mcp, elicitation=eu) as client:
        prompt = await client.get_prompt("briefing")
        read = await client.read_resource("notes://databases")
    assert prompt.raw["messages"][0]["content"]["text"] == "Write a briefing for eu-west-1."
    assert read.raw["contents"][0]["text"] == "databases notes for eu-west-1"
    assert [r["resultType"] for r in read.rounds] == ["input_required", "complete"]


async def test_official_models_are_taken_and_answers_come_back_as_the_official_ones() -> None:
    mcp = MCPServer("Ported", keys=[KEY])

    @mcp.tool()
    async def greet(ctx: Context) -> str | mcp_types.InputRequiredResult:
        who = (ctx.input_responses or {}).get("who")
        if isinstance(who, mcp_types.ElicitResult) and who.content is not None:
            return f"Hello, {who.content['name']}!"
        form = mcp_types.ElicitRequestFormParams(message="Name?", requested_schema={})
        return mcp_types.InputRequiredResult(
            input_requests={"who": mcp_types.ElicitRequest(params=form)}, request_state="r1"
        )

    async with Client(
        mcp, elicitation=lambda params: {"action": "accept", "content": {"name": "Ada"}}
    ) as client:
        result = await client.call_tool("greet")
    assert result.text == "Hello, Ada!"
    assert mcp.tools["greet"].listing["outputSchema"]["properties"]["result"] == {
        "title": "Result",
        "type": "string",
    }


async def test_ctx_once_runs_once_across_the_handlers_own_rounds() -> None:
    mcp = MCPServer("Charges", keys=[KEY])
    charges: list[int] = []

    @mcp.tool()
    async def charge(amount: int, ctx: Context) -> str | InputRequiredResult:
        receipt = await ctx.once(lambda: charges.append(amount) or f"C-{len(charges)}")
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"region": ASK_REGION})
        return f"{receipt} in {ctx.input_responses['region'].content['region']}"

    async with Client(mcp, elicitation=eu) as client:
        result = await client.call_tool("charge", {"amount": 5})
    assert result.text == "C-1 in eu-west-1"
    assert charges == [5]


# --- one channel per call ---------------------------------------------------------------------


class Login(BaseModel):
    username: str


def who() -> Elicit[Login]:
    return Elicit("Who?", Login)


def test_resolvers_and_an_input_required_return_are_refused_at_registration() -> None:
    mcp = MCPServer("Channels", keys=[KEY])

    async def both(login: Annotated[Login, Resolve(who)]) -> str | InputRequiredResult:
        return login.username

    with pytest.raises(InvalidSignature, match=r"combines Resolve\(\.\.\.\) parameters"):
        mcp.tool()(both)
    assert returns_input_required(both)
    assert not returns_input_required(who)


async def test_an_undeclared_input_required_return_with_resolvers_fails_the_call() -> None:
    mcp = MCPServer("Channels", keys=[KEY])

    @mcp.tool()
    async def sneaky(login: Annotated[Login, Resolve(who)]):  # type: ignore[no-untyped-def]
        return InputRequiredResult(input_requests={"r": ListRootsRequest()})

    yes = {"action": "accept", "content": {"username": "ada"}}
    async with Client(mcp, elicitation=lambda params: yes) as client:
        result = await client.call_tool("sneaky")
    assert result.is_error
    assert result.text.startswith("Error executing tool sneaky")


async def test_a_body_that_asked_through_ctx_cannot_then_ask_for_itself() -> None:
    mcp = MCPServer("Channels", keys=[KEY])

    @mcp.tool()
    async def mixed(ctx: Context) -> str | InputRequiredResult:
        await ctx.elicit("Who?", Login)
        return InputRequiredResult(input_requests={"r": ListRootsRequest()})

    @mcp.tool()
    async def reversed_(ctx: Context) -> str | InputRequiredResult:
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"r": ListRootsRequest()})
        await ctx.elicit("Who?", Login)
        return "never"

    yes = {"action": "accept", "content": {"username": "ada"}}
    async with Client(
        mcp, elicitation=lambda params: yes, roots=lambda params: {"roots": []}
    ) as client:
        first = await client.call_tool("mixed")
        second = await client.call_tool("reversed_")
    assert first.is_error and second.is_error


# --- the other era, tasks, the journal --------------------------------------------------------


async def test_a_2025_11_25_client_gets_an_internal_error_saying_why() -> None:
    mcp, _ = provisioner()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "provision", "arguments": {"name": "orders"}},
    }
    app = mcp.streamable_http_app()
    async with mcp.running(), asgi_client(app) as http:
        opened = await http.post("/mcp", json=initialize(), headers=headers)
        session = {**headers, "MCP-Session-Id": opened.headers["mcp-session-id"]}
        refused = await http.post("/mcp", json=call, headers=session)
    error = refused.json()["error"]
    assert (error["code"], error["message"]) == (-32603, "Handler returned an invalid result")
    assert "protocol 2025-11-25 has no result for" in error["data"]["reason"]


async def test_a_task_body_that_returns_input_requests_completes_with_an_error() -> None:
    mcp = MCPServer("Jobs", keys=[KEY], store=MemoryStore(), task_poll_interval=0.01)

    @mcp.tool(task=True)
    async def job(ctx: Context) -> str | InputRequiredResult:
        return InputRequiredResult(input_requests={"region": ASK_REGION})

    async with Client(mcp, tasks=True) as client:
        result = await client.call_tool("job")
    assert result.task is not None and result.task["status"] == "completed"
    assert result.is_error
    assert "which a task cannot carry" in result.text


async def test_the_rounds_are_journaled_and_the_call_replays() -> None:
    store = MemoryStore()
    mcp, _ = provisioner(store=store, journal_arguments=True)
    async with Client(mcp, elicitation=eu) as client:
        await client.call_tool("provision", {"name": "orders"})
    [summary] = await store.calls(limit=1)
    call = await load_call(store, summary.call_id, keys=[KEY])
    assert [r.kind for r in call.rounds] == ["input_required", "complete"]
    assert call.rounds[0].questions == {"region": ASK_REGION.to_wire()}
    assert call.rounds[1].answers == {"region": EU}

    report = await replay_call(mcp, call)
    assert report.ok, report.render()

    changed = MCPServer("Provisioner", keys=[KEY])

    @changed.tool()
    async def provision(name: str, ctx: Context) -> str | InputRequiredResult:
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"zone": ASK_REGION})
        return "done"

    diverged = await replay_call(changed, call)
    assert diverged.divergence is not None
    assert (diverged.divergence.round, diverged.divergence.key) == (1, "region")
