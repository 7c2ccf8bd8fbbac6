"""The official ``mcp`` client's own OAuth support against two replicas behind nginx.

A fleet (``deploy/fleet.py``: nginx, two ``python -m engine serve`` replicas, a private Redis)
serves a bookshop that requires JWTs from the test authorization server. The official client,
refused with 401, discovers the protected resource metadata through nginx, then the
authorization server's, registers itself (RFC 7591), signs in with the authorization code and
PKCE (``OAuthClientProvider``), and completes a two-round elicitation call whose rounds land on
both replicas. A second user, signed in with client credentials
(``ClientCredentialsOAuthProvider``), replays the first user's round-2 request: the frozen
``-32602``, and no body runs for them.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from deploy.fleet import Fleet
from tests.auth_server import AuthorizationServer, serve_authorization_server
from tests.fleet_helpers import free_port

pytestmark = pytest.mark.anyio

TIMEOUT = 30.0

SERVER = '''
"""The bookshop behind JWT access tokens; each body run is appended to runs.log."""

import os
from pathlib import Path
from typing import Annotated

from engine import AuthSettings, Context, JWTVerifier, Resolve
from examples.bookshop import Backorder, Stock, build, check_stock, confirm_backorder

issuer, resource = os.environ["TEST_ISSUER"], os.environ["TEST_RESOURCE"]
mcp = build(
    token_verifier=JWTVerifier(f"{issuer}/jwks", issuer=issuer, audience=resource),
    auth=AuthSettings(issuer_url=issuer, resource_server_url=resource, required_scopes=["shop"]),
)
mcp.remove_tool("order_book")


@mcp.tool()
async def order_book(
    title: str,
    stock: Annotated[Stock, Resolve(check_stock)],
    backorder: Annotated[Backorder, Resolve(confirm_backorder)],
    ctx: Context,
) -> str:
    """Order a book; who ordered it goes to the run log."""
    token = ctx.access_token
    runs = Path(os.environ["FLEET_EFFECTS_DIR"]) / "runs.log"
    runs.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(runs, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{token.subject if token else '-'} {title}\\n".encode())
    finally:
        os.close(fd)
    return f"Backordered {title!r} for {token.subject if token else 'nobody'}."
'''


class Memory:
    """A ``TokenStorage`` in memory: what one signed-in client keeps."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user's browser: follows the authorization URL, comes back with the redirect."""

    def __init__(self) -> None:
        self.redirect: dict[str, str] = {}
        self.visited: list[str] = []

    async def open(self, url: str) -> None:
        self.visited.append(url)
        async with httpx2.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
            response = await http.get(url)
        assert response.status_code == 302, response.text
        location = urlsplit(response.headers["location"])
        self.redirect = {k: v[0] for k, v in parse_qs(location.query).items()}

    async def callback(self) -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=self.redirect["code"], state=self.redirect.get("state"), iss=self.redirect["iss"]
        )


class Posts:
    """Every request the client sent through nginx, and which replica answered it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any] | None, int, str | None]] = []

    async def record(self, response: httpx2.Response) -> None:
        request = response.request
        is_json = request.headers.get("content-type", "").startswith("application/json")
        body = json.loads(request.content) if request.method == "POST" and is_json else None
        replica = response.headers.get("x-engine-replica")
        self.sent.append((request.method, request.url.path, body, response.status_code, replica))

    def rounds(self, tool: str) -> list[tuple[dict[str, Any], str | None]]:
        return [
            (body, replica)
            for method, path, body, status, replica in self.sent
            if body is not None
            and body.get("method") == "tools/call"
            and body["params"].get("name") == tool
            and status == 200
        ]


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.fixture
async def deployed(tmp_path: Path) -> AsyncIterator[tuple[AuthorizationServer, Fleet]]:
    app = tmp_path / "guarded_bookshop.py"
    app.write_text(textwrap.dedent(SERVER))
    async with serve_authorization_server() as issuer:
        port = free_port()
        fleet = Fleet(
            replicas_count=2,
            redis="private",
            server=str(app),
            workdir=tmp_path / "fleet",
            install_nginx=False,
            port=port,
            env={"TEST_ISSUER": issuer.issuer, "TEST_RESOURCE": f"http://127.0.0.1:{port}/mcp"},
        )
        await anyio.to_thread.run_sync(fleet.start)
        try:
            yield issuer, fleet
        finally:
            await anyio.to_thread.run_sync(fleet.stop)


def runs(fleet: Fleet) -> list[str]:
    path = fleet.effects_dir / "runs.log"
    return path.read_text().splitlines() if path.exists() else []


async def test_the_official_client_signs_in_and_another_user_cannot_replay_its_round(
    deployed: tuple[AuthorizationServer, Fleet],
) -> None:
    issuer, fleet = deployed
    issuer.add_client("bob-app", "bob-secret", user="bob", scopes=("shop",))
    browser, posts = Browser(), Posts()
    signed_in = OAuthClientProvider(
        fleet.url,
        OAuthClientMetadata(
            redirect_uris=["http://127.0.0.1:1/callback"],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_post",
            client_name="interop test",
        ),
        Memory(),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    with anyio.fail_after(90):
        async with (
            httpx2.AsyncClient(
                auth=signed_in,
                trust_env=False,
                timeout=TIMEOUT,
                event_hooks={"response": [posts.record]},
            ) as http,
            Client(
                streamable_http_client(fleet.url, http_client=http),
                mode="2026-07-28",
                read_timeout_seconds=TIMEOUT,
                elicitation_callback=accept,
            ) as client,
        ):
            for _ in range(4):  # until two rounds of one call land on both replicas
                result = await client.call_tool("order_book", {"title": "Neuromancer"})
                assert result.content[0].text == (  # type: ignore[union-attr]
                    "Backordered 'Neuromancer' for dynamic-user."
                )
                (first, one), (second, two) = posts.rounds("order_book")[-2:]
                if one != two:
                    break
            assert one != two and {one, two} == set(fleet.replicas)

    # The client found everything from the 401: the metadata through nginx, then the issuer's.
    assert ("GET", "/.well-known/oauth-protected-resource/mcp") in [s[:2] for s in posts.sent]
    assert browser.visited and browser.visited[0].startswith(f"{issuer.issuer}/authorize?")
    authorize = parse_qs(urlsplit(browser.visited[0]).query)
    assert authorize["resource"] == [fleet.url]  # RFC 8707: a token for this resource
    assert authorize["code_challenge_method"] == ["S256"]
    assert "requestState" not in first["params"] and "requestState" in second["params"]
    before = runs(fleet)
    assert before and all(line == "dynamic-user Neuromancer" for line in before)

    # Bob signs in with client credentials and replays the first user's round 2.
    bob = ClientCredentialsOAuthProvider(
        fleet.url, Memory(), "bob-app", "bob-secret", scope="shop", issuer=issuer.issuer
    )
    replayed = {**second, "id": 99}
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(auth=bob, trust_env=False, timeout=TIMEOUT) as http:
            headers = {
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "order_book",
            }
            answers = [await http.post(fleet.url, json=replayed, headers=headers)]
            answers.append(await http.post(fleet.url, json=replayed, headers=headers))
    assert {answer.headers["x-engine-replica"] for answer in answers} == set(fleet.replicas)
    for answer in answers:
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["code"], error["message"]) == (-32602, "Invalid or expired requestState")
    assert runs(fleet) == before  # no body ran for bob
