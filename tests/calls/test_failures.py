"""How a handler's failure reaches the client: an error result for a tool, a JSON-RPC error for a
prompt or a resource, and a JSON-RPC error for any of them when the handler raises ``MCPError``
(ours, or another SDK's error class of the same shape)."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from engine import MCPError, MCPServer, Resolve, ResourceError, ResourceNotFoundError, ToolError
from engine.errors import protocol_error_of
from engine.testing import Client, ProtocolError
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class ErrorData(BaseModel):
    code: int
    message: str
    data: Any = None


class OtherSDKError(Exception):
    """The shape of another MCP SDK's protocol error: ``MCPError(code, message, data)``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.error = ErrorData(code=code, message=message, data=data)

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def data(self) -> Any:
        return self.error.data


OtherSDKError.__name__ = "MCPError"


class SignInRequired(OtherSDKError):
    def __init__(self, url: str) -> None:
        elicitation = {"mode": "url", "message": "Sign in", "url": url, "elicitationId": "s-1"}
        super().__init__(-32042, "URL elicitation required", {"elicitations": [elicitation]})


class HTTPFailure(Exception):
    """Has a ``code`` and a ``message`` but is no protocol error: an ordinary crash."""

    def __init__(self) -> None:
        super().__init__("upstream said 502")
        self.code = 502
        self.message = "Bad Gateway"


def signed_in() -> str:
    raise SignInRequired("https://auth.example.com/start")


def shop() -> MCPServer:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.tool()
    def checkout(user: Annotated[str, Resolve(signed_in)]) -> str:
        return f"checked out for {user}"

    @mcp.tool()
    def restock(title: str) -> str:
        raise OtherSDKError(-32602, f"{title!r} is not a title we stock", {"title": title})

    @mcp.tool()
    def price(title: str) -> float:
        raise KeyError(title)

    @mcp.tool()
    def mirror(title: str) -> str:
        raise HTTPFailure()

    @mcp.tool()
    def reserve(title: str) -> str:
        raise ToolError(f"{title!r} is sold out")

    @mcp.prompt()
    def blurb(title: str) -> str:
        raise OtherSDKError(
            -32021, "needs elicitation", {"requiredCapabilities": {"elicitation": {}}}
        )

    @mcp.prompt()
    def review(title: str) -> str:
        raise RuntimeError("template store unreachable")

    @mcp.resource("shelf://stats")
    def stats() -> str:
        raise RuntimeError("connection pool exhausted")

    @mcp.resource("books://{title}")
    def book(title: str) -> str:
        if title == "Dune":
            raise ResourceError("Dune is being re-catalogued; try again in a minute")
        if title == "Emma":
            raise RuntimeError("connection pool exhausted")
        raise ResourceNotFoundError(f"No book titled {title!r}")

    return mcp


async def test_another_sdks_mcp_error_from_a_tool_is_the_requests_error() -> None:
    async with Client(shop()) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("restock", {"title": "Necronomicon"})
    error = caught.value
    assert (error.code, error.message) == (-32602, "'Necronomicon' is not a title we stock")
    assert error.data == {"title": "Necronomicon"}


async def test_a_subclass_raised_by_a_resolver_keeps_its_code_message_and_data() -> None:
    async with Client(shop()) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("checkout", {})
    error = caught.value
    assert (error.code, error.message) == (-32042, "URL elicitation required")
    assert error.data == {
        "elicitations": [
            {
                "mode": "url",
                "message": "Sign in",
                "url": "https://auth.example.com/start",
                "elicitationId": "s-1",
            }
        ]
    }


async def test_a_prompt_raising_it_fails_with_its_error_too() -> None:
    async with Client(shop()) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.get_prompt("blurb", {"title": "Dune"})
    assert (caught.value.code, caught.value.message) == (-32021, "needs elicitation")
    assert caught.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_a_crash_names_the_tool_and_nothing_else(caplog: pytest.LogCaptureFixture) -> None:
    async with Client(shop()) as client:
        crashed = await client.call_tool("price", {"title": "Dune"})
        coded = await client.call_tool("mirror", {"title": "Dune"})
        meant = await client.call_tool("reserve", {"title": "Dune"})
    assert crashed.is_error and crashed.text == "Error executing tool price"
    assert coded.is_error and coded.text == "Error executing tool mirror"
    assert meant.is_error and meant.text == "Error executing tool reserve: 'Dune' is sold out"
    logged = [r.exc_info[1] for r in caplog.records if r.name == "engine.calls" and r.exc_info]
    assert [type(e).__name__ for e in logged] == ["KeyError", "HTTPFailure"]


async def test_a_prompt_crash_is_an_internal_error_naming_the_prompt() -> None:
    async with Client(shop()) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.get_prompt("review", {"title": "Dune"})
    assert (caught.value.code, caught.value.message) == (-32603, "Error getting prompt review")
    assert caught.value.data == {"name": "review"}


async def test_a_resource_failure_is_an_error_with_its_uri() -> None:
    async with Client(shop()) as client:
        failures = {}
        for uri in ("books://Necronomicon", "books://Dune", "books://Emma", "shelf://stats"):
            with pytest.raises(ProtocolError) as caught:
                await client.read_resource(uri)
            failures[uri] = (caught.value.code, caught.value.message, caught.value.data)
    assert failures == {
        "books://Necronomicon": (
            -32602,
            "No book titled 'Necronomicon'",
            {"uri": "books://Necronomicon"},
        ),
        "books://Dune": (
            -32603,
            "Dune is being re-catalogued; try again in a minute",
            {"uri": "books://Dune"},
        ),
        "books://Emma": (
            -32603,
            "Error creating resource from template books://Emma",
            {"uri": "books://Emma"},
        ),
        "shelf://stats": (-32603, "Error reading resource shelf://stats", {"uri": "shelf://stats"}),
    }


def test_only_an_mcp_error_shape_stands_for_a_protocol_error() -> None:
    ours = MCPError(-32602, "bad title")
    assert protocol_error_of(ours) is ours
    theirs = protocol_error_of(OtherSDKError(-32000, "busy", ErrorData(code=1, message="inner")))
    assert theirs is not None
    assert theirs.to_error() == {
        "code": -32000,
        "message": "busy",
        "data": {"code": 1, "message": "inner", "data": None},
    }
    assert protocol_error_of(HTTPFailure()) is None
    assert protocol_error_of(ValueError("MCPError")) is None
