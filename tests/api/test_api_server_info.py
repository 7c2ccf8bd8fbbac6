"""``MCPServer(title=..., description=..., website_url=..., icons=[...])``, as the official
constructor takes them, reported in ``serverInfo`` in both eras."""

from __future__ import annotations

import json

import mcp_types
import pytest

from engine import MCPServer
from engine.testing import Client
from engine.types import Icon
from tests.conftest import KEY
from tests.http_helpers import SERVER_INFO, asgi_client, post, request

pytestmark = pytest.mark.anyio

LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}

FULL_INFO = {
    "name": "Bookshop",
    "version": "2.1.0",
    "title": "The Bookshop",
    "description": "Find and order books",
    "websiteUrl": "https://books.example.com",
    "icons": [
        {"src": "https://books.example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]},
        {"src": "https://books.example.com/dark.svg", "theme": "dark"},
    ],
}


def described() -> MCPServer:
    return MCPServer(
        "Bookshop",
        version="2.1.0",
        title="The Bookshop",
        description="Find and order books",
        website_url="https://books.example.com",
        icons=[
            Icon(src="https://books.example.com/icon.png", mime_type="image/png", sizes=["48x48"]),
            {"src": "https://books.example.com/dark.svg", "theme": "dark"},
        ],
        keys=[KEY],
    )


async def test_modern_results_and_discover_carry_the_full_server_info() -> None:
    async with Client(described()) as client:
        discovered = await client.send("server/discover")
        listed = await client.send("tools/list")
    assert discovered["_meta"][SERVER_INFO] == FULL_INFO
    assert listed["_meta"][SERVER_INFO] == FULL_INFO


async def test_a_legacy_initialize_reports_the_full_server_info() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    async with asgi_client(described().streamable_http_app()) as http:
        response = await http.post("/mcp", content=json.dumps(body), headers=LEGACY_HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"] == FULL_INFO


async def test_without_them_server_info_is_name_and_version_only() -> None:
    mcp = MCPServer("Plain", version="1.0", keys=[KEY])
    async with asgi_client(mcp.streamable_http_app()) as http:
        response = await post(http, request("server/discover"))
    assert response.json()["result"]["_meta"][SERVER_INFO] == {"name": "Plain", "version": "1.0"}
    assert (mcp.title, mcp.description, mcp.website_url, mcp.icons) == (None, None, None, None)


async def test_name_version_and_instructions_set_after_construction_are_what_clients_see() -> None:
    mcp = MCPServer("Plain", version="1.0", keys=[KEY])
    mcp.name, mcp.version, mcp.instructions = "Renamed", "2.0", "Ask for a book by title."
    async with asgi_client(mcp.streamable_http_app()) as http:
        response = await post(http, request("server/discover"))
    result = response.json()["result"]
    assert result["_meta"][SERVER_INFO] == {"name": "Renamed", "version": "2.0"}
    assert result["instructions"] == "Ask for a book by title."
    assert (mcp.name, mcp.version) == ("Renamed", "2.0")


def test_the_official_icon_type_is_taken_too() -> None:
    official = mcp_types.Icon(src="https://x.example/i.png", mime_type="image/png")
    mcp = MCPServer("Ported", title="Ported", icons=[official], keys=[KEY])
    assert mcp.icons == [Icon(src="https://x.example/i.png", mime_type="image/png")]
    assert mcp.title == "Ported"
    assert mcp.core.server_info["icons"] == [
        {"src": "https://x.example/i.png", "mimeType": "image/png"}
    ]


def test_an_icon_without_src_is_refused() -> None:
    with pytest.raises(ValueError, match="src"):
        MCPServer("Broken", icons=[{"mimeType": "image/png"}], keys=[KEY])


def test_the_constructor_takes_its_arguments_in_the_official_order() -> None:
    mcp = MCPServer(
        "Bookshop",
        "The Bookshop",
        "Find and order books",
        "Ask about a title before ordering it.",
        "https://books.example.com",
        [{"src": "https://books.example.com/icon.png"}],
        "2.1.0",
        keys=[KEY],
    )
    assert mcp.instructions == "Ask about a title before ordering it."
    assert mcp.core.server_info == {
        "name": "Bookshop",
        "version": "2.1.0",
        "title": "The Bookshop",
        "description": "Find and order books",
        "websiteUrl": "https://books.example.com",
        "icons": [{"src": "https://books.example.com/icon.png"}],
    }
    assert MCPServer(keys=[KEY]).core.server_info == {"name": "mcp-server", "version": ""}
