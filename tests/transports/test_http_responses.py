"""Streamable HTTP (2026-07-28): the JSON-RPC answer a request gets from
``mcp.streamable_http_app()``: results and their hints, framing errors, unknown methods.

The tests drive the ASGI app in-process through httpx (fixtures in ``conftest.py``).
Section marks (§) refer to the wire rules of MCP 2026-07-28 and its Streamable HTTP transport.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import (
    REPLICA,
    SERVER_INFO,
    asgi_client,
    assert_error,
    assert_result,
    call,
    post,
    request,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]


# --- results ------------------------------------------------------------------------------------


async def test_a_tool_call_answers_with_a_json_result(client: httpx.AsyncClient) -> None:
    result = assert_result(await post(client, call("test_simple_text")))
    assert text_of(result) == "This is a simple text response for testing."


async def test_every_result_carries_result_type_and_server_info(client: httpx.AsyncClient) -> None:
    result = assert_result(await post(client, call("test_simple_text")))
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO] == {"name": "engine-conformance", "version": "1.0.0"}


@pytest.mark.parametrize(
    "method",
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"],
)
async def test_list_results_carry_caching_hints(client: httpx.AsyncClient, method: str) -> None:
    result = assert_result(await post(client, request(method)))
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert SERVER_INFO in result["_meta"]


async def test_a_resource_read_carries_caching_hints(client: httpx.AsyncClient) -> None:
    body = request("resources/read", {"uri": "test://static-text"})
    result = assert_result(await post(client, body))
    assert result["contents"][0]["text"] == "This is the content of the static text resource."
    assert "ttlMs" in result and "cacheScope" in result


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (call("order_book", {"title": "Dune"}), None, 200),
        (request("notifications/cancelled", {"requestId": 1}, id=None), None, 202),
        (b"{", None, 400),
        (request("nope/nope"), None, 404),
        (request("tools/list"), {"Content-Type": "text/plain"}, 415),
        (request("tools/list", {"pad": "x" * 5000}), None, 413),
    ],
    ids=["200", "202", "400", "404", "415", "413"],
)
async def test_every_response_names_the_replica_that_served_it(
    body: Any, headers: dict[str, str] | None, status: int
) -> None:
    app = build(keys=[KEY], replica_id=REPLICA).streamable_http_app(max_body_bytes=1024)
    async with asgi_client(app) as client:
        response = await post(client, body, headers=headers)
    assert response.status_code == status
    assert response.headers["x-engine-replica"] == REPLICA


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("GET", "/mcp", {}, 405),
        ("POST", "/elsewhere", {}, 404),
        ("POST", "/mcp", {"Origin": "http://evil.example.com"}, 403),
    ],
)
async def test_refusals_name_the_replica_too(
    shop: httpx.AsyncClient, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    response = await shop.request(method, path, headers=headers)
    assert response.status_code == status
    assert response.headers["x-engine-replica"] == REPLICA


async def test_a_session_id_is_ignored_and_never_echoed(client: httpx.AsyncClient) -> None:
    response = await post(client, request("tools/list"), headers={"Mcp-Session-Id": "abc"})
    assert_result(response)
    assert "mcp-session-id" not in response.headers


# --- JSON-RPC framing (§1.2) ------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"{", b"", b"not json", b'{"jsonrpc": "2.0",}', b"\xff\xfe"])
async def test_a_body_that_is_not_json_is_a_parse_error(
    client: httpx.AsyncClient, body: bytes
) -> None:
    assert_error(await post(client, body), 400, -32700, id=None)


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 5, "result": {"action": "accept", "content": {}}},
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "no"}},
    ],
    ids=["result", "error"],
)
async def test_a_response_outside_a_session_is_told_where_answers_go(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    error = assert_error(await post(client, body), 400, -32600, id=None)  # not the client's 5
    assert "this is a response (result or error, no method)" in error["message"]
    assert "inputResponses" in error["message"]


async def test_a_parse_error_says_where_the_body_went_wrong(client: httpx.AsyncClient) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"n": ' + b"9" * 5000
    error = assert_error(await post(client, body + b"}}"), 400, -32700, id=None)
    assert error["message"] == (
        "Parse error: the body is not valid JSON (number out of range at line 1 column 4370)"
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(42, id="number"),
        pytest.param("tools/list", id="string"),
        pytest.param(None, id="null"),
        pytest.param([request("tools/list")], id="batch"),
        pytest.param([], id="empty-batch"),
        pytest.param({"id": 1, "method": "tools/list"}, id="no-jsonrpc"),
        pytest.param({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, id="jsonrpc-1.0"),
        pytest.param({"jsonrpc": "2.0", "id": 1}, id="no-method"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "result": {}}, id="a-response"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": 7}, id="method-not-a-string"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": ""}, id="empty-method"),
        pytest.param({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, id="id-null"),
        pytest.param({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, id="id-bool"),
        pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, id="id-float"),
        pytest.param({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, id="id-array"),
    ],
)
async def test_a_message_of_the_wrong_shape_is_an_invalid_request(
    client: httpx.AsyncClient, body: Any
) -> None:
    usable_id = isinstance(body, dict) and type(body.get("id")) in (int, str)
    usable_id = usable_id and "result" not in body  # a response's id is the server's own
    response = await post(client, json.dumps(body).encode())
    assert_error(response, 400, -32600, id=body["id"] if usable_id else None)


async def test_errors_echo_the_request_id(client: httpx.AsyncClient) -> None:
    assert_error(await post(client, request("nope/nope", id="req-42")), 404, -32601, "req-42")
    wrong = {"jsonrpc": "1.0", "id": 7, "method": "tools/list"}
    assert_error(await post(client, wrong), 400, -32600, id=7)
    mismatched = await post(client, request("tools/list", id=0), headers={"Mcp-Method": "x"})
    assert_error(mismatched, 400, -32020, id=0)


async def test_a_notification_is_accepted_with_an_empty_202(client: httpx.AsyncClient) -> None:
    response = await post(client, request("notifications/cancelled", {"requestId": 3}, id=None))
    assert response.status_code == 202
    assert response.content == b""


# --- methods --------------------------------------------------------------------------------------


async def test_an_unknown_method_is_404_method_not_found(client: httpx.AsyncClient) -> None:
    error = assert_error(await post(client, request("tools/frobnicate")), 404, -32601)
    assert (error["message"], error["data"]) == ("Method not found", "tools/frobnicate")


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"],
)
async def test_methods_removed_in_2026_are_404_method_not_found(
    client: httpx.AsyncClient, method: str
) -> None:
    assert_error(await post(client, request(method, {"level": "info", "uri": "x"})), 404, -32601)
