"""Streamable HTTP (2026-07-28): what the one endpoint admits before any JSON-RPC is read:
POST on its path, a JSON body within the size limit, a local or configured host and origin.

Section marks (§) refer to the wire rules of MCP 2026-07-28 and its Streamable HTTP transport.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from examples import conformance_server
from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import (
    asgi_client,
    assert_error,
    assert_result,
    headers_for,
    post,
    request,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]

conformance = conformance_server.mcp


# --- Content-Type and body size -----------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_that_is_not_declared_json_is_415(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    response = await post(client, request("tools/list"), headers={"Content-Type": content_type})
    assert_error(response, 415, -32600, id=None)


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
async def test_json_content_types_with_parameters_or_capitals_are_accepted(
    client: httpx.AsyncClient, content_type: str
) -> None:
    response = await post(client, request("tools/list"), headers={"Content-Type": content_type})
    assert_result(response)


def padded(size: int) -> bytes:
    """A valid tools/list request of exactly ``size`` bytes."""
    body = request("tools/list", meta={"pad": ""})
    body["params"]["_meta"]["pad"] = "x" * (size - len(json.dumps(body).encode()))
    content = json.dumps(body).encode()
    assert len(content) == size
    return content


@pytest.fixture
async def small() -> AsyncIterator[httpx.AsyncClient]:
    """The conformance fixtures with a 1 KiB body limit."""
    async with asgi_client(conformance.streamable_http_app(max_body_bytes=1024)) as client:
        yield client


async def test_a_body_at_the_limit_is_served(small: httpx.AsyncClient) -> None:
    headers = headers_for(request("tools/list"))
    assert_result(await small.post("/mcp", content=padded(1024), headers=headers))


async def test_a_body_over_the_limit_is_413(small: httpx.AsyncClient) -> None:
    headers = headers_for(request("tools/list"))
    response = await small.post("/mcp", content=padded(1025), headers=headers)
    assert_error(response, 413, -32600, id=None)


async def test_a_body_over_the_limit_is_413_even_when_content_length_lies(
    small: httpx.AsyncClient,
) -> None:
    headers = {**headers_for(request("tools/list")), "Content-Length": "100"}
    response = await small.post("/mcp", content=padded(5000), headers=headers)
    assert_error(response, 413, -32600, id=None)


async def test_a_declared_length_over_the_limit_is_413_before_the_body_is_read(
    small: httpx.AsyncClient,
) -> None:
    headers = {**headers_for(request("tools/list")), "Content-Length": "999999999"}
    response = await small.post("/mcp", content=padded(200), headers=headers)
    assert_error(response, 413, -32600, id=None)


async def test_a_chunked_body_over_the_limit_is_413(small: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(50):
            yield b" " * 100

    headers = headers_for(request("tools/list"))
    response = await small.post("/mcp", content=chunks(), headers=headers)
    assert "content-length" not in response.request.headers
    assert_error(response, 413, -32600, id=None)


async def test_a_chunked_body_under_the_limit_is_served(small: httpx.AsyncClient) -> None:
    content = json.dumps(request("tools/list")).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(content), 10):
            yield content[i : i + 10]

    headers = headers_for(request("tools/list"))
    assert_result(await small.post("/mcp", content=chunks(), headers=headers))


# --- the endpoint -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_only_post_is_allowed(client: httpx.AsyncClient, method: str) -> None:
    response = await client.request(method, "/mcp")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/", "/other", "/mcp/extra", "/mcpx"])
async def test_other_paths_are_404(client: httpx.AsyncClient, path: str) -> None:
    response = await post(client, request("tools/list"), path=path)
    assert response.status_code == 404


async def test_the_app_answers_under_a_starlette_mount() -> None:
    parent = Starlette(routes=[Mount("/api", app=conformance.streamable_http_app())])
    async with asgi_client(parent) as client:
        assert_result(await post(client, request("tools/list"), path="/api/mcp"))
        assert (await client.get("/api/mcp")).status_code == 405
        assert (await post(client, request("tools/list"), path="/mcp")).status_code == 404


# --- DNS rebinding (§5.1.1 Security) -------------------------------------------------------------


async def test_a_foreign_host_is_refused(client: httpx.AsyncClient) -> None:
    response = await post(client, request("tools/list"), headers={"Host": "evil.example.com"})
    assert_error(response, 421, -32600, id=None)  # Misdirected Request: not a host served here


async def test_a_foreign_origin_is_refused(client: httpx.AsyncClient) -> None:
    response = await post(
        client, request("tools/list"), headers={"Origin": "http://evil.example.com"}
    )
    assert_error(response, 403, -32600, id=None)


@pytest.mark.parametrize(
    "origin", ["http://localhost:1234", "http://127.0.0.1:8080", "http://[::1]:3000"]
)
async def test_a_local_origin_is_accepted(client: httpx.AsyncClient, origin: str) -> None:
    assert_result(await post(client, request("tools/list"), headers={"Origin": origin}))


async def test_allowed_hosts_admits_a_configured_host() -> None:
    app = conformance.streamable_http_app(allowed_hosts=["mcp.example.com"])
    async with asgi_client(app, "http://mcp.example.com:8443") as client:
        assert_result(await post(client, request("tools/list")))
        refused = await post(client, request("tools/list"), headers={"Host": "evil.example.com"})
        assert refused.status_code == 421


async def test_allowed_origins_admits_a_configured_origin() -> None:
    app = conformance.streamable_http_app(allowed_origins=["https://app.example.com"])
    async with asgi_client(app) as client:
        ok = await post(
            client, request("tools/list"), headers={"Origin": "https://app.example.com"}
        )
        assert_result(ok)
        bad = await post(client, request("tools/list"), headers={"Origin": "https://example.com"})
        assert bad.status_code == 403


async def test_engine_allowed_hosts_adds_hosts_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENGINE_ALLOWED_HOSTS", "a.example.com, b.example.com")
    app = build(keys=[KEY]).streamable_http_app()  # the environment is read when a server is made
    async with asgi_client(app, "http://b.example.com") as client:
        assert_result(await post(client, request("tools/list")))
