"""Streamable HTTP (2026-07-28): no input makes the app fail: inputs that once broke it, and
fuzzed bodies, damaged requests and tool-call params that must all get a JSON-RPC answer."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples import conformance_server
from examples.bookshop import build
from tests.conftest import KEY
from tests.http_helpers import (
    JSON,
    META_CAPABILITIES,
    META_VERSION,
    YES,
    asgi_client,
    assert_error,
    assert_json_rpc,
    call,
    first_round,
    flip,
    headers_for,
    post,
    request,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]

conformance = conformance_server.mcp


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
