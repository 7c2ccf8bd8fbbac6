"""Resolvers and questions work on prompts and resource templates, with the same rounds."""

from typing import Annotated

import pytest
from mcp.shared.exceptions import MCPError as OfficialMCPError
from pydantic import BaseModel

from engine import Elicit, MCPServer, Resolve
from engine.testing import Client, ProtocolError
from stores import MemoryStore
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Tone(BaseModel):
    tone: str


def ask_tone(topic: str) -> Elicit[Tone]:
    return Elicit(f"Which tone for {topic}?", Tone)


def lookup_owner(id: str) -> str:
    return {"7": "ada"}.get(id, "nobody")


def build() -> MCPServer:
    mcp = MCPServer("Docs", keys=[KEY])

    @mcp.prompt()
    def summary(topic: str, tone: Annotated[Tone, Resolve(ask_tone)]) -> str:
        """Summarise a topic in a tone the user picks."""
        return f"Summarise {topic} in a {tone.tone} tone."

    @mcp.resource("notes://{id}/owner")
    def owner(id: str, who: Annotated[str, Resolve(lookup_owner)]) -> str:
        return f"note {id} belongs to {who}"

    return mcp


async def test_a_resolved_prompt_parameter_is_not_a_prompt_argument() -> None:
    async with Client(build()) as client:
        listed = await client.send("prompts/list")
    assert listed["prompts"][0]["arguments"] == [{"name": "topic", "required": True}]


async def test_a_prompt_asks_and_resumes_on_another_replica() -> None:
    answer = {"action": "accept", "content": {"tone": "dry"}}
    async with Client(build(), build(), elicitation=lambda p: answer) as client:
        result = await client.get_prompt("summary", {"topic": "owls"})
    assert result.rounds[0]["resultType"] == "input_required"
    assert result.servers == ["0", "1"]
    assert result.raw["messages"][0]["content"]["text"] == "Summarise owls in a dry tone."


async def test_a_client_cannot_set_a_resolved_prompt_parameter() -> None:
    answer = {"action": "accept", "content": {"tone": "dry"}}
    async with Client(build(), elicitation=lambda p: answer) as client:
        result = await client.get_prompt("summary", {"topic": "owls", "tone": {"tone": "loud"}})
    assert result.raw["messages"][0]["content"]["text"] == "Summarise owls in a dry tone."


async def test_a_resource_template_uses_resolvers() -> None:
    async with Client(build()) as client:
        read = await client.read_resource("notes://7/owner")
        templates = await client.send("resources/templates/list")
        with pytest.raises(ProtocolError) as missing:
            await client.read_resource("notes://7/other")
    assert read.raw["contents"] == [
        {"uri": "notes://7/owner", "mimeType": "text/plain", "text": "note 7 belongs to ada"}
    ]
    assert templates["resourceTemplates"][0]["uriTemplate"] == "notes://{id}/owner"
    assert missing.value.code == -32602
    assert missing.value.data == {"uri": "notes://7/other"}


async def test_a_prompt_value_that_cannot_be_sent_fails_clearly_and_frees_its_round() -> None:
    mcp = MCPServer("Docs", keys=[KEY], store=MemoryStore())

    @mcp.prompt()
    def summary(topic: str, tone: Annotated[Tone, Resolve(ask_tone)]) -> object:
        return {"role": "narrator", "content": "Once upon a time"}

    answer = {"action": "accept", "content": {"tone": "dry"}}
    async with Client(mcp, elicitation=lambda p: answer) as client:
        first = await client.send("prompts/get", {"name": "summary", "arguments": {"topic": "x"}})
        retry = {
            "name": "summary",
            "arguments": {"topic": "x"},
            "inputResponses": {key: answer for key in first["inputRequests"]},
            "requestState": first["requestState"],
        }
        failures = []
        for _ in range(2):
            with pytest.raises(ProtocolError) as caught:
                await client.send("prompts/get", retry)
            failures.append(caught.value)
    assert [f.code for f in failures] == [-32603, -32603]
    assert failures[0].message == failures[1].message == "Error getting prompt summary"


async def test_an_mcp_error_a_handler_raises_reaches_the_client_as_it_is() -> None:
    """The official SDK's ``MCPError`` too, raised by code ported from it."""
    mcp = MCPServer("Docs", keys=[KEY])

    @mcp.prompt()
    def briefing() -> str:
        raise OfficialMCPError(-32021, "needs elicitation", {"requiredCapabilities": ["x"]})

    @mcp.resource("notes://broken")
    def broken() -> str:
        raise RuntimeError("disk on fire")

    async with Client(mcp) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.get_prompt("briefing")
        with pytest.raises(ProtocolError) as failed:
            await client.read_resource("notes://broken")
    error = refused.value
    assert (error.code, error.message, error.data) == (
        -32021,
        "needs elicitation",
        {"requiredCapabilities": ["x"]},
    )
    assert (failed.value.code, failed.value.data) == (-32603, {"uri": "notes://broken"})


async def test_a_prompt_given_arguments_that_do_not_fit_is_the_callers_error() -> None:
    mcp = MCPServer("Docs", keys=[KEY])

    @mcp.prompt()
    def summary(topic: str) -> str:
        return f"Summarise {topic}."

    async with Client(mcp) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.get_prompt("summary", {})
    assert (refused.value.code, refused.value.data) == (-32602, {"name": "summary"})
    assert refused.value.message.startswith("Invalid arguments for prompt summary")
