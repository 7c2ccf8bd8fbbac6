"""What the store services' tests share: the bookshop's ``order_book`` call, counted."""

from typing import Any

import msgpack

from engine import MCPServer
from engine.state.seal import KeyRing
from engine.testing import Client
from stores import Store
from tests.conftest import KEY

YES = {"action": "accept", "content": {"confirm": True}}


def order_server(store: Store | str, counter: list[int], **options: Any) -> MCPServer:
    from examples.bookshop import build

    mcp = build(keys=[KEY], store=store, **options)
    original = mcp.tools["order_book"].signature.fn

    async def counting(**kwargs: Any) -> str:
        counter.append(1)
        return await original(**kwargs)

    mcp.tools["order_book"].signature.fn = counting
    return mcp


async def first_round(client: Client) -> dict[str, Any]:
    return await client.send(
        "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
    )


def retry(state: str, answer: dict[str, Any] = YES) -> dict[str, Any]:
    return {
        "name": "order_book",
        "arguments": {"title": "Neuromancer"},
        "inputResponses": {"confirm_backorder": answer},
        "requestState": state,
    }


def round_of(mcp: MCPServer, state: str) -> tuple[str, int, bytes]:
    """The store's key of the round ``state`` was minted for, with the answers ``retry`` sends."""
    from engine.state.claims import Claims
    from engine.store_services.single_use import responses_fingerprint

    claims = Claims.decode(mcp.keys.open(state, mcp.settings.tokens.max_token_chars))
    return claims.call_id.hex(), claims.round_no, responses_fingerprint({"confirm_backorder": YES})


def v2_record(event: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """A round as the journal stored it before records held whole calls (version 2): its
    listing fields in the clear, its payload packed and sealed alone, uncompressed."""
    payload_fields = ("arguments", "questions", "answers", "checkpoints", "response", "principal")
    stored = {k: v for k, v in event.items() if k not in payload_fields}
    payload = {k: event[k] for k in payload_fields if k in event}
    stored["v"] = 2
    stored["sealed"] = keys.seal_record(
        msgpack.packb(payload, use_bin_type=True), b"engine/journal/v2"
    )
    return stored
