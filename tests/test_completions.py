"""``@mcp.completion()``: suggestions for prompt and template arguments, given models or dicts
as the function's annotations ask, and answered as a ``Completion``."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError as OfficialMCPError
from mcp_types import CompletionArgument as OfficialArgument
from mcp_types import PromptReference as OfficialPromptReference

from engine import MCPServer
from engine.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MCPError
from engine.testing import Client, ProtocolError
from engine.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

LANGUAGES = ["go", "python", "rust"]
PROMPT = {"type": "ref/prompt", "name": "review"}
TEMPLATE = {"type": "ref/resource", "uri": "github://{owner}/{repo}"}


def complete_request(ref: dict[str, Any], name: str, value: str, **context: str) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = {"arguments": context}
    return params


async def test_a_completer_gets_models_and_returns_a_completion() -> None:
    mcp = MCPServer("Code", keys=[KEY])

    @mcp.completion()
    async def suggest(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if isinstance(ref, PromptReference) and argument.name == "language":
            return Completion(values=[v for v in LANGUAGES if v.startswith(argument.value)])
        if isinstance(ref, ResourceTemplateReference) and context and context.arguments:
            return Completion(values=[f"{context.arguments['owner']}-sdk"], total=1)
        return None

    async with Client(mcp) as client:
        languages = await client.send(
            "completion/complete", complete_request(PROMPT, "language", "r")
        )
        repos = await client.send(
            "completion/complete", complete_request(TEMPLATE, "repo", "", owner="acme")
        )
        nothing = await client.send("completion/complete", complete_request(PROMPT, "code", ""))
    assert languages["completion"] == {"values": ["rust"]}
    assert repos["completion"] == {"values": ["acme-sdk"], "total": 1}
    assert nothing["completion"] == {"values": []}
    assert mcp.core.capabilities()["completions"] == {}


async def test_parameters_annotated_with_the_official_models_get_those() -> None:
    mcp = MCPServer("Code", keys=[KEY])
    seen: list[Any] = []

    @mcp.completion()
    def suggest(ref: OfficialPromptReference, argument: OfficialArgument, context: Any) -> Any:
        seen.extend([ref, argument, context])
        return {"values": ["python"], "hasMore": False}

    async with Client(mcp) as client:
        result = await client.send("completion/complete", complete_request(PROMPT, "language", "p"))
    assert result["completion"] == {"values": ["python"], "hasMore": False}
    assert isinstance(seen[0], OfficialPromptReference)
    assert isinstance(seen[1], OfficialArgument)
    assert seen[2] is None


async def test_a_completer_annotated_with_dicts_may_return_a_list() -> None:
    mcp = MCPServer("Code", keys=[KEY])

    @mcp.completion()
    def suggest(ref: dict[str, Any], argument: dict[str, Any], context: Any) -> list[str]:
        return [f"{ref['name']}-{argument['value']}{n}" for n in range(150)]

    async with Client(mcp) as client:
        result = await client.send("completion/complete", complete_request(PROMPT, "x", "v"))
    completion = result["completion"]
    assert completion["values"][:2] == ["review-v0", "review-v1"]
    assert (len(completion["values"]), completion["total"], completion["hasMore"]) == (
        100,
        150,
        True,
    )


async def test_without_a_completer_the_method_is_not_served() -> None:
    mcp = MCPServer("Code", keys=[KEY])
    async with Client(mcp) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.send("completion/complete", complete_request(PROMPT, "x", ""))
    error = refused.value
    assert (error.code, error.message, error.data) == (
        METHOD_NOT_FOUND,
        "Method not found",
        "completion/complete",
    )
    assert "completions" not in mcp.core.capabilities()


async def test_a_failing_completer_is_an_internal_error_naming_the_argument() -> None:
    mcp = MCPServer("Code", keys=[KEY])

    @mcp.completion()
    async def suggest(
        ref: PromptReference, argument: CompletionArgument, context: CompletionContext | None
    ) -> Completion:
        if argument.name == "refused":
            raise MCPError(INVALID_PARAMS, "nothing to complete for 'refused'")
        if argument.name == "ported":
            raise OfficialMCPError(INVALID_PARAMS, "the official error passes too")
        if argument.name == "listed":
            wrong: Any = ["a list is not a Completion in this form"]
            return wrong  # type: ignore[no-any-return]
        raise RuntimeError("index not ready")

    async with Client(mcp) as client:
        for name, code, message in [
            ("crash", INTERNAL_ERROR, "Error completing argument crash"),
            ("listed", INTERNAL_ERROR, "Error completing argument listed"),
            ("refused", INVALID_PARAMS, "nothing to complete for 'refused'"),
            ("ported", INVALID_PARAMS, "the official error passes too"),
        ]:
            with pytest.raises(ProtocolError) as refused:
                await client.send("completion/complete", complete_request(PROMPT, name, ""))
            assert (refused.value.code, refused.value.message) == (code, message)
        with pytest.raises(ProtocolError) as malformed:
            await client.send("completion/complete", {"ref": PROMPT, "argument": {"name": "x"}})
        assert malformed.value.code == INVALID_PARAMS
        assert malformed.value.message == "Invalid params: argument: value: Field required"
