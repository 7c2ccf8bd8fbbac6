"""Every byte of a round-2 requestState, changed in turn, is refused by a served replica: in
its sealed form (the state carried inline) and in its spilled form (the state in the store, the
token a sealed reference). No tampered token runs the body or uses up the round: the untouched
token still completes the call afterwards, once."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve
from stores import SQLiteStore
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import assert_error, assert_result, post, request, text_of

pytestmark = pytest.mark.anyio

PREFIX = "s1."
CAPABILITIES = {"elicitation": {"form": {}}}


class Confirm(BaseModel):
    confirm: bool
    note: str = ""


class Address(BaseModel):
    street: str


def confirm_shipping(title: str) -> Elicit[Confirm]:
    return Elicit(f"Ship {title}?", Confirm)


def ask_address(ok: Annotated[Confirm, Resolve(confirm_shipping)]) -> Elicit[Address]:
    return Elicit("Where to?", Address)


def warehouse(shipped: list[str], **options: Any) -> MCPServer:
    mcp = MCPServer("Warehouse", keys=[KEY], **options)

    @mcp.tool()
    async def ship(
        title: str,
        ok: Annotated[Confirm, Resolve(confirm_shipping)],
        to: Annotated[Address, Resolve(ask_address)],
    ) -> str:
        """Ship a book once confirmed, to the address asked for."""
        shipped.append(title)
        return f"Shipped {title} to {to.street}"

    return mcp


def rounds(state: str | None, answers: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "ship", "arguments": {"title": "Dune"}}
    if state is not None:
        params |= {"inputResponses": answers, "requestState": state}
    return request("tools/call", params, capabilities=CAPABILITIES)


def accepted(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def sealed_bytes(token: str) -> bytes:
    body = token.removeprefix(PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def token_of(raw: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


async def round_two_token(http: httpx.AsyncClient, note: str) -> str:
    """Round 1 asks to confirm; round 2, given the answer (with ``note``), asks for the address:
    round 2's requestState, which carries round 1's answer."""
    first = assert_result(await post(http, rounds(None, {})))
    assert set(first["inputRequests"]) == {"confirm_shipping"}
    yes = {"confirm_shipping": accepted({"confirm": True, "note": note})}
    second = assert_result(await post(http, rounds(first["requestState"], yes)))
    assert second["resultType"] == "input_required"
    assert set(second["inputRequests"]) == {"ask_address"}
    token: str = second["requestState"]
    return token


async def sweep(http: httpx.AsyncClient, token: str, answers: dict[str, Any]) -> list[str]:
    """The token with each of its sealed bytes changed in turn (a different bit each time),
    sent as round 3; the mutants that were not refused."""
    raw = sealed_bytes(token)
    assert token_of(raw) == token
    let_through = []
    for i in range(len(raw)):
        mutant = token_of(raw[:i] + bytes([raw[i] ^ (1 << i % 8)]) + raw[i + 1 :])
        response = await post(http, rounds(mutant, answers))
        if response.status_code != 400:
            let_through.append(mutant)
            continue
        error = assert_error(response, 400, -32602)
        if error["message"] != "Invalid or expired requestState":
            let_through.append(mutant)
    return let_through


@pytest.mark.parametrize("form", ["sealed", "spilled"])
async def test_every_bit_of_a_round_two_token_is_tamper_proof(form: str, tmp_path: Path) -> None:
    shipped: list[str] = []
    # A long note makes round 2's state too large to carry inline: it goes to the store (the
    # embedded default) and the token is a sealed reference to it.
    note = "gift wrap " * 1_000 if form == "spilled" else "gift wrap"
    mcp = warehouse(shipped, store=SQLiteStore(tmp_path / "engine.db"))
    answers = {"ask_address": accepted({"street": "1 Long Road"})}
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=30) as http,
    ):
        token = await round_two_token(http, note)
        assert (len(token) < len(note)) == (form == "spilled")
        let_through = await sweep(http, token, answers)
        assert shipped == []
        done = assert_result(await post(http, rounds(token, answers)))
    assert let_through == []
    assert text_of(done) == "Shipped Dune to 1 Long Road"
    assert shipped == ["Dune"]
