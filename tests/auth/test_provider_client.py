"""The HTTP client a verifier reaches its authorization server with: the caller's stays theirs,
one the verifier opens serves it while it runs, and outside that each request has its own."""

from __future__ import annotations

import httpx
import pytest

from engine import IntrospectionVerifier, JWTVerifier
from engine.auth.provider_client import ProviderClient

pytestmark = pytest.mark.anyio


async def test_a_given_client_serves_every_request_and_stays_open() -> None:
    given = httpx.AsyncClient()
    client = ProviderClient(given, timeout=5.0)
    client.open()
    async with client.session() as http:
        assert http is given
    await client.close()
    assert not given.is_closed
    await given.aclose()


async def test_a_client_opened_for_the_verifiers_lifetime_is_shared_then_closed() -> None:
    client = ProviderClient(None, timeout=5.0)
    client.open()
    async with client.session() as first, client.session() as second:
        assert first is second
    assert not first.is_closed
    await client.close()
    assert first.is_closed


async def test_outside_that_lifetime_each_request_has_a_client_of_its_own() -> None:
    client = ProviderClient(None, timeout=5.0)
    async with client.session() as first:
        pass
    async with client.session() as second:
        assert second is not first
    assert first.is_closed and second.is_closed


async def test_verifiers_close_only_the_client_they_opened() -> None:
    given = httpx.AsyncClient()
    opening_their_own = [
        JWTVerifier(
            "https://auth.example.com/jwks", issuer="https://auth.example.com", audience="mcp"
        ),
        IntrospectionVerifier(
            "https://auth.example.com/introspect", client_id="a", client_secret="b"
        ),
    ]
    given_one = [
        JWTVerifier(
            "https://auth.example.com/jwks",
            issuer="https://auth.example.com",
            audience="mcp",
            http_client=given,
        ),
        IntrospectionVerifier(
            "https://auth.example.com/introspect",
            client_id="a",
            client_secret="b",
            http_client=given,
        ),
    ]
    opened: list[httpx.AsyncClient] = []
    for verifier in [*opening_their_own, *given_one]:
        async with verifier:
            holder = verifier.keys.client if isinstance(verifier, JWTVerifier) else verifier.client
            async with holder.session() as http:
                opened.append(http)
    assert opened[0].is_closed and opened[1].is_closed
    assert opened[2] is given and opened[3] is given and not given.is_closed
    await given.aclose()
