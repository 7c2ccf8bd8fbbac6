"""An authorization server that stalls, and tokens made to be asked about: a replica asks its
provider once for all the requests that need the answer, answers them all together when it does
not come, pauses before asking again, and forwards only so many unknown tokens a second; the
tokens it already verified are served all along.

The provider is the test authorization server (``tests/auth_server.py``) on a real socket;
``with issuer.hanging():`` makes its JWKS and introspection endpoints take requests and answer
none. The verifiers keep their default 5 s timeout.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx
import jwt
import pytest

from engine import IntrospectionVerifier, JWTVerifier
from engine.auth import single_flight
from engine.auth.provider import TokenVerifier
from engine.auth.settings import AuthSettings
from examples.bookshop import build as build_bookshop
from tests.auth_server import RESOURCE_SERVER, AuthorizationServer, serve_authorization_server
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import call, headers_for

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"
TIMEOUT = 5.0
"""The verifiers' default: how long one question to the provider may take."""
CONCURRENT = 50


@dataclass
class Answer:
    status: int
    retry_after: str | None
    at: float
    """When it arrived (``time.monotonic()``)."""


@dataclass
class Shop:
    issuer: AuthorizationServer
    base: str
    http: httpx.AsyncClient

    async def call(self, token: str) -> Answer:
        body = call("order_book", {"title": "Dune"})
        headers = headers_for(body) | {"Authorization": f"Bearer {token}"}
        response = await self.http.post(f"{self.base}/mcp", json=body, headers=headers)
        return Answer(response.status_code, response.headers.get("retry-after"), time.monotonic())

    async def together(self, tokens: list[str]) -> tuple[float, list[Answer]]:
        """Send a request with each token at once: when they were sent, and the answers."""
        answers: list[Answer] = []

        async def one(token: str) -> None:
            answers.append(await self.call(token))

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for token in tokens:
                tg.start_soon(one, token)
        return started, answers

    async def limits(self, limit: str) -> int:
        """``engine_auth_limits_total{limit=...}`` from ``/metrics``."""
        text = (await self.http.get(f"{self.base}/metrics")).text
        line = f'engine_auth_limits_total{{limit="{limit}"}} '
        return sum(int(row.removeprefix(line)) for row in text.splitlines() if row.startswith(line))

    async def unavailable(self) -> int:
        """Tokens answered 503: the provider not asked (a limit), or not answering in time."""
        text = (await self.http.get(f"{self.base}/metrics")).text
        line = 'engine_auth_refusals_total{reason="verifier unavailable"} '
        return sum(int(row.removeprefix(line)) for row in text.splitlines() if row.startswith(line))


@asynccontextmanager
async def shop_with(
    verifier_of: Callable[[AuthorizationServer], TokenVerifier],
) -> AsyncIterator[Shop]:
    async with serve_authorization_server() as issuer:
        settings = AuthSettings(issuer_url=issuer.issuer, resource_server_url=RESOURCE)
        mcp = build_bookshop(keys=[KEY], token_verifier=verifier_of(issuer), auth=settings)
        limits = httpx.Limits(max_connections=CONCURRENT + 10)
        async with (
            serve_asgi(mcp.streamable_http_app()) as base,
            httpx.AsyncClient(trust_env=False, timeout=60, limits=limits) as http,
        ):
            yield Shop(issuer, base, http)


def jwt_shop(**options: float) -> Callable[[AuthorizationServer], TokenVerifier]:
    def made(issuer: AuthorizationServer) -> TokenVerifier:
        return JWTVerifier(
            f"{issuer.issuer}/jwks", issuer=issuer.issuer, audience=RESOURCE, **options
        )

    return made


def introspecting(issuer: AuthorizationServer, cache_seconds: float = 30.0) -> TokenVerifier:
    return IntrospectionVerifier(
        f"{issuer.issuer}/introspect",
        client_id=RESOURCE_SERVER[0],
        client_secret=RESOURCE_SERVER[1],
        audience=RESOURCE,
        cache_seconds=cache_seconds,
    )


def answered_together(started: float, answers: list[Answer]) -> None:
    """Every request answered within the timeout (and a second) of the first one sent."""
    assert len(answers) == CONCURRENT
    last = max(answer.at for answer in answers)
    assert last - started <= TIMEOUT + 1, f"the last answer came {last - started:.1f} s after"


# --- JWKS ---------------------------------------------------------------------------------------


async def test_a_hanging_jwks_is_fetched_once_and_its_failure_answers_every_request() -> None:
    async with shop_with(jwt_shop()) as shop:
        tokens = [shop.issuer.mint(f"user-{i}", audience=RESOURCE) for i in range(CONCURRENT)]
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            started, answers = await shop.together(tokens)
    answered_together(started, answers)
    assert {(a.status, a.retry_after) for a in answers} == {(503, "1")}
    assert shop.issuer.jwks_fetches == 1


async def test_while_fetching_is_paused_a_new_token_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(single_flight, "FIRST_BACKOFF", 20.0)
    async with shop_with(jwt_shop()) as shop:
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            first = await shop.call(shop.issuer.mint(audience=RESOURCE))
            sent = time.monotonic()
            paused = await shop.call(shop.issuer.mint("grace", audience=RESOURCE))
        assert (first.status, paused.status) == (503, 503)
        assert paused.at - sent < TIMEOUT  # refused without waiting for the provider
        assert 15 <= int(paused.retry_after or 0) <= 20
        assert shop.issuer.jwks_fetches == 1
        assert await shop.limits("jwks_backoff") == 1


async def test_keys_past_their_age_are_fetched_once_while_requests_go_on_with_them() -> None:
    async with shop_with(jwt_shop(jwks_max_age=1)) as shop:
        assert (await shop.call(shop.issuer.mint(audience=RESOURCE))).status == 200
        await anyio.sleep(1.5)  # the kept set is now older than jwks_max_age
        tokens = [shop.issuer.mint(f"user-{i}", audience=RESOURCE) for i in range(CONCURRENT)]
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            started, answers = await shop.together(tokens)
    answered_together(started, answers)
    assert {a.status for a in answers} == {200}
    assert shop.issuer.jwks_fetches == 2


async def test_a_rotated_key_while_the_jwks_hangs_and_a_verified_token_is_served_meanwhile() -> (
    None
):
    async with shop_with(jwt_shop()) as shop:
        verified = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(verified)).status == 200
        shop.issuer.rotate()  # new tokens name a key the replica has not fetched
        tokens = [shop.issuer.mint(f"user-{i}", audience=RESOURCE) for i in range(CONCURRENT)]
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            async with anyio.create_task_group() as tg:
                results: list[tuple[float, list[Answer]]] = []

                async def flood() -> None:
                    results.append(await shop.together(tokens))

                tg.start_soon(flood)
                await shop.issuer.stalled.wait()  # the refetch is under way
                meanwhile = await shop.call(verified)
                assert meanwhile.status == 200
                assert not results  # served while the new tokens still wait
    started, answers = results[0]
    answered_together(started, answers)
    # The key could not be looked for: 503, so each client keeps its (good) token.
    assert {(a.status, a.retry_after) for a in answers} == {(503, "1")}
    assert shop.issuer.jwks_fetches == 2


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": str(int(time.time()) + 300)},
        {"exp": True},
        {"nbf": "0"},
        {"nbf": None},
        {"iat": str(int(time.time()))},
        {"iat": False},
    ],
    ids=["exp-string", "exp-bool", "nbf-string", "nbf-null", "iat-string", "iat-bool"],
)
async def test_time_claims_that_are_not_numbers_refuse_the_token(claims: dict[str, object]) -> None:
    async with shop_with(jwt_shop()) as shop:
        token = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(token)).status == 200
        payload = {"iss": shop.issuer.issuer, "sub": "ada", "aud": RESOURCE, "scope": "shop"}
        payload |= {"exp": int(time.time()) + 300} | claims
        forged = jwt.encode(
            payload, shop.issuer.signing.private, "RS256", {"kid": shop.issuer.signing.kid}
        )
        assert (await shop.call(forged)).status == 401


# --- introspection ------------------------------------------------------------------------------


async def test_a_hanging_introspection_endpoint_is_asked_once_per_token() -> None:
    async with shop_with(introspecting) as shop:
        known = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(known)).status == 200
        token = shop.issuer.mint("grace", audience=RESOURCE)
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            async with anyio.create_task_group() as tg:
                results: list[tuple[float, list[Answer]]] = []

                async def together() -> None:
                    results.append(await shop.together([token] * CONCURRENT))

                tg.start_soon(together)
                await shop.issuer.stalled.wait()
                meanwhile = await shop.call(known)
                assert meanwhile.status == 200
                assert not results
    started, answers = results[0]
    answered_together(started, answers)
    assert {(a.status, a.retry_after) for a in answers} == {(503, "1")}
    assert shop.issuer.introspected[token] == 1


async def test_after_a_failure_the_endpoint_is_not_asked_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(single_flight, "FIRST_BACKOFF", 20.0)
    async with shop_with(introspecting) as shop:
        known = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(known)).status == 200
        with shop.issuer.hanging(), anyio.fail_after(3 * TIMEOUT):
            assert (await shop.call(shop.issuer.mint("grace", audience=RESOURCE))).status == 503
            others = [shop.issuer.mint(f"user-{i}", audience=RESOURCE) for i in range(20)]
            _, answers = await shop.together(others)
            assert (await shop.call(known)).status == 200
        assert {a.status for a in answers} == {503}
        assert all(15 <= int(a.retry_after or 0) <= 20 for a in answers)
        assert shop.issuer.introspections == 2  # the known token, and the one that hung
        assert await shop.limits("introspection_backoff") == 20


FLOOD = 12_000


async def pipelined(base: str, tokens: list[str], connections: int = 8) -> list[int]:
    """Send a POST with each token over a few kept-alive connections, requests pipelined (a
    flood as a client that does not wait for answers sends it); the statuses, in any order."""
    host, port = base.removeprefix("http://").split(":")
    statuses: list[int] = []

    async def one_connection(share: list[str]) -> None:
        async with await anyio.connect_tcp(host, int(port)) as stream:

            async def write() -> None:
                for token in share:
                    await stream.send(
                        b"POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                        % (base.removeprefix("http://").encode(), token.encode())
                    )

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                buffer = b""
                for _ in share:
                    while b"\r\n\r\n" not in buffer:
                        buffer += await stream.receive()
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    lines = head.split(b"\r\n")
                    statuses.append(int(lines[0].split()[1]))
                    length = next(
                        int(line.split(b":")[1])
                        for line in lines
                        if line.lower().startswith(b"content-length:")
                    )
                    while len(buffer) < length:
                        buffer += await stream.receive()
                    buffer = buffer[length:]

    async with anyio.create_task_group() as tg:
        for i in range(connections):
            tg.start_soon(one_connection, tokens[i::connections])
    return statuses


async def test_a_flood_of_unknown_tokens_is_introspected_at_a_bounded_rate() -> None:
    # The good token's answer is kept longer than the flood lasts, so asking about it again
    # could only mean it was pushed out of the cache.
    async with shop_with(lambda issuer: introspecting(issuer, cache_seconds=600)) as shop:
        good = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(good)).status == 200
        bad = [f"bad-{i:05d}-" + "x" * 40 for i in range(FLOOD)]
        started = time.monotonic()
        with anyio.fail_after(300):
            statuses = await pipelined(shop.base, bad)
        elapsed = time.monotonic() - started
        assert (await shop.call(good)).status == 200
        rated = await shop.limits("introspection_rate")
        # On a loaded machine the provider may be slow to answer: a token it did not answer in
        # time is a 503 too, and pauses introspection (each such 503 counted as well).
        paused = await shop.limits("introspection_backoff")
        unavailable = await shop.unavailable()
    timed_out = unavailable - rated - paused
    assert sorted(set(statuses)) == [401, 503]
    assert statuses.count(503) == unavailable
    assert timed_out >= 0
    # The default rate: 50 unknown tokens a second, and a burst of five seconds' worth.
    sent = shop.issuer.introspections - 1
    # A question that timed out may never have reached the provider (still in its socket).
    assert statuses.count(401) <= sent <= statuses.count(401) + timed_out
    assert sent <= 250 + 50 * elapsed, f"{sent} introspections in {elapsed:.1f} s"
    assert rated > 0  # the rate refused tokens (how many depends on how fast the flood went)
    assert shop.issuer.introspected[good] == 1  # still cached: never asked about again
