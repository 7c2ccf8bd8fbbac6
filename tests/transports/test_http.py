"""Streamable HTTP (2026-07-28): what a client sees when it talks to ``mcp.streamable_http_app()``.

Most tests drive the ASGI app in-process through httpx; the streaming ones run it under a real
uvicorn server, because only a socket shows events arriving one by one and a client hanging up.
Section marks (§) refer to the wire rules of MCP 2026-07-28 and its Streamable HTTP transport.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Mount

from engine import Context, MCPServer
from engine.transports import http as http_transport
from examples import conformance_server
from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import (
    JSON,
    META_CAPABILITIES,
    META_VERSION,
    PROTOCOL,
    SERVER_INFO,
    SUBSCRIPTION_ID,
    asgi_client,
    assert_error,
    assert_json_rpc,
    assert_result,
    call_asgi,
    headers_for,
    post,
    request,
    sentinel,
    serving,
    streaming,
    text_of,
)

pytestmark = pytest.mark.anyio

conformance = conformance_server.mcp
REPLICA = "replica-7"
YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """The conformance fixtures, served in-process."""
    async with asgi_client(conformance.streamable_http_app()) as client:
        yield client


@pytest.fixture
async def shop() -> AsyncIterator[httpx.AsyncClient]:
    """The bookshop, on a replica named ``replica-7``."""
    app = build(keys=[KEY], replica_id=REPLICA).streamable_http_app()
    async with asgi_client(app) as client:
        yield client


@pytest.fixture(autouse=True)
def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No test here makes the engine or uvicorn log an error (an exception in the app, say)."""
    yield
    errors = [r.getMessage() for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    assert errors == []


def call(name: str, arguments: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return request("tools/call", params, **options)


# --- results ------------------------------------------------------------------------------------


async def test_a_tool_call_answers_with_a_json_result(client: httpx.AsyncClient) -> None:
    result = assert_result(await post(client, call("test_simple_text")))
    assert text_of(result) == "This is a simple text response for testing."


async def test_every_result_carries_result_type_and_server_info(client: httpx.AsyncClient) -> None:
    result = assert_result(await post(client, call("test_simple_text")))
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO] == {"name": "engine-conformance", "version": "0.1.0"}


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


# --- _meta and the protocol version (§1.1, §1.2) -------------------------------------------------


def without_meta(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    meta = body["params"]["_meta"]
    for key in keys:
        del meta[key]
    return body


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, id="no-params"),
        pytest.param(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, id="no-meta"
        ),
        pytest.param(without_meta(request("tools/list"), META_VERSION), id="no-version"),
        pytest.param(without_meta(request("tools/list"), META_CAPABILITIES), id="no-capabilities"),
        pytest.param(request("tools/list", meta={META_CAPABILITIES: None}), id="capabilities-null"),
        pytest.param(request("tools/list", meta={META_VERSION: 20260728}), id="version-number"),
    ],
)
async def test_a_missing_meta_field_is_invalid_params(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    assert_error(await post(client, body), 400, -32602)


async def test_an_unsupported_version_is_refused_with_the_supported_ones(
    client: httpx.AsyncClient,
) -> None:
    body = request("tools/list", meta={META_VERSION: "1900-01-01"})
    response = await post(client, body, headers={"MCP-Protocol-Version": "1900-01-01"})
    error = assert_error(response, 400, -32022)
    assert error["data"] == {"supported": [PROTOCOL], "requested": "1900-01-01"}


async def test_a_header_version_that_differs_from_meta_is_a_header_mismatch(
    client: httpx.AsyncClient,
) -> None:
    response = await post(client, request("tools/list"), headers={"MCP-Protocol-Version": "x"})
    assert_error(response, 400, -32020)


async def test_a_missing_version_header_is_a_header_mismatch(client: httpx.AsyncClient) -> None:
    response = await post(client, request("tools/list"), headers={"MCP-Protocol-Version": None})
    assert_error(response, 400, -32020)


# --- Mcp-Method and Mcp-Name (§5.1.3, §5.1.4) -----------------------------------------------------


@pytest.mark.parametrize(
    "method_header",
    [None, "tools/call", "TOOLS/LIST", "tools/list/", "tools"],
    ids=["missing", "other-method", "upper-case", "trailing-slash", "prefix"],
)
async def test_mcp_method_must_be_the_body_method_exactly(
    client: httpx.AsyncClient, method_header: str | None
) -> None:
    response = await post(client, request("tools/list"), headers={"Mcp-Method": method_header})
    assert_error(response, 400, -32020)


@pytest.mark.parametrize(
    "name_header",
    [None, "test_error_handling", "TEST_SIMPLE_TEXT", ""],
    ids=["missing", "other-tool", "upper-case", "empty"],
)
async def test_mcp_name_must_be_the_tool_name(
    client: httpx.AsyncClient, name_header: str | None
) -> None:
    response = await post(client, call("test_simple_text"), headers={"Mcp-Name": name_header})
    error = assert_error(response, 400, -32020)
    assert error["message"].startswith("Header mismatch: ")


async def test_mcp_name_must_be_the_uri_for_a_resource_read(client: httpx.AsyncClient) -> None:
    body = request("resources/read", {"uri": "test://static-text"})
    response = await post(client, body, headers={"Mcp-Name": "test://static-binary"})
    assert_error(response, 400, -32020)


async def test_mcp_name_must_be_the_prompt_name_for_a_prompt(client: httpx.AsyncClient) -> None:
    body = request("prompts/get", {"name": "test_simple_prompt"})
    assert assert_result(await post(client, body))["resultType"] == "complete"
    response = await post(client, body, headers={"Mcp-Name": "test_prompt_with_image"})
    assert_error(response, 400, -32020)


async def test_mcp_name_with_surrounding_spaces_is_accepted(client: httpx.AsyncClient) -> None:
    response = await post(
        client, call("test_simple_text"), headers={"Mcp-Name": "  test_simple_text "}
    )
    assert_result(response)


async def test_mcp_name_in_base64_sentinel_form_is_decoded(client: httpx.AsyncClient) -> None:
    encoded = sentinel("test_simple_text")
    assert encoded == "=?base64?dGVzdF9zaW1wbGVfdGV4dA==?="
    assert_result(await post(client, call("test_simple_text"), headers={"Mcp-Name": encoded}))


@pytest.mark.parametrize(
    "name_header",
    ["=?base64?not base64!?=", "=?base64?dGVzdA?=", "=?base64?//79?="],
    ids=["bad-alphabet", "bad-padding", "not-utf8"],
)
async def test_mcp_name_with_invalid_base64_is_a_header_mismatch(
    client: httpx.AsyncClient, name_header: str
) -> None:
    response = await post(client, call("test_simple_text"), headers={"Mcp-Name": name_header})
    assert_error(response, 400, -32020)


async def test_header_names_are_case_insensitive() -> None:
    app = conformance.streamable_http_app()
    body = json.dumps(call("test_simple_text")).encode()
    for spell in (str.lower, str.upper):
        headers = [
            (spell(name).encode(), value.encode())
            for name, value in headers_for(call("test_simple_text")).items()
        ]
        status, _, answer = await call_asgi(app, [(b"host", b"127.0.0.1"), *headers], [body])
        assert status == 200, answer
        assert json.loads(answer)["result"]["isError"] is False


async def test_header_values_are_case_sensitive(client: httpx.AsyncClient) -> None:
    response = await post(client, call("test_simple_text"), headers={"Mcp-Method": "Tools/Call"})
    assert_error(response, 400, -32020)


# --- Mcp-Param-* from x-mcp-header (§5.1.4), on the conformance tool test_x_mcp_header ----------


def region_call(region: str | None) -> dict[str, Any]:
    return call("test_x_mcp_header", {} if region is None else {"region": region})


async def test_the_tool_lists_its_header_annotation(client: httpx.AsyncClient) -> None:
    tools = assert_result(await post(client, request("tools/list")))["tools"]
    tool = next(tool for tool in tools if tool["name"] == "test_x_mcp_header")
    assert tool["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"


async def test_a_param_header_that_matches_the_argument_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    response = await post(client, region_call("eu-west"), headers={"Mcp-Param-Region": "eu-west"})
    assert text_of(assert_result(response)) == "region=eu-west"


async def test_a_param_header_is_required_when_the_argument_is_present(
    client: httpx.AsyncClient,
) -> None:
    error = assert_error(await post(client, region_call("eu-west")), 400, -32020)
    assert "Mcp-Param-Region" in error["message"]


async def test_no_param_header_is_expected_when_the_argument_is_absent(
    client: httpx.AsyncClient,
) -> None:
    assert text_of(assert_result(await post(client, region_call(None)))) == "region=<none>"


async def test_a_param_header_that_differs_from_the_argument_is_a_mismatch(
    client: httpx.AsyncClient,
) -> None:
    response = await post(client, region_call("eu-west"), headers={"Mcp-Param-Region": "us-east"})
    assert_error(response, 400, -32020)


@pytest.mark.parametrize("region", ["eu-west", "Zürich", " padded ", "=?base64?x?="])
async def test_a_param_header_in_base64_sentinel_form_is_decoded(
    client: httpx.AsyncClient, region: str
) -> None:
    response = await post(
        client, region_call(region), headers={"Mcp-Param-Region": sentinel(region)}
    )
    assert text_of(assert_result(response)) == f"region={region}"


@pytest.mark.parametrize(
    "literal",
    ["ZXUtd2VzdA==", "=?BASE64?ZXUtd2VzdA==?=", "?base64?ZXUtd2VzdA==?="],
    ids=["bare-base64", "upper-case-sentinel", "half-sentinel"],
)
async def test_a_param_header_without_the_exact_sentinel_is_taken_literally(
    client: httpx.AsyncClient, literal: str
) -> None:
    # "ZXUtd2VzdA==" is base64 for "eu-west": without the lower-case sentinel nothing is decoded.
    mismatched = await post(client, region_call("eu-west"), headers={"Mcp-Param-Region": literal})
    assert_error(mismatched, 400, -32020)
    same = await post(client, region_call(literal), headers={"Mcp-Param-Region": literal})
    assert text_of(assert_result(same)) == f"region={literal}"


async def test_a_param_header_with_invalid_base64_is_a_mismatch(
    client: httpx.AsyncClient,
) -> None:
    response = await post(client, region_call("x"), headers={"Mcp-Param-Region": "=?base64?***?="})
    assert_error(response, 400, -32020)


# --- methods --------------------------------------------------------------------------------------


async def test_an_unknown_method_is_404_method_not_found(client: httpx.AsyncClient) -> None:
    error = assert_error(await post(client, request("tools/frobnicate")), 404, -32601)
    assert "tools/frobnicate" in error["message"]


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"],
)
async def test_methods_removed_in_2026_are_404_method_not_found(
    client: httpx.AsyncClient, method: str
) -> None:
    assert_error(await post(client, request(method, {"level": "info", "uri": "x"})), 404, -32601)


# --- tool calls -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [{}, {"title": ["Dune"]}, {"title": None}, {"title": {"nested": 1}}],
    ids=["missing", "array", "null", "object"],
)
async def test_invalid_arguments_are_a_tool_error_result(
    shop: httpx.AsyncClient, arguments: dict[str, Any]
) -> None:
    result = assert_result(await post(shop, call("order_book", arguments)))
    assert result["isError"] is True
    assert result["resultType"] == "complete"
    assert text_of(result)


async def test_arguments_that_are_not_an_object_are_invalid_params(
    shop: httpx.AsyncClient,
) -> None:
    body = request("tools/call", {"name": "order_book", "arguments": ["Dune"]})
    assert_error(await post(shop, body), 400, -32602)


async def test_an_unknown_tool_is_a_tool_error_result(shop: httpx.AsyncClient) -> None:
    result = assert_result(await post(shop, call("x")))
    assert result["isError"] is True
    assert text_of(result) == "Unknown tool: x"


async def first_round(shop: httpx.AsyncClient, title: str = "Neuromancer") -> dict[str, Any]:
    body = call("order_book", {"title": title}, capabilities={"elicitation": {}})
    result = assert_result(await post(shop, body))
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {"confirm_backorder"}
    return result


def retry(state: Any, answers: Any = None, title: str = "Neuromancer") -> dict[str, Any]:
    params = {
        "name": "order_book",
        "arguments": {"title": title},
        "inputResponses": {"confirm_backorder": YES} if answers is None else answers,
        "requestState": state,
    }
    return request("tools/call", params, capabilities={"elicitation": {}})


async def test_a_question_and_its_answer_complete_the_call(shop: httpx.AsyncClient) -> None:
    state = (await first_round(shop))["requestState"]
    result = assert_result(await post(shop, retry(state)))
    assert text_of(result) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


def flip(token: str, at: int) -> str:
    return token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]


@pytest.mark.parametrize("where", ["middle", "end"])
async def test_a_tampered_request_state_is_refused(shop: httpx.AsyncClient, where: str) -> None:
    state = (await first_round(shop))["requestState"]
    tampered = flip(state, len(state) // 2 if where == "middle" else len(state) - 1)
    error = assert_error(await post(shop, retry(tampered)), 400, -32602)
    assert error["message"] == "Invalid or expired requestState"


async def test_a_request_state_replayed_for_other_arguments_is_refused(
    shop: httpx.AsyncClient,
) -> None:
    state = (await first_round(shop))["requestState"]
    error = assert_error(await post(shop, retry(state, title="Dune")), 400, -32602)
    assert error["message"] == "Invalid or expired requestState"


async def test_a_needed_capability_the_client_lacks_is_400(client: httpx.AsyncClient) -> None:
    error = assert_error(await post(client, call("test_missing_capability")), 400, -32021)
    assert "sampling" in error["data"]["requiredCapabilities"]


# --- DNS rebinding (§5.1.1 Security) -------------------------------------------------------------


async def test_a_foreign_host_is_refused(client: httpx.AsyncClient) -> None:
    response = await post(client, request("tools/list"), headers={"Host": "evil.example.com"})
    assert_error(response, 403, -32600, id=None)


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
        assert refused.status_code == 403


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


# --- inputs that once broke the server ------------------------------------------------------------


@pytest.fixture
async def over_http() -> AsyncIterator[httpx.AsyncClient]:
    """The conformance fixtures, where an exception escaping the app is a 500 response."""
    async with asgi_client(conformance.streamable_http_app(), crash=False) as client:
        yield client


@pytest.mark.parametrize("name", [["test_simple_text"], {"a": 1}], ids=["array", "object"])
async def test_a_tool_name_that_is_not_a_string_is_refused_with_400(
    over_http: httpx.AsyncClient, name: Any
) -> None:
    body = request("tools/call", {"name": name})
    response = await post(over_http, body, headers={"Mcp-Name": "test_simple_text"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] in (-32602, -32020)


async def test_a_huge_integer_argument_with_a_param_header_is_a_mismatch(
    over_http: httpx.AsyncClient,
) -> None:
    body = call("test_x_mcp_header", {"region": 10**400})
    response = await post(over_http, body, headers={"Mcp-Param-Region": "1"})
    assert_error(response, 400, -32020)


@pytest.mark.parametrize(
    ("headers", "meta", "status", "code"),
    [
        ({"Mcp-Name": "wrong"}, {}, 400, -32020),
        ({"MCP-Protocol-Version": "1900-01-01"}, {META_VERSION: "1900-01-01"}, 400, -32022),
        ({}, {META_CAPABILITIES: None}, 400, -32602),
    ],
    ids=["header-mismatch", "unsupported-version", "missing-capabilities"],
)
async def test_a_request_asking_for_progress_still_gets_its_error_status(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    meta: dict[str, Any],
    status: int,
    code: int,
) -> None:
    body = call("test_tool_with_progress", meta={"progressToken": "p", **meta})
    assert_error(await post(client, body, headers=headers), status, code)


async def test_a_notification_with_a_progress_token_is_still_202(
    client: httpx.AsyncClient,
) -> None:
    body = request("notifications/cancelled", {"requestId": 1}, id=None, meta={"progressToken": 1})
    response = await post(client, body)
    assert response.status_code == 202
    assert response.content == b""


# --- fuzzing: no input makes the server fail ------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Valid requests to start from; subscriptions/listen is left out because a valid one streams
# until the client leaves (its refusals are tested above).
VALID = [
    request("server/discover"),
    request("tools/list"),
    call("test_simple_text"),
    call("test_error_handling"),
    call("test_x_mcp_header", {"region": "eu-west"}),
    call("test_input_required_result_elicitation", capabilities={"elicitation": {}}),
    request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}),
    request("resources/read", {"uri": "test://template/1/data"}),
    request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "pa"},
        },
    ),
    request("notifications/cancelled", {"requestId": 1}, id=None),
]


def _slots(node: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """Every (object, key) pair in a JSON document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield node, key
            yield from _slots(value)


@st.composite
def mutants(draw: st.DrawFn) -> tuple[Any, dict[str, str]]:
    """A valid request with a few values replaced or removed at any depth, sent with the
    headers of either the original or the mutant."""
    original = draw(st.sampled_from(VALID))
    body = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 2))):
        slots = list(_slots(body))
        if not slots:
            break
        node, key = draw(st.sampled_from(slots))
        if draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(json_values)
    headers = headers_for(original if draw(st.booleans()) else body)
    return body, headers


FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
fuzz_app = conformance.streamable_http_app(max_body_bytes=4096)


@FUZZ
@given(body=json_values | st.binary(max_size=300), with_headers=st.booleans())
async def test_any_body_gets_a_json_rpc_answer_and_never_a_500(
    body: Any, with_headers: bool
) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = headers_for(body) if with_headers else {"Content-Type": JSON}
    async with asgi_client(fuzz_app) as client:
        with anyio.fail_after(5):
            response = await client.post("/mcp", content=content, headers=headers)
    assert_json_rpc(response)


@FUZZ
@given(mutant=mutants())
async def test_any_damaged_request_gets_a_json_rpc_answer_and_never_a_500(
    mutant: tuple[Any, dict[str, str]],
) -> None:
    body, headers = mutant
    async with asgi_client(fuzz_app) as client:
        with anyio.fail_after(5):
            response = await client.post("/mcp", content=json.dumps(body), headers=headers)
    assert_json_rpc(response)


# Placeholders the test replaces with a real requestState from a first round, or a spoiled one.
SPOIL: dict[str, Callable[[str], str]] = {
    "<state>": lambda state: state,
    "<truncated state>": lambda state: state[:-5],
    "<flipped state>": lambda state: flip(state, 10),
}
shop_app = build(keys=[KEY]).streamable_http_app()
tool_names = st.just("order_book") | st.just("order_book") | st.text(max_size=10) | json_values
answers = st.builds(lambda value: {"action": "accept", "content": {"confirm": value}}, json_values)
call_params = st.fixed_dictionaries(
    {"name": tool_names},
    optional={
        "arguments": st.fixed_dictionaries(
            {"title": st.sampled_from(["Dune", "Neuromancer"]) | json_values}
        )
        | json_values,
        "inputResponses": st.dictionaries(
            st.sampled_from(["confirm_backorder", "check_stock"]) | st.text(max_size=8),
            answers | st.sampled_from([YES, {"action": "decline"}]) | json_values,
            max_size=3,
        )
        | json_values,
        "requestState": st.sampled_from(sorted(SPOIL)) | st.text() | json_values,
    },
)


@FUZZ
@given(params=call_params)
async def test_any_tool_call_params_get_a_json_rpc_answer(params: dict[str, Any]) -> None:
    async with asgi_client(shop_app) as client:
        placeholder = params.get("requestState")
        if isinstance(placeholder, str) and placeholder in SPOIL:
            state = (await first_round(client))["requestState"]
            params["requestState"] = SPOIL[placeholder](state)
        body = request("tools/call", params, capabilities={"elicitation": {}})
        with anyio.fail_after(5):
            response = await post(client, body)
    assert_json_rpc(response)
    assert response.status_code in (200, 400)


# --- a real server: streams and hang-ups ----------------------------------------------------------


@pytest.fixture
def conformance_url() -> Iterator[str]:
    with serving(conformance.streamable_http_app()) as url:
        yield url


async def test_progress_streams_before_the_result(conformance_url: str) -> None:
    body = call("test_tool_with_progress", id="call-1", meta={"progressToken": "tok"})
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, body) as (response, events),
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["x-engine-replica"] == conformance.replica_id
        progress = [await events.next() for _ in range(3)]
        final = await events.next()
        assert await events.rest() == []
    assert [m["method"] for m in progress] == ["notifications/progress"] * 3
    assert [m["params"]["progress"] for m in progress] == [0, 50, 100]
    assert {m["params"]["progressToken"] for m in progress} == {"tok"}
    assert final["id"] == "call-1"
    assert text_of(final["result"]) == "Progress complete"
    assert final["result"]["resultType"] == "complete"


def listen(request_id: str, **wanted: bool) -> dict[str, Any]:
    return request("subscriptions/listen", {"notifications": wanted}, id=request_id)


async def test_listen_acknowledges_then_forwards_tools_list_changed(conformance_url: str) -> None:
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("sub-1", toolsListChanged=True)) as (response, events),
    ):
        assert response.headers["content-type"] == "text/event-stream"
        ack = await events.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
        assert ack["params"]["notifications"] == {"toolsListChanged": True}

        assert_result(await post(client, call("test_trigger_tool_change")))
        changed = await events.next()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
    assert "id" not in changed


async def test_a_listen_stream_gets_only_the_kinds_it_asked_for(conformance_url: str) -> None:
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("tools", toolsListChanged=True)) as (_, tools),
        streaming(client, listen("prompts", promptsListChanged=True)) as (_, prompts),
    ):
        assert (await tools.next())["params"]["notifications"] == {"toolsListChanged": True}
        assert (await prompts.next())["params"]["notifications"] == {"promptsListChanged": True}
        assert_result(await post(client, call("test_trigger_tool_change")))
        assert (await tools.next())["method"] == "notifications/tools/list_changed"
        # The tools change was broadcast to both streams at once; the prompts stream's next
        # message is the prompts change that follows it, so it never saw the tools change.
        assert_result(await post(client, call("test_trigger_prompt_change")))
        following = await prompts.next()
    assert following["method"] == "notifications/prompts/list_changed"
    assert following["params"]["_meta"] == {SUBSCRIPTION_ID: "prompts"}


async def test_a_quiet_listen_stream_sends_keep_alive_comments(
    conformance_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_transport, "KEEPALIVE_SECONDS", 0.05)
    async with (
        httpx.AsyncClient(base_url=conformance_url) as client,
        streaming(client, listen("quiet", resourcesListChanged=True)) as (_, events),
    ):
        assert (await events.next())["method"] == "notifications/subscriptions/acknowledged"
        assert await events.next_line() == ": keep-alive"


async def test_a_listen_request_with_a_bad_header_is_refused_before_streaming(
    conformance_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=conformance_url) as client:
        refused = await post(
            client, listen("s", toolsListChanged=True), headers={"Mcp-Method": "x"}
        )
        assert_error(refused, 400, -32020, id="s")
        no_filter = request("subscriptions/listen", id="s")
        assert_error(await post(client, no_filter), 400, -32602, id="s")


class Slow:
    """A server whose one tool sleeps for 5 s and records how it ended."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()
        self.cancelled: bool | None = None
        self.ended_at = 0.0
        self.mcp = MCPServer("slow", keys=[KEY])
        self.mcp.add_tool(self.slow)

    async def slow(self, ctx: Context) -> str:
        """Reports that it started, then sleeps."""
        await ctx.report_progress(0, 1, "started")
        self.started.set()
        finished = False
        try:
            await anyio.sleep(5)
            finished = True
        finally:
            self.cancelled = not finished
            self.ended_at = time.monotonic()
            self.ended.set()
        return "slept"

    async def wait_started(self) -> None:
        assert await anyio.to_thread.run_sync(self.started.wait, 5), "the tool never started"

    async def wait_ended(self, hung_up_at: float) -> None:
        assert await anyio.to_thread.run_sync(self.ended.wait, 2), "the tool was not cancelled"
        assert self.cancelled is True
        assert self.ended_at - hung_up_at < 1.0


async def test_closing_an_event_stream_cancels_the_call() -> None:
    slow = Slow()
    with serving(slow.mcp.streamable_http_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            body = call("slow", meta={"progressToken": 1})
            async with streaming(client, body) as (response, _):
                assert response.headers["content-type"] == "text/event-stream"
                await slow.wait_started()
                hung_up_at = time.monotonic()
            await slow.wait_ended(hung_up_at)


async def test_hanging_up_on_a_json_call_cancels_it() -> None:
    slow = Slow()
    with serving(slow.mcp.streamable_http_app()) as url:
        async with httpx.AsyncClient(base_url=url) as client, anyio.create_task_group() as tg:
            tg.start_soon(post, client, call("slow"))
            await slow.wait_started()
            hung_up_at = time.monotonic()
            tg.cancel_scope.cancel()
        await slow.wait_ended(hung_up_at)


def test_request_headers_join_repeated_names_and_lowercase_them() -> None:
    from engine.transports._asgi import request_headers

    raw = [(b"Accept", b"application/json"), (b"x-trace", b"a"), (b"X-Trace", b"b")]
    assert request_headers({"headers": raw}) == {
        "accept": "application/json",
        "x-trace": "a, b",
    }
    assert request_headers({"headers": iter(raw[:2])}) == {
        "accept": "application/json",
        "x-trace": "a",
    }
    assert request_headers({}) == {}
    as_lists = [[b"Accept", b"application/json"], [b"x-trace", b"a"]]
    assert request_headers({"headers": as_lists}) == {
        "accept": "application/json",
        "x-trace": "a",
    }


def test_request_headers_are_a_fresh_dict_for_every_request() -> None:
    from engine.transports._asgi import request_headers

    raw = [(b"host", b"127.0.0.1"), (b"mcp-method", b"tools/call")]
    first = request_headers({"headers": list(raw)})
    first["mcp-method"] = "changed by a handler"
    first["x-added"] = "1"
    assert request_headers({"headers": list(raw)}) == {
        "host": "127.0.0.1",
        "mcp-method": "tools/call",
    }


async def test_requests_in_flight_get_a_hang_up_watcher_only_once_they_run_long() -> None:
    from engine.transports._asgi import until_disconnect

    hung_up = anyio.Event()
    listened = 0

    async def receive() -> dict[str, Any]:
        nonlocal listened
        listened += 1
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def quick() -> str:
        return "done"

    async def long_running() -> str:
        await anyio.sleep(10)
        return "never"

    # Quick requests end before any watcher starts: receive() is never called for them.
    assert [await until_disconnect(quick(), receive, 0.02) for _ in range(100)] == ["done"] * 100
    await anyio.sleep(0.05)
    assert listened == 0

    outcome: list[str | None] = []

    async def run_long() -> None:
        outcome.append(await until_disconnect(long_running(), receive, 0.02))

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_long)
            await anyio.sleep(0.05)  # past the watch delay: a watcher now listens
            hung_up.set()
    assert outcome == [None]
    assert listened == 1


async def test_a_hang_up_before_the_watcher_starts_is_seen_when_it_does() -> None:
    from engine.transports._asgi import until_disconnect

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}  # the client is already gone

    async def long_running() -> str:
        await anyio.sleep(10)
        return "never"

    with anyio.fail_after(2):
        assert await until_disconnect(long_running(), receive, 0.02) is None
