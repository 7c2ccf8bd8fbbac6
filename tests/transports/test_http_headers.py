"""Streamable HTTP (2026-07-28): the version in ``_meta`` and the headers that must agree with
the body (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``).

Section marks (§) refer to the wire rules of MCP 2026-07-28 and its Streamable HTTP transport.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from examples import conformance_server
from tests.http_helpers import (
    META_CAPABILITIES,
    META_VERSION,
    PROTOCOL,
    assert_error,
    assert_result,
    call,
    call_asgi,
    headers_for,
    post,
    request,
    sentinel,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]

conformance = conformance_server.mcp


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


async def test_a_session_era_version_in_meta_is_refused_saying_how_it_is_served(
    client: httpx.AsyncClient,
) -> None:
    body = request("tools/list", meta={META_VERSION: "2025-11-25"})
    response = await post(client, body, headers={"MCP-Protocol-Version": "2025-11-25"})
    error = assert_error(response, 400, -32022)
    assert error["message"] == (
        "Unsupported protocol version: 2025-11-25 is served through initialize; send it, then"
        " each request with the MCP-Session-Id it returns and no protocolVersion in _meta"
    )
    assert error["data"] == {"supported": [PROTOCOL], "requested": "2025-11-25"}


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


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": 5}),
        ("tools/call", {}),
        ("prompts/get", {"name": ["a"]}),
        ("resources/read", {"uri": None}),
        ("tasks/get", {"taskId": {"a": 1}}),
    ],
    ids=["tool-number", "tool-missing", "prompt-list", "uri-null", "task-object"],
)
async def test_a_name_that_is_not_a_string_is_invalid_params_not_a_header_mismatch(
    client: httpx.AsyncClient, method: str, params: dict[str, Any]
) -> None:
    [(field, value)] = params.items() or [("name", None)]
    response = await post(client, request(method, params), headers={"Mcp-Name": str(value)})
    error = assert_error(response, 400, -32602)
    assert error["message"] == f"Invalid params: {field!r} of {method} must be a string"


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
