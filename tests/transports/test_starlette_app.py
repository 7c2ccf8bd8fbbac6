"""``mcp.streamable_http_app()`` as code written for the official server uses it: a Starlette
application with routes, a router's lifespan and mounts, its options spelled either way."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from engine import Context, Elicit, MCPServer, Resolve
from engine.auth.provider import AccessToken
from engine.auth.settings import AuthSettings
from tests.conftest import KEY
from tests.http_helpers import asgi_client, assert_result, call, post, request

pytestmark = pytest.mark.anyio

LEGACY = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",  # what a 2025-11-25 client sends after initialize
}


def legacy(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


INITIALIZE = legacy(
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    },
)


class Quantity(BaseModel):
    copies: int


async def ask_quantity() -> Elicit[Quantity]:
    return Elicit("How many copies?", Quantity)


def notes() -> MCPServer:
    mcp = MCPServer("Notes", keys=[KEY])

    @mcp.tool()
    def add_note(text: str) -> str:
        """Save a note."""
        return f"Saved: {text}"

    @mcp.tool()
    async def pack(ctx: Context) -> str:
        """Pack the order, reporting progress."""
        await ctx.report_progress(1, 2)
        return "packed"

    @mcp.tool()
    async def reserve(title: str, quantity: Annotated[Quantity, Resolve(ask_quantity)]) -> str:
        """Reserve copies, asking how many."""
        return f"Reserved {quantity.copies} of {title}."

    return mcp


# --- the app is Starlette ----------------------------------------------------------------------


def test_the_app_lists_its_endpoint_and_custom_routes() -> None:
    mcp = notes()

    @mcp.custom_route("/health", methods=["GET"], name="health")
    async def health(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    app = mcp.streamable_http_app()
    assert isinstance(app, Starlette)
    endpoint, custom = app.routes
    assert isinstance(endpoint, Route) and endpoint.path == "/mcp"
    assert isinstance(custom, Route) and (custom.path, custom.name) == ("/health", "health")


def test_with_auth_the_metadata_route_is_listed() -> None:
    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return None

    mcp = MCPServer(
        "Notes",
        keys=[KEY],
        token_verifier=Verifier(),
        auth=AuthSettings(issuer_url="https://auth.example.com"),
    )
    paths = [route.path for route in mcp.streamable_http_app().routes]  # type: ignore[attr-defined]
    assert paths == ["/mcp", "/.well-known/oauth-protected-resource/mcp"]


async def test_the_routers_lifespan_runs_the_server() -> None:
    seen: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        seen.append("started")
        yield {}
        seen.append("stopped")

    app = MCPServer("Notes", keys=[KEY], lifespan=lifespan).streamable_http_app()
    async with app.router.lifespan_context(app):
        assert seen == ["started"]
    assert seen == ["started", "stopped"]


async def test_mounted_apps_serve_under_their_prefix_and_the_session_manager_runs_them() -> None:
    first, second = notes(), notes()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with first.session_manager.run(), second.running():
            yield

    app = Starlette(
        routes=[
            Mount("/a", app=first.streamable_http_app()),
            Mount("/b", app=second.streamable_http_app(streamable_http_path="/")),
        ],
        lifespan=lifespan,
    )
    inner = app.routes[1].routes  # type: ignore[attr-defined]
    assert [route.path for route in inner] == ["/"]
    async with app.router.lifespan_context(app), asgi_client(app) as http:
        for path in ("/a/mcp", "/b/"):  # Starlette's Mount("/b") matches /b/
            assert_result(await post(http, request("tools/list"), path=path))
        assert (await post(http, request("tools/list"), path="/mcp")).status_code == 404


# --- options, in either spelling -----------------------------------------------------------------


async def test_the_official_spellings_of_path_and_body_limit() -> None:
    app = notes().streamable_http_app(streamable_http_path="/rpc", max_request_body_size=300)
    async with asgi_client(app) as http:
        assert_result(await post(http, request("tools/list", id=1), path="/rpc"))
        large = await post(http, call("add_note", {"text": "x" * 300}), path="/rpc")
        unlabelled = await http.post("/rpc", content=b"y" * 400)  # no Content-Type either
    assert large.status_code == 413
    assert unlabelled.status_code == 413  # the size is said first, then the media type


def test_an_option_in_both_spellings_or_unknown_is_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        notes().streamable_http_app(path="/a", streamable_http_path="/b")
    with pytest.raises(TypeError, match="unexpected keyword arguments: port"):
        notes().streamable_http_app(port=8000)  # type: ignore[call-arg]


class Security(BaseModel):
    """The fields of the official ``TransportSecuritySettings``."""

    enable_dns_rebinding_protection: bool = True
    allowed_hosts: list[str] = []
    allowed_origins: list[str] = []


async def test_transport_security_settings_are_read_by_their_fields() -> None:
    security = Security(
        allowed_hosts=["mcp.example.com:*"], allowed_origins=["https://app.example.com:*"]
    )
    app = notes().streamable_http_app(transport_security=security)
    async with asgi_client(app, "https://mcp.example.com:8443") as http:
        origin = {"Origin": "https://app.example.com:3000"}
        assert_result(await post(http, request("tools/list"), headers=origin))
        other = await post(http, request("tools/list"), headers={"Origin": "https://x.example"})
        local = await post(http, request("tools/list"), headers={"Host": "localhost"})
    assert other.status_code == 403
    assert local.status_code == 421  # only the hosts it names

    off = notes().streamable_http_app(transport_security={"enable_dns_rebinding_protection": False})
    async with asgi_client(off, "https://anywhere.example") as http:
        assert_result(
            await post(http, request("tools/list"), headers={"Origin": "https://x.example"})
        )

    with pytest.raises(TypeError, match="not both"):
        notes().streamable_http_app(transport_security=security, allowed_hosts=["a.example"])


async def test_a_host_that_is_not_loopback_is_allowed_besides_the_loopback_names() -> None:
    app = notes().streamable_http_app(host="mcp.internal")
    for base, status in [("http://mcp.internal:8000", 200), ("http://127.0.0.1", 200)]:
        async with asgi_client(app, base) as http:
            assert (await post(http, request("tools/list"))).status_code == status
    async with asgi_client(app, "http://evil.example") as http:
        assert (await post(http, request("tools/list"))).status_code == 421


async def test_json_response_answers_a_call_with_progress_as_one_json_body() -> None:
    progress = {"progressToken": "p1"}
    for json_response, media_type in [(False, "text/event-stream"), (True, "application/json")]:
        app = notes().streamable_http_app(json_response=json_response)
        async with asgi_client(app) as http:
            response = await post(http, call("pack", {}, meta=progress))
        assert response.headers["content-type"].startswith(media_type)


def test_session_idle_timeout_is_the_session_ttl() -> None:
    mcp = notes()
    assert mcp.session_manager.session_idle_timeout == 3600
    mcp.streamable_http_app(session_idle_timeout=120, max_sessions=None)
    assert mcp.session_manager.session_idle_timeout == 120
    assert mcp.core.runtime.sessions.ttl == 120
    with pytest.raises(ValueError, match="always expire"):
        mcp.streamable_http_app(session_idle_timeout=None)


# --- stateless_http ------------------------------------------------------------------------------


async def test_a_2025_session_is_told_of_changes_on_its_stream() -> None:
    app = notes().streamable_http_app()
    async with app.router.lifespan_context(app), asgi_client(app) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers=LEGACY)
    assert "mcp-session-id" in opened.headers
    assert opened.json()["result"]["capabilities"] == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
    }


async def test_stateless_http_serves_2025_clients_without_sessions() -> None:
    app = notes().streamable_http_app(stateless_http=True)
    async with app.router.lifespan_context(app), asgi_client(app) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers=LEGACY)
        listed = await http.post("/mcp", json=legacy("tools/list", id=2), headers=LEGACY)
        saved = await http.post(
            "/mcp",
            json=legacy("tools/call", {"name": "add_note", "arguments": {"text": "milk"}}, id=3),
            headers=LEGACY,
        )
        asking = await http.post(
            "/mcp",
            json=legacy("tools/call", {"name": "reserve", "arguments": {"title": "Dune"}}, id=4),
            headers=LEGACY,
        )
        subscribed = await http.post(
            "/mcp", json=legacy("resources/subscribe", {"uri": "note://a"}, id=5), headers=LEGACY
        )
    assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
    # No session stream, so no change can reach the client, and none is announced.
    assert opened.json()["result"]["capabilities"] == {
        "tools": {"listChanged": False},
        "prompts": {"listChanged": False},
        "resources": {"listChanged": False, "subscribe": False},
        "logging": {},
    }
    assert [tool["name"] for tool in listed.json()["result"]["tools"]] == [
        "add_note",
        "pack",
        "reserve",
    ]
    assert saved.json()["result"]["content"][0]["text"] == "Saved: milk"
    assert "stateless_http=True" in asking.json()["error"]["message"]
    assert "subscriptions/listen" in subscribed.json()["error"]["message"]

    modern = notes().streamable_http_app(stateless_http=True)
    async with asgi_client(modern) as http:
        form = {"elicitation": {"form": {}}}
        first = assert_result(
            await post(http, call("reserve", {"title": "Dune"}, capabilities=form))
        )
    assert first["resultType"] == "input_required"  # 2026-07-28 needs no session to ask


# --- the old HTTP+SSE transport ------------------------------------------------------------------


def test_the_old_sse_transport_is_refused_with_what_to_serve_instead() -> None:
    mcp = notes()
    with pytest.raises(NotImplementedError, match=r"streamable_http_app\(\)"):
        mcp.sse_app()
    with pytest.raises(ValueError, match="2024-11-05"):
        mcp.run("sse")


async def test_an_official_access_token_from_a_verifier_is_taken_by_its_fields() -> None:
    class OfficialToken(BaseModel):  # the official AccessToken's fields
        token: str
        client_id: str
        scopes: list[str]
        expires_at: int | None = None
        resource: str | None = None

    class Verifier:
        async def verify_token(self, token: str) -> Any:
            return OfficialToken(token=token, client_id="alice", scopes=["notes"])

    mcp = MCPServer(
        "Notes",
        keys=[KEY],
        token_verifier=Verifier(),
        auth=AuthSettings(issuer_url="https://auth.example.com", required_scopes=["notes"]),
    )
    async with asgi_client(mcp.streamable_http_app()) as http:
        bearer = {"Authorization": "Bearer abc"}
        assert_result(await post(http, request("tools/list"), headers=bearer))


async def test_a_trailing_slash_reaches_the_endpoint_and_custom_routes_through_starlette() -> None:
    mcp = notes()

    @mcp.custom_route("/version", methods=["GET"])
    async def version(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"1.2"})

    async with asgi_client(mcp.streamable_http_app()) as http:
        assert_result(await post(http, request("tools/list"), path="/mcp/"))
        assert (await http.get("/version/")).text == "1.2"
        assert (await http.post("/version")).headers["allow"] == "GET, HEAD"
