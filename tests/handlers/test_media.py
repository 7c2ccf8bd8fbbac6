"""``Image`` and ``Audio``: a file or bytes, returned from a tool, become image and audio
content blocks, with the MIME type from ``format`` or the file's suffix."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from engine import Audio, Image, MCPServer
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


def test_the_mime_type_comes_from_the_format_then_the_suffix() -> None:
    assert Image(data=b"...", format="PNG").mime_type == "image/png"
    assert Image(path="logo.jpeg").mime_type == "image/jpeg"
    assert Image(path="logo.bmp").mime_type == "application/octet-stream"
    assert Image(data=b"...").mime_type == "image/png"
    assert Audio(path="chime.mp3").mime_type == "audio/mpeg"
    assert Audio(data=b"...", format="ogg").mime_type == "audio/ogg"
    assert Audio(data=b"...").mime_type == "audio/wav"


def test_a_helper_takes_a_path_or_data_not_both() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Image()
    with pytest.raises(ValueError, match="exactly one"):
        Audio(path="chime.wav", data=b"...")


def test_a_file_is_read_when_the_block_is_built(tmp_path: Path) -> None:
    logo = Image(path=tmp_path / "logo.png")
    (tmp_path / "logo.png").write_bytes(b"drawn later")
    block = logo.to_image_content()
    assert (block.mime_type, base64.b64decode(block.data)) == ("image/png", b"drawn later")
    with pytest.raises(FileNotFoundError):
        Audio(path=tmp_path / "missing.wav").to_audio_content()


async def test_returned_from_a_tool_they_are_content_without_structured_output(
    tmp_path: Path,
) -> None:
    (tmp_path / "chime.wav").write_bytes(b"ding")
    mcp = MCPServer("Brand kit", keys=[KEY])

    @mcp.tool()
    def chime() -> Audio:
        return Audio(path=tmp_path / "chime.wav")

    @mcp.tool()
    def chart() -> list[str | Image]:
        return ["Sales by region:", Image(data=b"png", format="png")]

    async with Client(mcp) as client:
        sound = await client.call_tool("chime")
        picture = await client.call_tool("chart")
    assert sound.content == [{"type": "audio", "data": "ZGluZw==", "mimeType": "audio/wav"}]
    assert picture.content == [
        {"type": "text", "text": "Sales by region:"},
        {"type": "image", "data": "cG5n", "mimeType": "image/png"},
    ]
    assert (sound.structured_content, picture.structured_content) == (None, None)
    assert [tool.output_schema for tool in await mcp.list_tools()] == [None, None]


async def test_a_missing_file_fails_the_call() -> None:
    mcp = MCPServer("Brand kit", keys=[KEY])

    @mcp.tool()
    def logo() -> Image:
        return Image(path="/nonexistent/logo.png")

    async with Client(mcp) as client:
        result = await client.call_tool("logo")
    assert result.is_error
