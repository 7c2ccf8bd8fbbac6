"""A requestState is opaque, tamper-proof and bound to the request that minted it.

Every misuse (a flipped byte, a truncated or oversized token, another key, another audience, tool,
method, argument set or principal, an expired token) gets the same frozen error, and the reason
goes to the server log only, never the token, a key or the sealed plaintext.
"""

from __future__ import annotations

import base64
import binascii
import random
import string
import time
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import engine.calls.runner
import engine.state.claims
import engine.state.seal
from engine import Elicit, MCPServer, Resolve
from engine.errors import InvalidRequestState
from engine.scope import RequestScope
from engine.state.seal import KeyRing, KeySpec
from engine.testing import Client, ProtocolError
from examples.bookshop import build
from tests.conftest import KEY, OTHER_KEY

pytestmark = pytest.mark.anyio

ORDER = {"name": "order_book", "arguments": {"title": "Neuromancer"}}
ACCEPT = {"confirm_backorder": {"action": "accept", "content": {"confirm": True}}}
BACKORDERED = "Backordered 'Neuromancer'; it ships in 2-3 weeks."
FROZEN = (-32602, "Invalid or expired requestState", {"reason": "invalid_request_state"}, 400)
"""The one error for every unusable requestState: (code, message, data, HTTP status hint)."""

PREFIX = "s1."
BASE64URL = string.ascii_letters + string.digits + "-_"
SDK_TOKEN_CHARS = 365
"""The official SDK's requestState for the same bookshop round."""


# --- how a client drives the two rounds --------------------------------------------------------


def connect(*servers: MCPServer, headers: dict[str, str] | None = None) -> Client:
    return Client(*servers, capabilities={"elicitation": {"form": {}}}, headers=headers)


def summary(result: dict[str, Any]) -> str:
    """What a completed round said, or ``input_required`` when it asked again."""
    if result["resultType"] == "input_required":
        return "input_required"
    blocks = result.get("content") or [m["content"] for m in result.get("messages", [])]
    return "".join(block.get("text", "") for block in blocks)


async def first_round(
    server: MCPServer,
    params: dict[str, Any] = ORDER,
    *,
    method: str = "tools/call",
    headers: dict[str, str] | None = None,
) -> str:
    """Start a call that asks a question; its round-1 requestState."""
    async with connect(server, headers=headers) as client:
        result = await client.send(method, params)
    assert result["resultType"] == "input_required"
    token: str = result["requestState"]
    return token


async def resume(
    client: Client,
    request_state: Any,
    params: dict[str, Any] = ORDER,
    answers: dict[str, Any] = ACCEPT,
    method: str = "tools/call",
) -> Any:
    """Round 2 with a valid answer: the completed text, or the error as a :data:`FROZEN` tuple."""
    try:
        result = await client.send(
            method, {**params, "inputResponses": answers, "requestState": request_state}
        )
    except ProtocolError as error:
        return (error.code, error.message, error.data, error.status)
    return summary(result)


async def second_round(
    server: MCPServer, request_state: Any, *args: Any, headers: dict[str, str] | None = None
) -> Any:
    async with connect(server, headers=headers) as client:
        return await resume(client, request_state, *args)


def rejections(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The reasons the server logged for the requestStates it rejected."""
    lead = "requestState rejected on "
    messages = (record.getMessage() for record in caplog.records)
    return [m.split(": ", 1)[1] for m in messages if m.startswith(lead)]


def sealed_bytes(token: str) -> bytes:
    body = token.removeprefix(PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def token_of(raw: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def lenient_bytes(token: str) -> bytes:
    """What a forgiving base64 decoder (padding, ``+/``, whitespace) makes of a token."""
    body = "".join(token.removeprefix(PREFIX).split()).rstrip("=")
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def bookshop(*keys: KeySpec, **options: Any) -> MCPServer:
    """The docs' bookshop, whose ``order_book`` asks before backordering Neuromancer."""
    return build(keys=list(keys), **options)  # type: ignore[arg-type]


@pytest.fixture
def shop() -> MCPServer:
    return bookshop(KEY)


@pytest.fixture
async def token(shop: MCPServer) -> str:
    return await first_round(shop)


class Clock:
    """The engine's ``time`` module with a wall clock set by hand (the rest is the real one)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock(1_800_000_000.0)
    monkeypatch.setattr(engine.calls.runner, "time", clock)
    monkeypatch.setattr(engine.state.claims, "time", clock)
    return clock


# --- a shelf whose two tools and one prompt ask the very same question --------------------------


class Confirm(BaseModel):
    confirm: bool


async def confirm(title: str) -> Elicit[Confirm]:
    return Elicit(f"Really remove {title!r} from the shelf?", Confirm)


def shelf(name: str = "Shelf", **options: Any) -> MCPServer:
    """Same question key, same fingerprint everywhere: only the binding tells tokens apart."""
    mcp = MCPServer(name, keys=[KEY], **options)

    @mcp.tool()
    async def delete_book(title: str, ok: Annotated[Confirm, Resolve(confirm)]) -> str:
        return f"Deleted {title!r}." if ok.confirm else "Kept."

    @mcp.tool()
    async def archive_book(title: str, ok: Annotated[Confirm, Resolve(confirm)]) -> str:
        return f"Archived {title!r}." if ok.confirm else "Kept."

    @mcp.prompt(name="delete_book")
    async def delete_book_prompt(title: str, ok: Annotated[Confirm, Resolve(confirm)]) -> str:
        return f"Draft a note about deleting {title!r}."

    return mcp


DELETE = {"name": "delete_book", "arguments": {"title": "Dune"}}
ARCHIVE = {"name": "archive_book", "arguments": {"title": "Dune"}}
CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}


# --- the frozen error --------------------------------------------------------------------------


async def test_the_untouched_token_completes_the_call(shop: MCPServer, token: str) -> None:
    assert await second_round(shop, token) == BACKORDERED


async def test_a_rejected_request_state_gets_the_one_frozen_error(
    shop: MCPServer, token: str
) -> None:
    async with connect(shop) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.send(
                "tools/call", {**ORDER, "inputResponses": ACCEPT, "requestState": token + "x"}
            )
    error = caught.value
    assert error.code == -32602
    assert error.message == "Invalid or expired requestState"
    assert error.data == {"reason": "invalid_request_state"}
    assert error.status == 400


# --- tampering ---------------------------------------------------------------------------------


async def test_every_character_substitution_is_rejected(
    shop: MCPServer, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    mutants = [
        token[:i] + other + token[i + 1 :]
        for i, original in enumerate(token)
        for other in BASE64URL
        if other != original
    ]
    async with connect(shop) as client:
        accepted = [m for m in mutants if await resume(client, m) != FROZEN]
        assert await resume(client, token) == BACKORDERED
    assert accepted == []
    assert set(rejections(caplog)) == {"malformed", "unknown key", "seal"}


async def test_every_bit_flip_of_the_sealed_bytes_is_rejected(
    shop: MCPServer, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    raw = sealed_bytes(token)
    assert token_of(raw) == token
    mutants = [
        token_of(raw[:i] + bytes([raw[i] ^ (1 << bit)]) + raw[i + 1 :])
        for i in range(len(raw))
        for bit in range(8)
    ]
    async with connect(shop) as client:
        accepted = [m for m in mutants if await resume(client, m) != FROZEN]
    assert accepted == []
    # The first four bytes name the key; everything after them is authenticated by AES-GCM.
    assert rejections(caplog) == ["unknown key"] * 32 + ["seal"] * (len(mutants) - 32)


async def test_every_truncation_is_rejected(shop: MCPServer, token: str) -> None:
    async with connect(shop) as client:
        accepted = [n for n in range(len(token)) if await resume(client, token[:n]) != FROZEN]
    assert accepted == []


@pytest.mark.parametrize(
    ("mangle", "reasons"),
    [
        # Where the suffix lands decides whether base64 or AES-GCM notices first.
        pytest.param(lambda t: t + "-TAMPERED", {"seal", "malformed"}, id="suffix"),
        pytest.param(lambda t: "", {"malformed"}, id="empty"),
        pytest.param(lambda t: "s2." + t[3:], {"malformed"}, id="unknown-format-prefix"),
        pytest.param(lambda t: "S1." + t[3:], {"malformed"}, id="upper-case-prefix"),
        pytest.param(lambda t: t[3:], {"malformed"}, id="no-prefix"),
        pytest.param(lambda t: t[:10] + "é" + t[11:], {"malformed"}, id="non-ascii"),
        pytest.param(lambda t: t + "A" * 70_000, {"oversized"}, id="huge"),
        pytest.param(lambda t: 42, {"non-string requestState"}, id="number"),
        pytest.param(lambda t: True, {"non-string requestState"}, id="boolean"),
        pytest.param(lambda t: [t], {"non-string requestState"}, id="list"),
        pytest.param(lambda t: {"requestState": t}, {"non-string requestState"}, id="object"),
    ],
)
async def test_a_malformed_request_state_is_rejected(
    shop: MCPServer, token: str, mangle: Any, reasons: set[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert await second_round(shop, mangle(token)) == FROZEN
    [reason] = rejections(caplog)
    assert reason in reasons


@pytest.mark.parametrize(
    "alias",
    [
        pytest.param(lambda t: t + "=", id="padded"),
        pytest.param(lambda t: t + "==", id="double-padded"),
        pytest.param(lambda t: t[:40] + "\n" + t[40:], id="line-wrapped"),
        pytest.param(lambda t: t[:40] + " " + t[40:], id="space"),
    ],
)
async def test_non_canonical_spellings_of_the_same_bytes_are_rejected(
    shop: MCPServer, token: str, alias: Any, caplog: pytest.LogCaptureFixture
) -> None:
    spelled = alias(token)
    assert lenient_bytes(spelled) == sealed_bytes(token)
    assert await second_round(shop, spelled) == FROZEN
    assert rejections(caplog) == ["malformed"]


@pytest.mark.parametrize("size", [2, 3], ids=["4-spare-bits", "2-spare-bits"])
def test_a_token_with_its_spare_bits_set_is_malformed(size: int) -> None:
    ring = KeyRing([KEY])
    token = ring.seal(b"x" * size)  # 34 or 35 sealed bytes: the last character has spare bits
    alias = token[:-1] + BASE64URL[BASE64URL.index(token[-1]) ^ 1]
    assert lenient_bytes(alias) == sealed_bytes(token)
    assert ring.open(token, 1000) == b"x" * size
    with pytest.raises(InvalidRequestState) as caught:
        ring.open(alias, 1000)
    assert caught.value.reason == "malformed"


def test_exactly_the_canonical_spellings_decode() -> None:
    """Whatever a client sends, the token decoder takes it iff it is the canonical base64url
    (unpadded) of the bytes it decodes to."""
    rng = random.Random(7)
    alphabet = BASE64URL + "+/= \n*é"
    for _ in range(20_000):
        text = base64.urlsafe_b64encode(rng.randbytes(rng.randrange(0, 24))).decode().rstrip("=")
        for _ in range(rng.randrange(0, 3)):
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(alphabet) + text[at + 1 :]
        decoded = engine.state.seal._b64decode(text)
        try:
            canonical = (
                base64.urlsafe_b64encode(
                    base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
                )
                .decode()
                .rstrip("=")
                == text
            )
        except (binascii.Error, ValueError):
            canonical = False
        assert (decoded is not None) == canonical, text


async def test_the_standard_base64_alphabet_is_rejected(
    shop: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = [await first_round(shop) for _ in range(20)]
    token = next(t for t in tokens if "-" in t or "_" in t)
    standard = token.translate(str.maketrans("-_", "+/"))
    assert lenient_bytes(standard) == sealed_bytes(token)
    assert await second_round(shop, standard) == FROZEN
    assert rejections(caplog) == ["malformed"]


async def test_a_token_over_max_token_chars_is_rejected_unopened(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await second_round(bookshop(KEY, max_token_chars=len(token)), token) == BACKORDERED
    assert await second_round(bookshop(KEY, max_token_chars=len(token) - 1), token) == FROZEN
    assert rejections(caplog) == ["oversized"]


async def test_swapping_the_key_id_does_not_move_a_token_to_another_key(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    both = bookshop(KEY, OTHER_KEY)
    other_kid = sealed_bytes(await first_round(bookshop(OTHER_KEY)))[:4]
    swapped = token_of(other_kid + sealed_bytes(token)[4:])
    assert await second_round(both, swapped) == FROZEN
    assert rejections(caplog) == ["seal"]


# --- keys --------------------------------------------------------------------------------------


async def test_a_server_with_other_keys_rejects_the_token(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await second_round(bookshop(OTHER_KEY), token) == FROZEN
    assert rejections(caplog) == ["unknown key"]


async def test_keys_rotate_in_three_phases_without_breaking_calls_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old, new = KEY, OTHER_KEY
    before = bookshop(old)
    opening = bookshop(old, new)  # phase 1: every replica learns to open the new key
    sealing = bookshop(new, old)  # phase 2: the new key seals, the old one still opens
    after = bookshop(new)  # phase 3, one TTL later: the old key is retired

    old_token = await first_round(before)
    new_token = await first_round(sealing)
    assert sealed_bytes(await first_round(opening))[:4] == sealed_bytes(old_token)[:4]
    assert sealed_bytes(new_token)[:4] != sealed_bytes(old_token)[:4]

    for server in (opening, sealing):
        assert await second_round(server, old_token) == BACKORDERED
        assert await second_round(server, new_token) == BACKORDERED
    assert await second_round(after, new_token) == BACKORDERED
    assert await second_round(after, old_token) == FROZEN
    assert rejections(caplog) == ["unknown key"]


def test_a_key_ring_refuses_the_same_key_twice() -> None:
    with pytest.raises(ValueError, match="Duplicate key"):
        KeyRing([KEY, KEY])
    with pytest.raises(ValueError, match="Duplicate key"):
        KeyRing([("k2026", KEY), ("k2026", OTHER_KEY)])


@pytest.mark.parametrize(
    "spec", ["x" * 31, b"x" * 31, ("k2026", "too short"), ""], ids=["str", "bytes", "id", "empty"]
)
def test_a_short_secret_is_refused_with_a_hint_to_generate_one(spec: Any) -> None:
    with pytest.raises(ValueError, match=r"at least 32 bytes.*`python -m engine keygen`"):
        KeyRing([spec])
    with pytest.raises(ValueError, match="python -m engine keygen"):
        bookshop(KEY, spec)


def test_a_bad_secret_is_named_by_its_place_in_the_ring() -> None:
    with pytest.raises(ValueError, match=r"^keys\[1\] has 9 bytes; a requestState key needs"):
        KeyRing([KEY, "too short"])
    with pytest.raises(TypeError, match=r"^keys\[2\] is a int; a requestState key is a str"):
        KeyRing([KEY, OTHER_KEY, 42])  # type: ignore[list-item]


def test_a_32_byte_secret_is_enough() -> None:
    assert len(KeyRing(["x" * 32]).labels) == 1


def test_an_empty_key_ring_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        KeyRing([])


async def test_explicit_key_ids_name_keys_but_do_not_authenticate_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    named = bookshop(("k2026", KEY))
    assert named.keys.labels == ["k2026"]
    token = await first_round(named)
    assert await second_round(bookshop(("k2026", KEY)), token) == BACKORDERED
    assert await second_round(bookshop(KEY), token) == FROZEN
    assert await second_round(bookshop(("k2025", KEY)), token) == FROZEN
    assert await second_round(bookshop(("k2026", OTHER_KEY)), token) == FROZEN
    assert rejections(caplog) == ["unknown key", "unknown key", "seal"]


# --- what a token reveals ----------------------------------------------------------------------


def test_sealing_the_same_plaintext_twice_gives_different_tokens() -> None:
    ring = KeyRing([KEY])
    first, second = ring.seal(b"same plaintext"), ring.seal(b"same plaintext")
    assert first != second
    assert ring.open(first, 1000) == ring.open(second, 1000) == b"same plaintext"


async def test_the_same_round_minted_twice_gives_different_tokens(shop: MCPServer) -> None:
    assert await first_round(shop) != await first_round(shop)


async def test_a_token_reveals_none_of_its_plaintext(shop: MCPServer, token: str) -> None:
    plaintext = shop.keys.open(token, shop.settings.tokens.max_token_chars)
    assert b"confirm_backorder" in plaintext  # the question out with the client
    raw = sealed_bytes(token)
    for secret in (b"confirm_backorder", b"order_book", b"Neuromancer", b"out of stock"):
        assert secret not in raw
        assert secret.decode() not in token
    assert [i for i in range(len(plaintext) - 7) if plaintext[i : i + 8] in raw] == []


async def test_the_order_book_token_is_under_half_the_sdk_size(token: str) -> None:
    assert len(token) < SDK_TOKEN_CHARS // 2 + 1 == 183


# --- claims: time ------------------------------------------------------------------------------


async def test_a_token_expires_after_state_ttl_and_the_allowed_skew(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    shop = bookshop(KEY, state_ttl=60, clock_skew=30)
    token = await first_round(shop)
    clock.now += 89  # another replica's clock may be 30 s ahead of the one that minted it
    assert await second_round(shop, token) == BACKORDERED
    clock.now += 1
    assert await second_round(shop, token) == FROZEN
    assert rejections(caplog) == ["expired"]


@pytest.mark.parametrize("skew", [1, 90, 120])
async def test_a_token_minted_up_to_the_allowed_skew_ahead_is_accepted(
    shop: MCPServer, clock: Clock, skew: int
) -> None:
    assert shop.settings.tokens.clock_skew == 120  # the default: a replica 90 s off still works
    clock.now += skew  # the minting replica's clock runs ahead
    token = await first_round(shop)
    clock.now -= skew
    assert await second_round(shop, token) == BACKORDERED


@pytest.mark.parametrize("skew", [121, 3600])
async def test_a_token_minted_more_than_the_allowed_skew_ahead_is_rejected(
    shop: MCPServer, clock: Clock, skew: int, caplog: pytest.LogCaptureFixture
) -> None:
    clock.now += skew
    token = await first_round(shop)
    clock.now -= skew
    assert await second_round(shop, token) == FROZEN
    assert rejections(caplog) == ["minted in the future"]


async def test_a_replica_90_seconds_behind_takes_tokens_to_their_last_second(
    shop: MCPServer, clock: Clock
) -> None:
    clock.now += 90  # minted by a replica 90 s ahead, as late as a token can be used
    token = await first_round(shop)
    clock.now += shop.settings.tokens.state_ttl - 1 - 90
    assert await second_round(shop, token) == BACKORDERED


def test_the_allowed_skew_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bookshop(KEY, clock_skew=5).settings.tokens.clock_skew == 5
    monkeypatch.setenv("ENGINE_CLOCK_SKEW", "30")
    assert bookshop(KEY).settings.tokens.clock_skew == 30
    with pytest.raises(ValueError, match="clock_skew must be a number of seconds"):
        bookshop(KEY, clock_skew=-1)


# --- claims: the request binding ---------------------------------------------------------------


async def test_a_token_is_bound_to_its_audience(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    staging = bookshop(KEY, audience="Bookshop-staging")
    assert await second_round(staging, token) == FROZEN
    assert rejections(caplog) == ["request binding: audience"]


async def test_servers_with_different_names_reject_each_others_tokens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = await first_round(shelf("shelf-eu"), DELETE)
    assert await second_round(shelf("shelf-us"), token, DELETE, CONFIRM) == FROZEN
    assert rejections(caplog) == ["request binding: audience"]


async def test_replicas_sharing_an_audience_resume_each_others_calls() -> None:
    token = await first_round(shelf("shelf-eu", audience="shelf"), DELETE)
    replica = shelf("shelf-us", audience="shelf")
    assert await second_round(replica, token, DELETE, CONFIRM) == "Deleted 'Dune'."


async def test_the_audience_defaults_to_the_server_name(token: str) -> None:
    assert await second_round(bookshop(KEY, audience="Bookshop"), token) == BACKORDERED


@pytest.mark.parametrize(
    "arguments",
    [{"title": "Dune"}, {"title": "neuromancer"}, {"title": "Neuromancer", "copies": 2}, None],
    ids=["other-title", "other-case", "extra-argument", "no-arguments"],
)
async def test_a_token_is_bound_to_the_call_arguments(
    shop: MCPServer, token: str, arguments: Any, caplog: pytest.LogCaptureFixture
) -> None:
    params = {"name": "order_book", **({"arguments": arguments} if arguments else {})}
    assert await second_round(shop, token, params) == FROZEN
    assert rejections(caplog) == ["request binding: arguments"]


async def test_a_token_only_resumes_the_tool_that_minted_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = shelf()
    token = await first_round(server, DELETE)
    assert await second_round(server, token, ARCHIVE, CONFIRM) == FROZEN
    assert rejections(caplog) == ["request binding: target"]
    assert await second_round(server, token, DELETE, CONFIRM) == "Deleted 'Dune'."


async def test_a_token_only_resumes_the_method_that_minted_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = shelf()
    tool_token = await first_round(server, DELETE)
    prompt_token = await first_round(server, DELETE, method="prompts/get")
    async with connect(server) as client:
        assert await resume(client, tool_token, DELETE, CONFIRM, "prompts/get") == FROZEN
        assert await resume(client, prompt_token, DELETE, CONFIRM, "tools/call") == FROZEN
        assert await resume(client, prompt_token, DELETE, CONFIRM, "prompts/get") == (
            "Draft a note about deleting 'Dune'."
        )
    assert rejections(caplog) == ["request binding: target"] * 2


# --- claims: the principal ---------------------------------------------------------------------


def who(scope: RequestScope) -> str | None:
    """The signed-in user, as an auth middleware would have put it in a header."""
    user = (scope.headers or {}).get("x-user")
    if user == "directory-down":
        raise LookupError("the user directory is unavailable")
    return user


def as_user(name: str | None) -> dict[str, str] | None:
    return {"x-user": name} if name is not None else None


async def test_the_same_principal_resumes_its_call() -> None:
    shop = bookshop(KEY, principal=who)
    token = await first_round(shop, headers=as_user("alice"))
    assert await second_round(shop, token, headers=as_user("alice")) == BACKORDERED


@pytest.mark.parametrize(
    ("minted_for", "resumed_by", "reason"),
    [
        ("alice", "bob", "principal"),
        (None, "alice", "principal drift"),
        ("alice", None, "principal drift"),
    ],
)
async def test_a_token_is_bound_to_its_principal(
    minted_for: str | None, resumed_by: str | None, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    shop = bookshop(KEY, principal=who)
    token = await first_round(shop, headers=as_user(minted_for))
    assert await second_round(shop, token, headers=as_user(resumed_by)) == FROZEN
    assert rejections(caplog) == [reason]


async def test_a_failing_principal_callback_rejects_the_resume(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shop = bookshop(KEY, principal=who)
    token = await first_round(shop, headers=as_user("alice"))
    assert await second_round(shop, token, headers=as_user("directory-down")) == FROZEN
    assert rejections(caplog) == ["principal callback failed"]


async def test_a_failing_principal_callback_fails_a_first_round_too() -> None:
    shop = bookshop(KEY, principal=who)
    async with connect(shop, headers=as_user("directory-down")) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.send("tools/call", {"name": "order_book", "arguments": {"title": "Dune"}})
    assert (caught.value.code, caught.value.status) == (-32603, 500)


# --- the log -----------------------------------------------------------------------------------


async def test_the_log_names_the_reason_but_never_the_token_a_key_or_the_plaintext(
    shop: MCPServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    token = await first_round(shop)
    raw = sealed_bytes(token)
    plaintext = shop.keys.open(token, shop.settings.tokens.max_token_chars)
    await second_round(shop, token, {"name": "order_book", "arguments": {"title": "Dune"}})
    await second_round(bookshop(OTHER_KEY), token)
    await second_round(shop, token_of(raw[:-1] + bytes([raw[-1] ^ 1])))
    await second_round(bookshop(KEY, principal=who), token, headers=as_user("alice"))
    clock.now += shop.settings.tokens.state_ttl + shop.settings.tokens.clock_skew
    await second_round(shop, token)
    assert rejections(caplog) == [
        "request binding: arguments",
        "unknown key",
        "seal",
        "principal drift",
        "expired",
    ]
    assert all(r.levelname == "WARNING" for r in caplog.records if "rejected" in r.getMessage())
    body = token.removeprefix(PREFIX)
    leaks = [token, body[:16], body[-16:], KEY, OTHER_KEY, plaintext.hex(), repr(plaintext)]
    leaks += [binascii.hexlify(raw).decode(), base64.b64encode(plaintext).decode()]
    assert [leak for leak in leaks if leak in caplog.text] == []


def test_call_ids_and_nonces_are_unique_across_pool_refills_threads_and_forks() -> None:
    import os
    import threading

    drawn: list[bytes] = []

    def draw() -> None:
        drawn.extend(engine.state.claims.new_call_id() for _ in range(1000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(drawn) == 4000  # many pool refills, from four threads at once
    assert len(set(drawn)) == 4000
    assert {len(call_id) for call_id in drawn} == {engine.state.claims.CALL_ID_BYTES}

    ring = KeyRing([KEY])
    tokens = {ring.seal(b"the same plaintext") for _ in range(2000)}
    assert len(tokens) == 2000  # a fresh nonce every time

    engine.state.claims.new_call_id()  # the pool holds unused bytes when the process forks
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write_end, engine.state.claims.new_call_id())
        os._exit(0)
    os.close(write_end)
    from_child = os.read(read_end, 64)
    os.close(read_end)
    os.waitpid(child, 0)
    assert from_child != engine.state.claims.new_call_id()


def test_call_ids_begun_later_sort_later_and_keep_128_random_bits() -> None:
    """A store's indexes keyed by call id fill in order (the time first); the rest is random:
    a call id is also a task's handle, which must not be guessable."""
    claims = engine.state.claims
    earlier = claims.new_call_id()
    time.sleep(0.002)
    later = [claims.new_call_id() for _ in range(200)]
    assert all(earlier < call_id for call_id in later)
    assert claims.CALL_ID_RANDOM_BYTES * 8 >= 128
    randoms = {call_id[claims.CALL_ID_TIME_BYTES :] for call_id in later}
    assert len(randoms) == 200
    millis = int.from_bytes(earlier[: claims.CALL_ID_TIME_BYTES], "big")
    assert abs(millis / 1000 - time.time()) < 5
