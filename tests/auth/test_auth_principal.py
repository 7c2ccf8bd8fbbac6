"""Calls belong to the user who started them: with ``auth``, the principal is the token's issuer
and subject, sealed into every requestState, bound to the spilled state, the journal records
and the 2025-11-25 sessions and streams. Another user's token can neither resume a call, nor
read its stream, answer its questions or cancel it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
import pytest
from pydantic import BaseModel

from engine import Context, Elicit, MCPServer, Resolve
from engine.auth.provider import AccessToken
from engine.auth.settings import AuthSettings
from engine.debug.journal import load_call
from engine.debug.render import timeline
from engine.errors import InvalidRequestState
from engine.state.seal import KeyRing
from engine.store_services.spill import StateSpill
from stores import MemoryStore
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import assert_error, assert_result, call, headers_for, request, text_of

pytestmark = pytest.mark.anyio

ISSUER = "https://auth.example.com/realms/shop"
ANSWER = {"action": "accept", "content": {"name": "Ada"}}


class Name(BaseModel):
    name: str


@dataclass
class Users:
    """A verifier of the tokens handed to the test's users."""

    tokens: dict[str, AccessToken] = field(default_factory=dict)

    def token_for(self, subject: str) -> str:
        token = secrets.token_urlsafe(24)
        self.tokens[token] = AccessToken(
            token=token,
            client_id="shop-app",
            scopes=["shop"],
            subject=subject,
            claims={"iss": ISSUER, "sub": subject},
        )
        return token

    async def verify_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)


@dataclass
class Shop:
    base: str
    store: MemoryStore
    users: Users
    runs: list[str]
    """Who each body run was for."""

    async def post(self, token: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        sent = headers_for(body) | headers | {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(trust_env=False, timeout=20) as http:
            return await http.post(f"{self.base}/mcp", json=body, headers=sent)


def ask_name(ctx: Context) -> Elicit[Name]:
    token = ctx.access_token  # a resolver sees the caller's token too
    assert token is not None
    return Elicit(f"What should I call you, {token.subject}?", Name)


def greeter(runs: list[str], users: Users, store: MemoryStore, **options: Any) -> MCPServer:
    mcp = MCPServer(
        "Greeter",
        keys=[KEY],
        store=store,
        token_verifier=users,
        auth=AuthSettings(issuer_url=ISSUER, required_scopes=["shop"]),
        **options,
    )

    @mcp.tool()
    def greet(name: Annotated[Name, Resolve(ask_name)], ctx: Context) -> str:
        assert ctx.access_token is not None
        runs.append(ctx.access_token.subject or "")
        return f"Hello, {name.name}!"

    return mcp


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    runs: list[str] = []
    users, store = Users(), MemoryStore()
    async with serve_asgi(greeter(runs, users, store).streamable_http_app()) as base:
        yield Shop(base, store, users, runs)


ELICIT = {"elicitation": {}}


def round_two(state: str) -> dict[str, Any]:
    params = {"name": "greet", "inputResponses": {"ask_name": ANSWER}, "requestState": state}
    return request("tools/call", params, capabilities=ELICIT)


async def test_another_users_token_cannot_resume_a_call(shop: Shop) -> None:
    ada, mallory = shop.users.token_for("ada"), shop.users.token_for("mallory")
    first = assert_result(await shop.post(ada, call("greet", {}, capabilities=ELICIT)))
    assert first["inputRequests"]["ask_name"]["params"]["message"] == (
        "What should I call you, ada?"
    )
    state = first["requestState"]
    stolen = await shop.post(mallory, round_two(state))
    assert_error(stolen, 400, -32602)
    assert shop.runs == []  # no body ran for the thief
    done = assert_result(await shop.post(ada, round_two(state)))
    assert text_of(done) == "Hello, Ada!"
    # Nor does the thief get the kept response of the round that ran.
    assert_error(await shop.post(mallory, round_two(state)), 400, -32602)
    assert shop.runs == ["ada"]


async def test_recorded_calls_name_their_principal() -> None:
    runs: list[str] = []
    users, store = Users(), MemoryStore()
    app = greeter(runs, users, store, stamp_results=True).streamable_http_app()
    async with serve_asgi(app) as base:
        shop = Shop(base, store, users, runs)
        ada = users.token_for("ada")
        first = assert_result(await shop.post(ada, call("greet", {}, capabilities=ELICIT)))
        assert_result(await shop.post(ada, round_two(first["requestState"])))
    # The server stopped: its journal writers flushed.
    recorded = await load_call(store, first["_meta"]["engine/call"], keys=[KEY])
    assert recorded.principal == f"{ISSUER} ada"
    assert [r.principal for r in recorded.rounds] == [f"{ISSUER} ada"] * 2
    assert f"  principal {ISSUER} ada" in timeline(recorded).splitlines()
    stored = json.dumps([repr(event) for event in await store.events(recorded.call_id)])
    # Sealed with the payload, not in the clear (the whole principal: three letters alone turn
    # up by chance in hex codes and sealed bytes).
    assert f"{ISSUER} ada" not in stored


async def test_a_spilled_state_opens_only_for_its_principal() -> None:
    spill = StateSpill(MemoryStore(), keys=KeyRing([KEY]), ttl=60)
    ref = await spill.spill("c" * 24, b"the state of ada's call", f"{ISSUER} ada")
    assert await spill.fetch("c" * 24, ref, f"{ISSUER} ada") == b"the state of ada's call"
    with pytest.raises(InvalidRequestState):
        await spill.fetch("c" * 24, ref, f"{ISSUER} mallory")
    with pytest.raises(InvalidRequestState):
        await spill.fetch("c" * 24, ref, None)


async def test_a_large_call_state_spills_and_resumes_for_its_user() -> None:
    runs: list[str] = []
    users, store = Users(), MemoryStore()
    mcp = greeter(runs, users, store, spill_threshold=0)  # every state by reference
    async with serve_asgi(mcp.streamable_http_app()) as base:
        shop = Shop(base, store, users, runs)
        ada, mallory = users.token_for("ada"), users.token_for("mallory")
        first = assert_result(await shop.post(ada, call("greet", {}, capabilities=ELICIT)))
        state = first["requestState"]
        assert_error(await shop.post(mallory, round_two(state)), 400, -32602)
        assert text_of(assert_result(await shop.post(ada, round_two(state)))) == "Hello, Ada!"
    assert runs == ["ada"]


# --- 2025-11-25: a stream is its session's ------------------------------------------------------

LEGACY = {"Accept": "application/json, text/event-stream"}


def legacy(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


async def open_session(shop: Shop, token: str) -> str:
    response = await shop.post(
        token,
        legacy(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {},
            },
        ),
        **LEGACY,
    )
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def test_another_session_cannot_read_a_calls_stream(shop: Shop) -> None:
    ada, mallory = shop.users.token_for("ada"), shop.users.token_for("mallory")
    theirs, mine = await open_session(shop, ada), await open_session(shop, mallory)
    headers = headers_for(legacy("tools/call")) | LEGACY
    async with httpx.AsyncClient(trust_env=False, timeout=20) as http:
        asked = http.stream(
            "POST",
            f"{shop.base}/mcp",
            json=legacy("tools/call", {"name": "greet", "arguments": {}}, id=7),
            headers=headers | {"Authorization": f"Bearer {ada}", "Mcp-Session-Id": theirs},
        )
        async with asked as response:
            lines = response.aiter_lines()
            event_id = None
            async for line in lines:
                if line.startswith("id: ") and not line.endswith(".0"):
                    event_id = line[4:]
                if line.startswith("data: ") and event_id is not None:
                    question = json.loads(line[6:])
                    break
            assert event_id is not None and question["method"] == "elicitation/create"
            peek = await http.get(
                f"{shop.base}/mcp",
                headers={
                    "Authorization": f"Bearer {mallory}",
                    "Mcp-Session-Id": mine,
                    "Last-Event-ID": event_id.rsplit(".", 1)[0] + ".0",
                },
            )
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": ANSWER}
            sent = headers_for(answer) | LEGACY
            forged = await http.post(
                f"{shop.base}/mcp",
                json=answer,
                headers=sent | {"Authorization": f"Bearer {mallory}", "Mcp-Session-Id": theirs},
            )
            answered = await http.post(
                f"{shop.base}/mcp",
                json=answer,
                headers=sent | {"Authorization": f"Bearer {ada}", "Mcp-Session-Id": theirs},
            )
            rest = [line async for line in lines]
    assert peek.status_code == 404  # another session's stream is not found, as an unknown one
    assert "data:" not in peek.text
    assert forged.status_code == 404  # mallory cannot answer on ada's session
    assert answered.status_code == 202
    result = json.loads(next(line for line in rest if line.startswith("data: "))[6:])
    assert result["result"]["content"][0]["text"] == "Hello, Ada!"
    assert shop.runs == ["ada"]
