"""``MCPServer(request_state_security=RequestStateSecurity(...))``: the official way to say how
requestStates are protected, mapped onto this server's keys, ``state_ttl``, ``audience`` and
``principal``, or onto a codec of the operator's own.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from engine import InvalidRequestState, MCPServer, RequestStateSecurity
from engine.scope import RequestScope
from engine.state.codec import CodecRing
from engine.store_services.journal_records import open_rounds
from examples.bookshop import build
from stores import MemoryStore
from tests.conftest import KEY, OTHER_KEY
from tests.state.test_token_security import (
    BACKORDERED,
    FROZEN,
    as_user,
    first_round,
    rejections,
    second_round,
    who,
)

pytestmark = pytest.mark.anyio


def bookshop(security: RequestStateSecurity, **options: Any) -> MCPServer:
    return build(request_state_security=security, **options)


class HexCodec:
    """A codec of the operator's own: AES-GCM under one key, the token in hex after ``hx1.``."""

    prefix = "hx1."

    def __init__(self, key: bytes) -> None:
        self.aead = AESGCM(key)
        self.opened = 0

    def seal(self, payload: bytes) -> str:
        nonce = os.urandom(12)
        return self.prefix + (nonce + self.aead.encrypt(nonce, payload, None)).hex()

    def unseal(self, token: str) -> bytes:
        self.opened += 1
        if not token.startswith(self.prefix):
            raise InvalidRequestState("not an hx1 token")
        try:
            raw = bytes.fromhex(token.removeprefix(self.prefix))
            return self.aead.decrypt(raw[:12], raw[12:], None)
        except (ValueError, InvalidTag):
            raise InvalidRequestState("hx1 seal") from None


DATA_KEY = bytes(range(32))


# --- keys, ttl, audience -------------------------------------------------------------------------


async def test_replicas_given_the_same_keys_resume_each_others_calls() -> None:
    token = await first_round(bookshop(RequestStateSecurity(keys=[KEY])))
    assert token.startswith("s1.")
    assert await second_round(bookshop(RequestStateSecurity(keys=[KEY])), token) == BACKORDERED
    assert await second_round(bookshop(RequestStateSecurity(keys=[OTHER_KEY])), token) == FROZEN


async def test_keys_rotate_as_a_ring_the_first_sealing() -> None:
    token = await first_round(bookshop(RequestStateSecurity(keys=[OTHER_KEY, KEY])))
    assert await second_round(bookshop(RequestStateSecurity(keys=[KEY, OTHER_KEY])), token) == (
        BACKORDERED
    )
    assert await second_round(bookshop(RequestStateSecurity(keys=[KEY])), token) == FROZEN


async def test_an_ephemeral_key_is_this_servers_alone() -> None:
    security = RequestStateSecurity.ephemeral()
    shop = bookshop(security)
    token = await first_round(shop)
    assert await second_round(shop, token) == BACKORDERED
    assert await second_round(bookshop(RequestStateSecurity.ephemeral()), token) == FROZEN
    assert shop.keys is security.keys and shop.keys.ephemeral


def test_ttl_and_audience_become_the_servers_settings() -> None:
    shop = bookshop(RequestStateSecurity(keys=[KEY], ttl=90, audience="shop.example"))
    assert (shop.settings.tokens.state_ttl, shop.settings.tokens.audience) == (90, "shop.example")
    default = bookshop(RequestStateSecurity.ephemeral())
    assert (default.settings.tokens.state_ttl, default.settings.tokens.audience) == (
        600,
        "Bookshop",
    )


def test_a_fractional_ttl_counts_as_the_next_whole_second() -> None:
    assert RequestStateSecurity(keys=[KEY], ttl=0.25).state_ttl == 1
    assert bookshop(RequestStateSecurity(keys=[KEY], ttl=90.5)).settings.tokens.state_ttl == 91


async def test_the_audience_binds_tokens_to_one_service(caplog: pytest.LogCaptureFixture) -> None:
    token = await first_round(bookshop(RequestStateSecurity(keys=[KEY], audience="shop-a")))
    other = bookshop(RequestStateSecurity(keys=[KEY], audience="shop-b"))
    assert await second_round(other, token) == FROZEN
    assert rejections(caplog) == ["request binding: audience"]


# --- what is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize("given", [{}, {"keys": [KEY], "codec": HexCodec(DATA_KEY)}])
def test_exactly_one_of_keys_or_codec(given: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one of keys="):
        RequestStateSecurity(**given)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), True])
def test_ttl_must_be_a_positive_finite_number(ttl: float) -> None:
    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        RequestStateSecurity(keys=[KEY], ttl=ttl)


def test_a_short_key_is_refused_by_its_place_in_the_ring() -> None:
    with pytest.raises(ValueError) as caught:
        RequestStateSecurity(keys=[KEY, b"hunter2"])
    assert str(caught.value) == (
        "keys[1] has 7 bytes; a requestState key needs at least 32 bytes of secret randomness: "
        "generate one with `python -m engine keygen`"
    )


@pytest.mark.parametrize("keys", [[32], [None], KEY])
def test_keys_are_a_list_of_str_or_bytes(keys: Any) -> None:
    with pytest.raises(TypeError):
        RequestStateSecurity(keys=keys)


def test_a_bytearray_key_and_a_named_key_are_taken() -> None:
    security = RequestStateSecurity(keys=[("2026-07", KEY), bytearray(OTHER_KEY.encode())])
    assert security.keys.labels[0] == "2026-07"


def test_a_codec_without_seal_and_unseal_is_refused() -> None:
    with pytest.raises(TypeError, match="seal\\(payload: bytes\\) -> str"):
        RequestStateSecurity(codec=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "option", [{"keys": [KEY]}, {"state_ttl": 60}, {"audience": "x"}, {"principal": who}]
)
def test_the_options_it_stands_for_are_not_given_beside_it(option: dict[str, Any]) -> None:
    (name,) = option
    with pytest.raises(ValueError, match=f"request_state_security and {name}, which it sets"):
        MCPServer("Bookshop", request_state_security=RequestStateSecurity.ephemeral(), **option)


# --- bind_principal ------------------------------------------------------------------------------


async def test_bind_principal_is_the_principal_callback(caplog: pytest.LogCaptureFixture) -> None:
    shop = bookshop(RequestStateSecurity(keys=[KEY], bind_principal=who))
    token = await first_round(shop, headers=as_user("alice"))
    assert await second_round(shop, token, headers=as_user("alice")) == BACKORDERED
    assert await second_round(shop, token, headers=as_user("bob")) == FROZEN
    assert rejections(caplog) == ["principal"]


async def test_without_auth_the_default_binding_binds_nobody() -> None:
    shop = bookshop(RequestStateSecurity(keys=[KEY]))
    assert shop.core.runtime.runner.binder is None
    token = await first_round(shop, headers=as_user("alice"))
    assert await second_round(shop, token, headers=as_user("bob")) == BACKORDERED


def test_bind_principal_none_with_auth_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    from engine.auth.provider import AccessToken
    from engine.auth.settings import AuthSettings

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return None

    auth = AuthSettings(
        issuer_url="https://auth.example", resource_server_url="https://mcp.example/mcp"
    )
    with caplog.at_level(logging.WARNING, logger="engine.seal"):
        shop = MCPServer(
            "Bookshop",
            auth=auth,
            token_verifier=Verifier(),
            request_state_security=RequestStateSecurity(keys=[KEY], bind_principal=None),
        )
    assert shop.core.runtime.runner.binder is None
    assert "bind_principal=None" in caplog.text
    bound = MCPServer(
        "Bookshop",
        auth=auth,
        token_verifier=Verifier(),
        request_state_security=RequestStateSecurity(keys=[KEY]),
    )
    assert bound.core.runtime.runner.binder is not None
    assert bound.core.runtime.runner.principal(RequestScope()) is None  # no token: stdio


# --- a codec of the operator's own -------------------------------------------------------------


async def test_a_codec_seals_the_tokens(caplog: pytest.LogCaptureFixture) -> None:
    codec = HexCodec(DATA_KEY)
    token = await first_round(bookshop(RequestStateSecurity(codec=codec)))
    assert token.startswith("hx1.")
    replica = bookshop(RequestStateSecurity(codec=HexCodec(DATA_KEY)))
    assert await second_round(replica, token) == BACKORDERED

    tampered = token[:-2] + ("00" if not token.endswith("00") else "11")
    assert await second_round(replica, tampered) == FROZEN
    other_key = bookshop(RequestStateSecurity(codec=HexCodec(bytes(32))))
    assert await second_round(other_key, token) == FROZEN
    assert rejections(caplog) == ["hx1 seal", "hx1 seal"]


async def test_claims_are_still_checked_around_a_codec(caplog: pytest.LogCaptureFixture) -> None:
    token = await first_round(bookshop(RequestStateSecurity(codec=HexCodec(DATA_KEY))))
    elsewhere = bookshop(RequestStateSecurity(codec=HexCodec(DATA_KEY), audience="warehouse"))
    assert await second_round(elsewhere, token) == FROZEN
    assert rejections(caplog) == ["request binding: audience"]


async def test_a_codec_that_crashes_is_one_more_invalid_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(HexCodec):
        def unseal(self, token: str) -> bytes:
            raise RuntimeError("the HSM is unplugged")

    token = await first_round(bookshop(RequestStateSecurity(codec=HexCodec(DATA_KEY))))
    assert await second_round(bookshop(RequestStateSecurity(codec=Broken(DATA_KEY))), token) == (
        FROZEN
    )
    assert rejections(caplog) == ["codec error"]


async def test_an_oversized_token_never_reaches_the_codec() -> None:
    codec = HexCodec(DATA_KEY)
    shop = bookshop(RequestStateSecurity(codec=codec), max_token_chars=1000)
    assert await second_round(shop, "hx1." + "00" * 1000) == FROZEN
    assert codec.opened == 0


def test_what_the_store_keeps_is_sealed_by_the_codec_for_one_purpose() -> None:
    ring = CodecRing(HexCodec(DATA_KEY))
    record = ring.seal_record(b"a journal payload", b"engine/journal")
    assert record.startswith(b"hx1.") and b"journal payload" not in record
    assert ring.open_record(record, b"engine/journal") == b"a journal payload"
    with pytest.raises(InvalidRequestState) as caught:
        ring.open_record(record, b"engine/kept-response")
    assert caught.value.reason == "seal"


async def test_a_server_with_a_codec_and_a_store_journals_its_calls() -> None:
    store = MemoryStore()
    codec = HexCodec(DATA_KEY)
    shop = bookshop(RequestStateSecurity(codec=codec), store=store)
    async with shop.running():
        token = await first_round(shop)
        assert await second_round(shop, token) == BACKORDERED
        services = shop.core.runtime.store_services
        assert services is not None
        await services.flush()
    (call,) = await store.calls()
    events = await store.events(call.call_id)
    assert all(e["sealed"].startswith(b"hx1.") for e in events)
    opened = [r for e in events for r in open_rounds(e, CodecRing(codec))]
    assert [r["round"] for r in opened] == [1, 2]
    assert opened[1]["answers"] == {
        "confirm_backorder": {"action": "accept", "content": {"confirm": True}}
    }


def test_keys_that_are_not_a_list_say_what_they_must_be() -> None:
    with pytest.raises(TypeError, match=r"keys must be a list of secrets .* got int: generate"):
        MCPServer("Bookshop", keys=123)  # type: ignore[arg-type]
