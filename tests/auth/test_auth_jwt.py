"""``JWTVerifier`` on the wire: the bookshop behind JWT access tokens from a real (test)
authorization server, every token a verifier must refuse refused with its status and challenge.

The authorization server (``tests/auth_server.py``) publishes its keys as a JWKS and signs RS256
tokens; the MCP server fetches the keys once, keeps them, and fetches them again only for a key
id it does not know, at most five times a minute.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization

from engine import JWTVerifier
from engine.auth.settings import AuthSettings
from examples.bookshop import build as build_bookshop
from tests.auth_server import (
    AuthorizationServer,
    forged_hs256,
    new_key,
    serve_authorization_server,
    unsigned,
)
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import call, headers_for, text_of

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"
METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


@dataclass
class Deployment:
    issuer: AuthorizationServer
    verifier: JWTVerifier
    base: str

    async def call(self, token: str | None, tool: str = "order_book") -> httpx.Response:
        body = call(tool, {"title": "Dune"})
        headers = headers_for(body)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(trust_env=False, timeout=20) as http:
            return await http.post(f"{self.base}/mcp", json=body, headers=headers)

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.issuer.issuer, "sub": "ada", "aud": RESOURCE, "exp": now + 300}
        return base | {"scope": "shop", "iat": now} | changes


@pytest.fixture
async def shop() -> AsyncIterator[Deployment]:
    async with serve_authorization_server() as issuer:
        verifier = JWTVerifier(f"{issuer.issuer}/jwks", issuer=issuer.issuer, audience=RESOURCE)
        settings = AuthSettings(
            issuer_url=issuer.issuer, resource_server_url=RESOURCE, required_scopes=["shop"]
        )
        mcp = build_bookshop(keys=[KEY], token_verifier=verifier, auth=settings)

        @mcp.tool(scopes=["books:write"])
        def restock(title: str) -> str:
            return f"Restocked {title!r}."

        async with serve_asgi(mcp.streamable_http_app()) as base:
            yield Deployment(issuer, verifier, base)


def challenge(response: httpx.Response) -> str:
    return response.headers["www-authenticate"]


def invalid_token(response: httpx.Response) -> None:
    """401 with the invalid_token challenge naming the metadata and the scope."""
    assert response.status_code == 401, response.text
    value = challenge(response)
    assert value.startswith('Bearer error="invalid_token", error_description="')
    assert value.endswith(f'scope="shop", resource_metadata="{METADATA}"')
    assert response.json()["error"] == "invalid_token"


async def test_a_token_from_the_issuer_for_this_resource_is_accepted(shop: Deployment) -> None:
    response = await shop.call(shop.issuer.mint(audience=RESOURCE))
    assert response.status_code == 200
    assert text_of(response.json()["result"]) == "Ordered 'Dune'."


async def test_no_token(shop: Deployment) -> None:
    response = await shop.call(None)
    assert response.status_code == 401
    assert challenge(response) == f'Bearer scope="shop", resource_metadata="{METADATA}"'


async def test_a_malformed_token(shop: Deployment) -> None:
    invalid_token(await shop.call("eyJhbGciOi.not-a-jwt"))


async def test_a_bad_signature(shop: Deployment) -> None:
    impostor = new_key(shop.issuer.signing.kid)  # the issuer's key id, another key
    invalid_token(await shop.call(shop.issuer.mint(audience=RESOURCE, key=impostor)))


async def test_a_token_from_another_issuer(shop: Deployment) -> None:
    invalid_token(await shop.call(shop.issuer.mint(audience=RESOURCE, iss="https://evil.example")))


async def test_a_token_for_another_resource(shop: Deployment) -> None:
    other = "https://calendar.example.com/mcp"
    invalid_token(await shop.call(shop.issuer.mint(audience=other)))
    invalid_token(await shop.call(shop.issuer.mint(audience=None)))  # no aud at all


async def test_an_expired_token(shop: Deployment) -> None:
    past = int(time.time()) - 120  # beyond the 30 s leeway
    invalid_token(await shop.call(shop.issuer.mint(audience=RESOURCE, exp=past)))


async def test_a_token_within_the_leeway_is_accepted(shop: Deployment) -> None:
    just = int(time.time()) - 5
    response = await shop.call(shop.issuer.mint(audience=RESOURCE, exp=just))
    assert response.status_code == 200


async def test_a_token_not_yet_valid(shop: Deployment) -> None:
    later = int(time.time()) + 300
    invalid_token(await shop.call(shop.issuer.mint(audience=RESOURCE, nbf=later)))


async def test_alg_none(shop: Deployment) -> None:
    invalid_token(await shop.call(unsigned(shop.claims(), shop.issuer.signing.kid)))


async def test_hs256_signed_with_the_rsa_public_key(shop: Deployment) -> None:
    public = shop.issuer.signing.private.public_key()
    for encoding in (serialization.Encoding.PEM, serialization.Encoding.DER):
        secret = public.public_bytes(encoding, serialization.PublicFormat.SubjectPublicKeyInfo)
        forged = forged_hs256(shop.claims(), secret, shop.issuer.signing.kid)
        invalid_token(await shop.call(forged))


async def test_an_unknown_kid_then_a_rotated_one(shop: Deployment) -> None:
    issuer = shop.issuer
    assert (await shop.call(issuer.mint(audience=RESOURCE))).status_code == 200
    assert issuer.jwks_fetches == 1  # fetched once, then kept
    stranger = new_key("key-nobody-published")
    invalid_token(await shop.call(issuer.mint(audience=RESOURCE, key=stranger)))
    assert issuer.jwks_fetches == 2  # an unknown kid: fetched again, in vain
    issuer.rotate()
    rotated = await shop.call(issuer.mint(audience=RESOURCE))
    assert rotated.status_code == 200
    assert issuer.jwks_fetches == 3  # the rotated key found on the next fetch
    assert (await shop.call(issuer.mint(audience=RESOURCE))).status_code == 200
    assert issuer.jwks_fetches == 3


async def test_unknown_kids_refetch_the_keys_at_most_five_times_a_minute(
    shop: Deployment,
) -> None:
    issuer = shop.issuer
    assert (await shop.call(issuer.mint(audience=RESOURCE))).status_code == 200
    for n in range(12):
        made_up = new_key(f"made-up-{n}")
        invalid_token(await shop.call(issuer.mint(audience=RESOURCE, key=made_up)))
    assert issuer.jwks_fetches == 1 + 5


async def test_a_token_without_the_tools_scope(shop: Deployment) -> None:
    response = await shop.call(shop.issuer.mint(audience=RESOURCE), tool="restock")
    assert response.status_code == 403
    assert challenge(response).startswith('Bearer error="insufficient_scope"')
    assert challenge(response).endswith(f'scope="shop books:write", resource_metadata="{METADATA}"')
    staff = shop.issuer.mint(audience=RESOURCE, scope="shop books:write")
    assert (await shop.call(staff, tool="restock")).status_code == 200


async def test_a_token_without_the_servers_scope(shop: Deployment) -> None:
    response = await shop.call(shop.issuer.mint(audience=RESOURCE, scope="profile"))
    assert response.status_code == 403
    assert 'scope="shop"' in challenge(response)


async def test_scp_claims_are_scopes_too(shop: Deployment) -> None:
    as_list = shop.issuer.mint(audience=RESOURCE, scope=None, scp=["shop", "books:write"])
    assert (await shop.call(as_list, tool="restock")).status_code == 200
    as_text = shop.issuer.mint(audience=[RESOURCE, "other"], scope=None, scp="shop")
    assert (await shop.call(as_text)).status_code == 200


async def test_an_issuer_that_does_not_answer_gets_503_until_it_does() -> None:
    verifier = JWTVerifier(
        "http://127.0.0.1:9/jwks", issuer="http://127.0.0.1:9", audience=RESOURCE, timeout=1
    )
    settings = AuthSettings(issuer_url="http://127.0.0.1:9", resource_server_url=RESOURCE)
    mcp = build_bookshop(keys=[KEY], token_verifier=verifier, auth=settings)
    async with serve_asgi(mcp.streamable_http_app()) as base:
        deployment = Deployment(AuthorizationServer(issuer="http://127.0.0.1:9"), verifier, base)
        token = deployment.issuer.mint(audience=RESOURCE)
        response = await deployment.call(token)
    assert response.status_code == 503
    assert response.json()["error"] == "temporarily_unavailable"


def test_only_asymmetric_algorithms_are_allowed() -> None:
    for refused in (["none"], ["HS256"], ["RS256", "HS512"], []):
        with pytest.raises(ValueError, match="asymmetric"):
            JWTVerifier(
                "https://a.example/jwks", issuer="https://a", audience=RESOURCE, algorithms=refused
            )
    with pytest.raises(ValueError, match="one of jwks_url"):
        JWTVerifier(issuer="https://a", audience=RESOURCE)
    with pytest.raises(ValueError, match="audience"):
        JWTVerifier("https://a.example/jwks", issuer="https://a", audience=[])
