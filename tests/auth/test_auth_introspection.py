"""``IntrospectionVerifier`` on the wire: tokens checked at the test authorization server's
introspection endpoint (RFC 7662), answers kept briefly so a client's rounds do not each cost one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import httpx
import pytest

from engine import IntrospectionVerifier
from engine.auth.settings import AuthSettings
from examples.bookshop import build as build_bookshop
from tests.auth_server import RESOURCE_SERVER, AuthorizationServer, serve_authorization_server
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import call, headers_for, text_of

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"


@dataclass
class Deployment:
    issuer: AuthorizationServer
    base: str

    async def call(self, token: str) -> httpx.Response:
        body = call("order_book", {"title": "Dune"})
        headers = headers_for(body) | {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(trust_env=False, timeout=20) as http:
            return await http.post(f"{self.base}/mcp", json=body, headers=headers)


@contextlib.asynccontextmanager
async def deployed(**options: float) -> AsyncIterator[Deployment]:
    """The bookshop checking its tokens at the authorization server's introspection endpoint."""
    async with serve_authorization_server() as issuer:
        verifier = IntrospectionVerifier(
            f"{issuer.issuer}/introspect",
            client_id=RESOURCE_SERVER[0],
            client_secret=RESOURCE_SERVER[1],
            audience=RESOURCE,
            issuer=issuer.issuer,
            **options,
        )
        settings = AuthSettings(issuer_url=issuer.issuer, resource_server_url=RESOURCE)
        mcp = build_bookshop(keys=[KEY], token_verifier=verifier, auth=settings)
        async with mcp.running(), serve_asgi(mcp.streamable_http_app()) as base:
            yield Deployment(issuer, base)


@pytest.fixture
async def shop() -> AsyncIterator[Deployment]:
    async with deployed() as deployment:
        yield deployment


async def test_an_active_token_is_accepted_and_its_answer_kept(shop: Deployment) -> None:
    token = shop.issuer.mint(audience=RESOURCE)
    for _ in range(3):
        response = await shop.call(token)
        assert response.status_code == 200
        assert text_of(response.json()["result"]) == "Ordered 'Dune'."
    assert shop.issuer.introspections == 1


async def test_concurrent_requests_with_one_token_share_one_introspection(
    shop: Deployment,
) -> None:
    token = shop.issuer.mint(audience=RESOURCE)
    statuses: list[int] = []

    async def one() -> None:
        statuses.append((await shop.call(token)).status_code)

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    assert statuses == [200] * 8
    assert shop.issuer.introspections == 1


async def test_an_inactive_token_is_refused_and_so_remembered(shop: Deployment) -> None:
    for _ in range(3):
        response = await shop.call("never-issued")
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert shop.issuer.introspections == 1


async def test_a_token_for_another_resource_is_refused(shop: Deployment) -> None:
    token = shop.issuer.mint(audience="https://calendar.example.com/mcp")
    assert (await shop.call(token)).status_code == 401


async def test_a_revoked_token_is_refused_once_its_answer_expires() -> None:
    async with deployed(cache_seconds=0) as shop:
        token = shop.issuer.mint(audience=RESOURCE)
        assert (await shop.call(token)).status_code == 200
        shop.issuer.revoked.add(token)
        assert (await shop.call(token)).status_code == 401
        assert shop.issuer.introspections == 2


async def test_an_endpoint_that_refuses_the_resource_server_gets_503() -> None:
    async with deployed() as shop:
        del shop.issuer.clients[RESOURCE_SERVER[0]]  # its credentials no longer work
        response = await shop.call(shop.issuer.mint(audience=RESOURCE))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"  # the endpoint is asked again in a second
