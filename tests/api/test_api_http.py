"""Plain HTTP beside ``/mcp``: ``@mcp.custom_route``, ASGI middleware, and CORS for browsers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from engine import MCPServer
from engine.transports._asgi import Receive, Scope, Send, send_plain
from engine.transports.starlette_app import MCPStarlette
from tests.conftest import KEY
from tests.http_helpers import asgi_client, call, post, request

pytestmark = pytest.mark.anyio

INSPECTOR = "http://localhost:6274"


def shop() -> MCPServer:
    mcp = MCPServer("Shop", keys=[KEY])

    @mcp.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return mcp


# --- custom routes ------------------------------------------------------------------------------


async def test_a_starlette_handler_serves_its_path() -> None:
    mcp = shop()

    @mcp.custom_route("/status", methods=["GET"])
    async def status(request: Request) -> Response:
        return JSONResponse({"ok": True, "q": request.query_params.get("q")})

    async with asgi_client(mcp.streamable_http_app()) as http:
        response = await http.get("/status?q=1")
        head = await http.head("/status/")
        posted = await http.post("/status")
        tools = await post(http, request("tools/list"))
    assert response.status_code == 200
    assert response.json() == {"ok": True, "q": "1"}
    assert head.status_code == 200
    assert posted.status_code == 405
    assert posted.headers["allow"] == "GET, HEAD"
    assert tools.status_code == 200
    assert status.__name__ == "status"  # the decorator returns the handler unchanged


async def test_a_plain_asgi_handler_and_methods() -> None:
    mcp = shop()

    @mcp.custom_route("/hook", methods=["post", "PUT"], name="hook")
    async def hook(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        await send_plain(send, 201, scope["method"].encode() + b" " + message.get("body", b""))

    @mcp.custom_route("/hook", methods=["GET"])
    async def read_hook(request: Request) -> Response:
        return PlainTextResponse("read")

    async with asgi_client(mcp.streamable_http_app()) as http:
        created = await http.post("/hook", content=b"hello")
        put = await http.put("/hook", content=b"x")
        read = await http.get("/hook")
        missing = await http.get("/nothing")
    assert (created.status_code, created.text) == (201, "POST hello")
    assert (put.status_code, put.text) == (201, "PUT x")
    assert read.text == "read"
    assert missing.status_code == 404
    assert [route.name for route in mcp.custom_routes.routes] == ["hook", None]


async def test_a_plain_def_starlette_handler_runs_in_a_thread() -> None:
    mcp = shop()

    @mcp.custom_route("/sync")
    def sync(request: Request) -> Response:
        return PlainTextResponse(f"sync {request.method}")

    async with asgi_client(mcp.streamable_http_app()) as http:
        response = await http.get("/sync")
    assert response.text == "sync GET"


@pytest.mark.parametrize("path", ["/mcp", "/healthz", "/metrics", "/mcp/", "/healthz/"])
def test_a_route_cannot_shadow_the_engines_own_paths(path: str) -> None:
    mcp = shop()
    with pytest.raises(ValueError, match="would shadow"):
        mcp.custom_route(path)(_ok)


def test_routes_are_refused_when_malformed_or_taken() -> None:
    mcp = shop()
    mcp.custom_route("/status")(_ok)
    with pytest.raises(ValueError, match="already registered for GET, HEAD"):
        mcp.custom_route("/status/", methods=["GET"])(_ok)
    with pytest.raises(ValueError, match="start with '/'"):
        mcp.custom_route("status")(_ok)
    with pytest.raises(ValueError, match="templates"):
        mcp.custom_route("/items/{id}")(_ok)
    with pytest.raises(TypeError, match="list of HTTP methods"):
        mcp.custom_route("/x", methods="GET")(_ok)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes 2 parameters"):
        mcp.custom_route("/y")(lambda a, b: None)


def test_a_route_on_a_custom_mcp_path_is_refused_when_the_app_is_made() -> None:
    mcp = shop()
    mcp.custom_route("/api")(_ok)
    with pytest.raises(ValueError, match="MCP endpoint"):
        mcp.streamable_http_app(path="/api")


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send_plain(send, 200, b"ok")


# --- middleware ----------------------------------------------------------------------------------


def tagging(tag: str) -> Any:
    def factory(app: Any) -> Any:
        async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
            async def send_tagged(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    headers = [*message.get("headers", ()), (b"x-tag", tag.encode())]
                    message = {**message, "headers": headers}
                await send(message)

            await app(scope, receive, send_tagged if scope["type"] == "http" else send)

        return tagged

    return factory


async def test_middleware_factories_wrap_the_app_first_outermost() -> None:
    app = shop().streamable_http_app(middleware=[tagging("outer"), tagging("inner")])
    assert isinstance(app, MCPStarlette)  # mcp.run drains it as any other
    async with asgi_client(app) as http:
        response = await post(http, call("add", {"a": 1, "b": 2}))
        health = await http.get("/healthz")
    assert response.status_code == 200
    assert response.headers.get_list("x-tag") == ["inner", "outer"]
    assert health.headers.get_list("x-tag") == ["inner", "outer"]


async def test_starlette_middleware_objects_are_applied() -> None:
    async def stamp(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["x-stamp"] = request.url.path
        return response

    app = shop().streamable_http_app(middleware=[Middleware(BaseHTTPMiddleware, dispatch=stamp)])
    async with asgi_client(app) as http:
        response = await post(http, call("add", {"a": 1, "b": 2}))
    assert response.status_code == 200
    assert response.headers["x-stamp"] == "/mcp"
    assert json.loads(response.text)["result"]["structuredContent"] == {"result": 3}


def test_something_else_as_middleware_is_refused() -> None:
    with pytest.raises(TypeError, match="middleware factories"):
        shop().streamable_http_app(middleware=[42])


async def test_without_middleware_a_request_to_mcp_skips_starlette() -> None:
    # Starlette builds its middleware stack on the first request that goes through it.
    plain = shop().streamable_http_app(cors_origins=[])  # no origin: CORS stays off
    async with asgi_client(plain) as http:
        assert (await post(http, call("add", {"a": 1, "b": 2}))).status_code == 200
        assert plain.middleware_stack is None
        assert (await http.get("/healthz")).status_code == 200
        assert plain.middleware_stack is not None

    wrapped = shop().streamable_http_app(middleware=[tagging("outer")])
    async with asgi_client(wrapped) as http:
        assert (await post(http, call("add", {"a": 1, "b": 2}))).headers["x-tag"] == "outer"


# --- CORS ----------------------------------------------------------------------------------------


def preflight(origin: str, **extra: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, mcp-protocol-version, mcp-param-region",
        **extra,
    }


async def test_cors_is_off_by_default() -> None:
    async with asgi_client(shop().streamable_http_app()) as http:
        answer = await http.options("/mcp", headers=preflight(INSPECTOR))
        response = await post(http, request("tools/list"), headers={"Origin": INSPECTOR})
    assert answer.status_code == 405
    assert not [h for h in answer.headers if h.startswith("access-control-")]
    assert not [h for h in response.headers if h.startswith("access-control-")]


async def test_a_preflight_from_an_allowed_origin_is_answered() -> None:
    app = shop().streamable_http_app(cors_origins=[INSPECTOR])
    async with asgi_client(app) as http:
        answer = await http.options("/mcp", headers=preflight(INSPECTOR))
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == INSPECTOR
    assert "Origin" in answer.headers["vary"]
    methods = answer.headers["access-control-allow-methods"]
    assert {"GET", "POST", "DELETE", "OPTIONS"} <= {m.strip() for m in methods.split(",")}
    allowed = {h.strip().lower() for h in answer.headers["access-control-allow-headers"].split(",")}
    assert {
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "authorization",
        "mcp-method",
        "mcp-name",
        "mcp-param-region",
    } <= allowed
    assert answer.headers["access-control-max-age"] == "600"


async def test_an_allowed_origins_responses_are_readable() -> None:
    app = shop().streamable_http_app(cors_origins=[INSPECTOR + "/"])
    async with asgi_client(app) as http:
        response = await post(http, call("add", {"a": 2, "b": 2}), headers={"Origin": INSPECTOR})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == INSPECTOR
    exposed = {h.strip() for h in response.headers["access-control-expose-headers"].split(",")}
    assert exposed == {"Mcp-Session-Id", "X-Engine-Replica"}


async def test_a_disallowed_origin_is_still_refused() -> None:
    app = shop().streamable_http_app(cors_origins=[INSPECTOR])
    evil = "http://evil.example"
    async with asgi_client(app) as http:
        answer = await http.options("/mcp", headers=preflight(evil))
        response = await post(http, request("tools/list"), headers={"Origin": evil})
        no_origin = await post(http, request("tools/list"))
    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers
    assert no_origin.status_code == 200
    assert "access-control-allow-origin" not in no_origin.headers


async def test_any_origin_only_when_asked_for() -> None:
    app = shop().streamable_http_app(cors_origins=["*"])
    async with asgi_client(app) as http:
        answer = await http.options("/mcp", headers=preflight("https://anywhere.example"))
        response = await post(
            http, request("tools/list"), headers={"Origin": "https://anywhere.example"}
        )
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"


async def test_custom_routes_get_cors_too_and_their_methods_are_listed() -> None:
    mcp = shop()

    @mcp.custom_route("/upload", methods=["PUT"])
    async def upload(request: Request) -> Response:
        return PlainTextResponse("stored")

    app = mcp.streamable_http_app(cors_origins=[INSPECTOR])
    async with asgi_client(app) as http:
        answer = await http.options("/upload", headers=preflight(INSPECTOR))
        stored = await http.put("/upload", headers={"Origin": INSPECTOR})
    assert "PUT" in answer.headers["access-control-allow-methods"]
    assert stored.text == "stored"
    assert stored.headers["access-control-allow-origin"] == INSPECTOR


def test_a_malformed_cors_origin_is_refused() -> None:
    for origin in ("inspector.example", "https://*.example.com", "https://a.example/path"):
        with pytest.raises(ValueError, match="is not an origin"):
            shop().streamable_http_app(cors_origins=[origin])
    with pytest.raises(TypeError, match="list of origins"):
        shop().streamable_http_app(cors_origins=INSPECTOR)


async def test_the_lifespan_reaches_the_app_through_middleware_and_cors() -> None:
    started: list[bool] = []

    def lifespan(server: MCPServer) -> Any:
        import contextlib

        @contextlib.asynccontextmanager
        async def running() -> Any:
            started.append(True)
            yield {}

        return running()

    mcp = MCPServer("Lives", keys=[KEY], lifespan=lifespan)
    app = mcp.streamable_http_app(middleware=[tagging("t")], cors_origins=[INSPECTOR])
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    assert started == [True]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
