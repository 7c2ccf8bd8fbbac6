"""What is open on a server with ``auth`` is what its code says is open: a custom route is open
unless registered with ``require_auth=True`` (then it is behind the ``Host`` check and the
bearer token, with its scopes), and the protected resource metadata never names a host the
server was not given."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from engine import JWTVerifier, MCPServer
from engine.auth.current import get_access_token
from engine.auth.settings import AuthSettings
from tests.auth_server import AuthorizationServer, serve_authorization_server
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"
EVIL = {"Host": "evil.example"}


def shop(issuer: AuthorizationServer, resource: str | None = RESOURCE) -> MCPServer:
    verifier = JWTVerifier(f"{issuer.issuer}/jwks", issuer=issuer.issuer, audience=RESOURCE)
    settings = AuthSettings(
        issuer_url=issuer.issuer, resource_server_url=resource, required_scopes=["shop"]
    )
    mcp = MCPServer("Bookshop", keys=[KEY], token_verifier=verifier, auth=settings)

    @mcp.custom_route("/ready", methods=["GET"])
    async def ready(request: Request) -> JSONResponse:
        return JSONResponse({"ready": True})

    @mcp.custom_route("/orders/export", methods=["GET"], require_auth=True, scopes=["admin"])
    async def export(request: Request) -> JSONResponse:
        token = get_access_token()
        return JSONResponse({"exported_for": token.subject if token else None})

    return mcp


@pytest.fixture
async def issuer() -> AsyncIterator[AuthorizationServer]:
    async with serve_authorization_server() as server:
        yield server


async def test_a_custom_route_is_open_unless_it_says_otherwise(issuer: AuthorizationServer) -> None:
    async with (
        serve_asgi(shop(issuer).streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=20) as http,
    ):
        open_route = await http.get("/ready", headers=EVIL)
    # The official server's default, which health checks rely on (docs/auth.md says so).
    assert open_route.status_code == 200


async def test_a_route_with_require_auth_is_behind_the_host_check_and_the_token(
    issuer: AuthorizationServer,
) -> None:
    admin = issuer.mint("grace", audience=RESOURCE, scope="shop admin")
    shopper = issuer.mint("ada", audience=RESOURCE, scope="shop")

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async with (
        serve_asgi(shop(issuer).streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=20) as http,
    ):
        no_token = await http.get("/orders/export")
        evil_host = await http.get("/orders/export", headers=EVIL | bearer(admin))
        no_scope = await http.get("/orders/export", headers=bearer(shopper))
        granted = await http.get("/orders/export", headers=bearer(admin))
    assert no_token.status_code == 401
    assert no_token.headers["www-authenticate"].startswith('Bearer scope="shop"')
    assert evil_host.status_code == 421
    assert no_scope.status_code == 403
    assert 'scope="shop admin"' in no_scope.headers["www-authenticate"]
    assert granted.status_code == 200
    assert granted.json() == {"exported_for": "grace"}


def test_require_auth_on_a_server_without_auth_is_refused_when_the_app_is_made() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.custom_route("/orders/export", methods=["GET"], require_auth=True)
    async def export(request: Request) -> JSONResponse:
        return JSONResponse({})

    with pytest.raises(ValueError, match="require_auth, but the server has no auth"):
        mcp.streamable_http_app()
    with pytest.raises(ValueError, match="add require_auth=True"):
        mcp.custom_route("/admin", methods=["GET"], scopes=["admin"])(export)


async def test_the_metadata_names_only_an_allowed_host(issuer: AuthorizationServer) -> None:
    mcp = shop(issuer, resource=None)
    async with (
        serve_asgi(mcp.streamable_http_app()) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=20) as http,
    ):
        path = "/.well-known/oauth-protected-resource/mcp"
        reflected = await http.get(path, headers=EVIL)
        port = base.rsplit(":", 1)[1]
        allowed = await http.get(path, headers={"Host": f"localhost:{port}"})
    assert reflected.status_code == 421
    assert b"evil" not in reflected.content
    assert "cache-control" not in reflected.headers
    assert allowed.status_code == 200
    assert allowed.json()["resource"] == f"http://localhost:{port}/mcp"
    assert allowed.headers["vary"] == "Host, X-Forwarded-Host, X-Forwarded-Proto"


async def test_any_host_without_a_resource_url_is_refused_when_the_app_is_made(
    issuer: AuthorizationServer,
) -> None:
    with pytest.raises(ValueError, match="resource_server_url"):
        shop(issuer, resource=None).streamable_http_app(allowed_hosts=["*"])
    shop(issuer).streamable_http_app(allowed_hosts=["*"])  # a configured URL names no Host
