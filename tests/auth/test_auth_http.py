"""Bearer tokens on the MCP endpoint, as the MCP authorization spec has them over HTTP.

A server with ``auth`` and a ``token_verifier`` refuses a request without a valid token with 401
and a ``WWW-Authenticate`` challenge naming its protected resource metadata (RFC 9728), a token
without a required scope with 403 ``insufficient_scope``, and a verifier that cannot decide with
503. The metadata, ``/healthz`` and ``/metrics`` stay open; stdio stays unauthenticated. The
verifier here is a plain ``TokenVerifier`` of tokens the test hands out; the JWT and
introspection verifiers have tests of their own.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Context, MCPServer
from engine.auth.current import get_access_token
from engine.auth.provider import AccessToken
from engine.auth.settings import AuthSettings
from examples.bookshop import build as build_bookshop
from tests.conftest import KEY
from tests.fleet_helpers import ROOT, serve_asgi
from tests.http_helpers import (
    assert_error,
    assert_result,
    call,
    headers_for,
    request,
    retry,
    text_of,
)

pytestmark = pytest.mark.anyio

ISSUER = "https://auth.example.com/realms/shop"
TIMEOUT = 20.0


class HandedOut:
    """A verifier of the tokens a test hands out: each one names its subject and scopes."""

    def __init__(self) -> None:
        self.tokens: dict[str, AccessToken] = {}
        self.failing = False

    def issue(self, subject: str, *scopes: str) -> str:
        token = secrets.token_urlsafe(24)
        self.tokens[token] = AccessToken(
            token=token,
            client_id="bookshop-app",
            scopes=list(scopes),
            subject=subject,
            claims={"iss": ISSUER, "sub": subject},
        )
        return token

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.failing:
            raise ConnectionError("introspection endpoint did not answer")
        return self.tokens.get(token)


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer`` challenge."""
    value = response.headers["www-authenticate"]
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer", value
    fields = {}
    for part in rest.split('", '):
        name, _, quoted = part.partition("=")
        fields[name.strip()] = quoted.strip().strip('"')
    return fields


def bookshop(verifier: HandedOut, **auth: Any) -> MCPServer:
    """The bookshop behind tokens with scope ``shop``, and a tool, prompt and resource that
    need ``books:write`` besides."""
    settings = AuthSettings(issuer_url=ISSUER, required_scopes=["shop"], **auth)
    mcp = build_bookshop(keys=[KEY], token_verifier=verifier, auth=settings)

    @mcp.tool(scopes=["books:write"])
    def restock(title: str) -> str:
        """Add copies of a book (staff only)."""
        return f"Restocked {title!r}."

    @mcp.prompt(scopes=["books:write"])
    def stocktake() -> str:
        return "Count every shelf."

    @mcp.resource("shop://ledger", scopes=["books:write"])
    def ledger() -> str:
        return "all square"

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """Who the caller is, from the token the tool sees two ways."""
        token = ctx.access_token
        assert token is not None and get_access_token() is token
        return f"{token.subject} with {' '.join(token.scopes)}"

    return mcp


@pytest.fixture
def verifier() -> HandedOut:
    return HandedOut()


@pytest.fixture
async def base(verifier: HandedOut) -> AsyncIterator[str]:
    async with serve_asgi(bookshop(verifier).streamable_http_app()) as url:
        yield url


async def post(
    base: str, body: dict[str, Any], token: str | None, **headers: str
) -> httpx.Response:
    sent = headers_for(body) | headers
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
        return await http.post(f"{base}/mcp", json=body, headers=sent)


# --- 401: no token, or one the verifier refuses -------------------------------------------------


async def test_a_request_without_a_token_gets_a_challenge_naming_the_metadata(base: str) -> None:
    response = await post(base, call("order_book", {"title": "Dune"}), None)
    assert response.status_code == 401
    assert challenge(response) == {
        "scope": "shop",
        "resource_metadata": f"{base}/.well-known/oauth-protected-resource/mcp",
    }
    refused = response.json()
    assert refused["error"] == "unauthorized"
    assert ISSUER in refused["error_description"]
    assert "Authorization: Bearer" in refused["error_description"]


@pytest.mark.parametrize(
    "authorization",
    ["Bearer not-a-token-we-issued", "Bearer two words", "Bearer", "Bearer " + "x" * 20000],
    ids=["unknown", "spaces", "empty", "oversized"],
)
async def test_a_token_that_is_not_valid_here_is_refused(base: str, authorization: str) -> None:
    body = call("order_book", {"title": "Dune"})
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
        response = await http.post(
            f"{base}/mcp", json=body, headers=headers_for(body) | {"Authorization": authorization}
        )
    assert response.status_code == 401
    fields = challenge(response)
    assert fields["error"] == "invalid_token"
    assert fields["resource_metadata"] == f"{base}/.well-known/oauth-protected-resource/mcp"
    assert response.json()["error"] == "invalid_token"


async def test_another_scheme_is_no_bearer_token(base: str) -> None:
    response = await post(
        base, call("order_book", {"title": "Dune"}), None, Authorization="Basic dXNlcjpwYXNz"
    )
    assert response.status_code == 401
    assert "error" not in challenge(response)


async def test_every_method_and_era_needs_the_token(base: str) -> None:
    listing = await post(base, request("tools/list"), None)
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
        initialize = await http.post(
            f"{base}/mcp", json=legacy, headers={"Accept": "application/json, text/event-stream"}
        )
        stream = await http.get(f"{base}/mcp", headers={"Mcp-Session-Id": "abc"})
        delete = await http.delete(f"{base}/mcp", headers={"Mcp-Session-Id": "abc"})
    assert [r.status_code for r in (listing, initialize, stream, delete)] == [401] * 4


# --- 403: a valid token without a scope ---------------------------------------------------------


async def test_a_token_without_the_servers_scope_is_refused_403(
    base: str, verifier: HandedOut
) -> None:
    response = await post(base, request("tools/list"), verifier.issue("ada"))
    assert response.status_code == 403
    fields = challenge(response)
    assert fields["error"] == "insufficient_scope"
    assert fields["scope"] == "shop"
    assert fields["resource_metadata"] == f"{base}/.well-known/oauth-protected-resource/mcp"


async def test_a_handler_with_scopes_is_listed_but_refused_without_them(
    base: str, verifier: HandedOut
) -> None:
    customer = verifier.issue("ada", "shop")
    listing = assert_result(await post(base, request("tools/list"), customer))
    assert "restock" in [tool["name"] for tool in listing["tools"]]
    refused = [
        await post(base, call("restock", {"title": "Dune"}), customer),
        await post(base, request("prompts/get", {"name": "stocktake"}), customer),
        await post(base, request("resources/read", {"uri": "shop://ledger"}), customer),
    ]
    for response in refused:
        assert response.status_code == 403, response.text
        fields = challenge(response)
        assert fields["error"] == "insufficient_scope"
        assert fields["scope"] == "shop books:write"
        assert "books:write" in response.json()["error_description"]
    staff = verifier.issue("grace", "shop", "books:write")
    restocked = assert_result(await post(base, call("restock", {"title": "Dune"}), staff))
    assert text_of(restocked) == "Restocked 'Dune'."


# --- what a tool sees of the token ---------------------------------------------------------------


async def test_a_tool_reads_the_callers_token(base: str, verifier: HandedOut) -> None:
    token = verifier.issue("ada", "shop", "books:read")
    result = assert_result(await post(base, call("whoami", {}), token))
    assert text_of(result) == "ada with shop books:read"


async def test_a_call_belongs_to_the_user_who_started_it(base: str, verifier: HandedOut) -> None:
    ada, mallory = verifier.issue("ada", "shop"), verifier.issue("mallory", "shop")
    started = await post(
        base, call("order_book", {"title": "Neuromancer"}, capabilities={"elicitation": {}}), ada
    )
    state = assert_result(started)["requestState"]
    stolen = await post(base, retry(state), mallory)
    error = assert_error(stolen, 400, -32602)
    assert "requestState" in error["message"]
    finished = assert_result(await post(base, retry(state), ada))
    assert text_of(finished) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


# --- 503: the verifier cannot decide ----------------------------------------------------------


async def test_a_verifier_that_cannot_decide_gets_503_and_the_token_is_kept(
    base: str, verifier: HandedOut, caplog: pytest.LogCaptureFixture
) -> None:
    token = verifier.issue("ada", "shop")
    verifier.failing = True
    response = await post(base, request("tools/list"), token)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert "www-authenticate" not in response.headers
    assert response.json()["error"] == "temporarily_unavailable"
    assert any("token verifier failed" in r.getMessage() for r in caplog.records)


async def test_the_token_never_reaches_the_log(
    base: str, verifier: HandedOut, caplog: pytest.LogCaptureFixture
) -> None:
    good = verifier.issue("ada", "shop")
    await post(base, call("whoami", {}), good)
    await post(base, call("restock", {"title": "Dune"}), good)  # 403
    await post(base, request("tools/list"), "forged-" + good)  # 401
    verifier.failing = True
    await post(base, request("tools/list"), good)  # 503
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text}" for r in caplog.records)
    assert "request refused (403)" in logged and "request refused (401)" in logged
    assert good not in logged
    assert good not in repr(verifier.tokens[good]) and good not in str(verifier.tokens[good])


# --- what stays open -----------------------------------------------------------------------------


async def test_health_metrics_and_the_metadata_need_no_token(
    base: str, verifier: HandedOut
) -> None:
    await post(base, request("tools/list"), None)
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
        health = await http.get(f"{base}/healthz")
        metrics = await http.get(f"{base}/metrics")
        suffixed = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")
        bare = await http.get(f"{base}/.well-known/oauth-protected-resource")
        preflight = await http.options(f"{base}/.well-known/oauth-protected-resource/mcp")
        other = await http.get(f"{base}/.well-known/oauth-protected-resource/elsewhere")
        posted = await http.post(f"{base}/.well-known/oauth-protected-resource/mcp")
    assert health.status_code == 200
    assert 'engine_auth_refusals_total{reason="no token"} 1' in metrics.text
    assert suffixed.status_code == bare.status_code == 200
    assert (
        suffixed.json()
        == bare.json()
        == {
            "resource": f"{base}/mcp",
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["books:write", "shop"],
        }
    )
    assert suffixed.headers["access-control-allow-origin"] == "*"
    assert preflight.status_code == 204
    assert (other.status_code, posted.status_code) == (404, 405)


# --- the resource URL: configured, or from the request --------------------------------------------


async def test_a_configured_resource_url_is_what_clients_are_told(verifier: HandedOut) -> None:
    mcp = bookshop(
        verifier,
        resource_server_url="https://mcp.example.com/shop/mcp",
        service_documentation_url="https://docs.example.com/shop",
        resource_name="The bookshop",
    )
    async with serve_asgi(mcp.streamable_http_app()) as base:
        response = await post(base, request("tools/list"), None)
        async with httpx.AsyncClient(trust_env=False) as http:
            document = (await http.get(f"{base}/.well-known/oauth-protected-resource")).json()
    metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/shop/mcp"
    assert challenge(response)["resource_metadata"] == metadata
    assert document["resource"] == "https://mcp.example.com/shop/mcp"
    assert document["resource_documentation"] == "https://docs.example.com/shop"
    assert document["resource_name"] == "The bookshop"


FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mcp.example.com"}


async def test_forwarded_headers_are_ignored_unless_the_deployment_trusts_them(
    base: str,
) -> None:
    # uvicorn itself takes X-Forwarded-Proto from the proxies it trusts (FORWARDED_ALLOW_IPS,
    # loopback by default), so only the host shows what the engine ignores.
    response = await post(base, request("tools/list"), None, **FORWARDED)
    host = base.removeprefix("http://")
    assert challenge(response)["resource_metadata"].split("/")[2] == host


@pytest.mark.parametrize("how", ["settings", "environment"])
async def test_a_trusted_proxys_forwarded_headers_name_the_resource(
    verifier: HandedOut, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "environment":
        monkeypatch.setenv("ENGINE_TRUST_FORWARDED", "1")
        mcp = bookshop(verifier)
    else:
        mcp = bookshop(verifier, trust_forwarded=True)
    app = mcp.streamable_http_app(allowed_hosts=["127.0.0.1", "mcp.example.com"])
    async with serve_asgi(app) as base:
        response = await post(base, request("tools/list"), None, **FORWARDED)
        async with httpx.AsyncClient(trust_env=False) as http:
            metadata = await http.get(
                f"{base}/.well-known/oauth-protected-resource/mcp", headers=FORWARDED
            )
    expected = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert challenge(response)["resource_metadata"] == expected
    assert metadata.json()["resource"] == "https://mcp.example.com/mcp"


# --- 2025-11-25: sessions belong to their user --------------------------------------------------


def legacy_client(url: str, http: httpx2.AsyncClient, **callbacks: Any) -> Client:
    return Client(
        streamable_http_client(url, http_client=http),
        mode="legacy",
        read_timeout_seconds=TIMEOUT,
        **callbacks,
    )


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_a_legacy_client_with_a_token_is_asked_mid_call(
    base: str, verifier: HandedOut
) -> None:
    token = verifier.issue("ada", "shop")
    async with (
        httpx2.AsyncClient(
            trust_env=False, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"}
        ) as http,
        legacy_client(f"{base}/mcp", http, elicitation_callback=accept) as client,
    ):
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
        whoami = await client.call_tool("whoami", {})
    assert result.content[0].text == "Backordered 'Neuromancer'; it ships in 2-3 weeks."  # type: ignore[union-attr]
    assert whoami.content[0].text == "ada with shop"  # type: ignore[union-attr]


async def test_another_users_token_cannot_use_a_legacy_session(
    base: str, verifier: HandedOut
) -> None:
    ada, mallory = verifier.issue("ada", "shop"), verifier.issue("mallory", "shop")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    accept_both = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:

        async def send(token: str, body: Any, **headers: str) -> httpx.Response:
            sent = accept_both | headers | {"Authorization": f"Bearer {token}"}
            return await http.post(f"{base}/mcp", json=body, headers=sent)

        opened = await send(ada, initialize)
        session = opened.headers["mcp-session-id"]
        theirs = await send(ada, listing, **{"Mcp-Session-Id": session})
        stolen = await send(mallory, listing, **{"Mcp-Session-Id": session})
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
        cancelled = await send(mallory, cancel, **{"Mcp-Session-Id": session})
        sid = {"Mcp-Session-Id": session, "Authorization": f"Bearer {mallory}"}
        deleted = await http.delete(f"{base}/mcp", headers=sid)
        still = await send(ada, listing, **{"Mcp-Session-Id": session})
    assert theirs.status_code == 200 and still.status_code == 200
    for refused in (stolen, cancelled, deleted):
        assert refused.status_code == 404
        assert "Session not found" in refused.json()["error"]["message"]


# --- stdio: credentials come from the environment -----------------------------------------------

STDIO_SERVER = """
from engine import Context, MCPServer
from engine.auth.provider import AccessToken
from engine.auth.settings import AuthSettings


class Nobody:
    async def verify_token(self, token: str) -> AccessToken | None:
        return None


mcp = MCPServer(
    "Guarded",
    token_verifier=Nobody(),
    auth=AuthSettings(issuer_url="https://auth.example.com", required_scopes=["shop"]),
)


@mcp.tool(scopes=["books:write"])
def restock(title: str, ctx: Context) -> str:
    return f"Restocked {title!r} (token: {ctx.access_token})"
"""


def test_stdio_stays_unauthenticated(tmp_path: Path) -> None:
    server = tmp_path / "guarded.py"
    server.write_text(textwrap.dedent(STDIO_SERVER))
    message = call("restock", {"title": "Dune"})
    done = subprocess.run(
        [sys.executable, "-m", "engine", "serve", str(server), "--stdio"],
        input=json.dumps(message) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "ENGINE_KEYS": KEY, "ENGINE_STORE": "none"},
        timeout=30,
    )
    [line] = done.stdout.splitlines()
    result = json.loads(line)["result"]
    assert result["content"][0]["text"] == "Restocked 'Dune' (token: None)"


# --- what MCPServer is given -------------------------------------------------------------------


def test_auth_and_its_verifier_come_together(verifier: HandedOut) -> None:
    settings = AuthSettings(issuer_url=ISSUER)
    with pytest.raises(ValueError, match="auth needs a token_verifier"):
        MCPServer("s", auth=settings)
    with pytest.raises(ValueError, match="token_verifier needs auth"):
        MCPServer("s", token_verifier=verifier)
    with pytest.raises(ValueError, match="resource server"):
        MCPServer("s", auth=settings, auth_server_provider=object())
    with pytest.raises(ValueError, match="resource server only"):
        AuthSettings(issuer_url=ISSUER, client_registration_options={"enabled": True})
    with pytest.raises(ValueError, match="not a scope"):
        AuthSettings(issuer_url=ISSUER, required_scopes=["two words"])
    mcp = MCPServer("s", token_verifier=verifier, auth=settings)
    with pytest.raises(ValueError, match="not a scope"):
        mcp.tool(name="greet", scopes=['say "hi"'])(lambda: None)
