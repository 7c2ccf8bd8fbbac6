"""Streamable HTTP (2026-07-28): ``tools/call`` over the wire: bad arguments, unknown tools,
a question and its answer, spoiled requestStates, a capability the client lacks."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.http_helpers import (
    assert_error,
    assert_result,
    call,
    first_round,
    flip,
    post,
    request,
    retry,
    text_of,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_no_errors_logged")]


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


async def test_a_question_and_its_answer_complete_the_call(shop: httpx.AsyncClient) -> None:
    state = (await first_round(shop))["requestState"]
    result = assert_result(await post(shop, retry(state)))
    assert text_of(result) == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


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
