"""Resource objects: built in code, registered with ``mcp.add_resource(resource)`` or
``MCPServer(resources=[...])``, listed from their fields and read by their ``read()``."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
from pydantic import BaseModel, ValidationError

from engine import (
    BinaryResource,
    DirectoryResource,
    FileResource,
    FunctionResource,
    HttpResource,
    MCPServer,
    Resource,
    TextResource,
)
from engine.testing import Client, ProtocolError
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


class Shelf(BaseModel):
    genre: str
    books: int


async def test_each_kind_reads_as_text_or_a_blob(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes", encoding="utf-8")
    (tmp_path / "cover.png").write_bytes(b"\x89PNG")
    mcp = MCPServer(
        "Shop",
        keys=[KEY],
        resources=[
            TextResource(uri="text://motd", text="Open until six"),
            BinaryResource(uri="bin://logo", data=b"\x00\x01", mime_type="image/png"),
            FunctionResource(uri="fn://shelf", fn=lambda: Shelf(genre="sf", books=3)),
            FileResource(uri="file://notes", path=tmp_path / "notes.md", mime_type="text/markdown"),
            FileResource(uri="file://cover", path=tmp_path / "cover.png", mime_type="image/png"),
            DirectoryResource(uri="dir://shop", path=tmp_path, pattern="*.md"),
        ],
    )
    async with Client(mcp) as client:
        read = {
            uri: (await client.read_resource(uri)).raw["contents"]
            for uri in ("text://motd", "bin://logo", "fn://shelf", "file://notes", "file://cover")
        }
        listing = (await client.read_resource("dir://shop")).raw["contents"][0]
    assert read["text://motd"] == [
        {"uri": "text://motd", "mimeType": "text/plain", "text": "Open until six"}
    ]
    assert read["bin://logo"] == [{"uri": "bin://logo", "mimeType": "image/png", "blob": "AAE="}]
    assert json.loads(read["fn://shelf"][0]["text"]) == {"genre": "sf", "books": 3}
    assert read["file://notes"][0]["text"] == "# Notes"
    assert base64.b64decode(read["file://cover"][0]["blob"]) == b"\x89PNG"
    assert json.loads(listing["text"]) == {"files": ["notes.md"]}
    assert listing["mimeType"] == "application/json"


async def test_the_listing_is_the_objects_fields() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    mcp.add_resource(
        TextResource(
            uri="text://motd",
            name="motd",
            title="Message of the day",
            description="What the shop says today",
            text="hi",
            icons=[mcp_types.Icon(src="https://shop.example/motd.png")],
            annotations=mcp_types.Annotations(audience=["user"], priority=0.5),
            meta={"team": "front desk"},
        )
    )
    async with Client(mcp) as client:
        listed = await client.send("resources/list")
        read = await client.read_resource("text://motd")
    assert listed["resources"] == [
        {
            "name": "motd",
            "title": "Message of the day",
            "uri": "text://motd",
            "description": "What the shop says today",
            "mimeType": "text/plain",
            "icons": [{"src": "https://shop.example/motd.png"}],
            "annotations": {"audience": ["user"], "priority": 0.5},
            "_meta": {"team": "front desk"},
        }
    ]
    assert read.raw["contents"][0]["_meta"] == {"team": "front desk"}


async def test_a_subclass_reads_what_it_likes_and_must_return_text_or_bytes() -> None:
    class Counter(Resource):
        count: int = 0

        async def read(self) -> str:
            self.count += 1
            return f"read {self.count} times"

    class Miscoded(Resource):
        async def read(self) -> Any:
            return 42

    mcp = MCPServer("Shop", keys=[KEY], resources=[Counter(uri="count://reads")])
    mcp.add_resource(Miscoded(uri="bad://answer"))
    async with Client(mcp) as client:
        await client.read_resource("count://reads")
        second = await client.read_resource("count://reads")
        with pytest.raises(ProtocolError) as failed:
            await client.read_resource("bad://answer")
    assert second.raw["contents"][0]["text"] == "read 2 times"
    assert failed.value.code == -32603
    assert failed.value.message == "Error reading resource bad://answer"


def test_read_is_what_a_subclass_must_write() -> None:
    class Unfinished(Resource):
        pass

    with pytest.raises(TypeError, match="abstract method"):
        Unfinished(uri="x://y")  # type: ignore[abstract]


def test_the_name_is_the_uri_unless_given_and_one_of_them_is_needed() -> None:
    assert TextResource(uri="text://a", text="").name == "text://a"
    assert TextResource(uri="text://a", name="a", text="").name == "a"
    with pytest.raises(ValidationError, match="Either name or uri must be provided"):
        TextResource(text="")  # type: ignore[call-arg]


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="is_binary"):
        FileResource.model_validate({"uri": "file://x", "path": "/x", "is_binary": True})


async def test_a_function_resource_runs_a_blocking_function_off_the_event_loop() -> None:
    threads: list[int] = []

    def blocking() -> str:
        threads.append(threading.get_ident())
        return "done"

    async def awaited() -> bytes:
        return b"done"

    assert await FunctionResource(uri="fn://a", fn=blocking).read() == "done"
    assert threads[0] != threading.get_ident()
    assert await FunctionResource(uri="fn://b", fn=awaited).read() == b"done"


async def test_from_function_takes_the_name_and_docstring() -> None:
    def opening_hours() -> dict[str, str]:
        """When the shop is open."""
        return {"mon": "9-18"}

    resource = FunctionResource.from_function(opening_hours, uri="shop://hours")
    assert (resource.name, resource.description) == ("opening_hours", "When the shop is open.")
    assert json.loads(await resource.read()) == {"mon": "9-18"}
    with pytest.raises(ValueError, match="name="):
        FunctionResource.from_function(lambda: "x", uri="shop://x")


async def test_a_value_json_cannot_hold_is_sent_as_its_string() -> None:
    class Price:
        def __str__(self) -> str:
            return "12.50 EUR"

    assert await FunctionResource(uri="p://x", fn=Price).read() == '"12.50 EUR"'


async def test_a_static_function_cannot_ask_for_input() -> None:
    resource = FunctionResource(
        uri="ask://x", fn=lambda: mcp_types.InputRequiredResult(request_state="s")
    )
    with pytest.raises(ValueError, match="static resources cannot return InputRequiredResult"):
        await resource.read()


@pytest.mark.parametrize(
    ("mime_type", "encoding"),
    [
        ("text/plain", "utf-8-sig"),
        ("application/json", "utf-8-sig"),
        ("image/svg+xml", "utf-8-sig"),
        ('text/plain; charset="iso-8859-1"', "iso-8859-1"),
        ("image/png", None),
        ("application/pdf", None),
    ],
)
def test_a_files_encoding_follows_its_mime_type(mime_type: str, encoding: str | None) -> None:
    resource = FileResource(uri="file://x", path=Path("/x"), mime_type=mime_type)
    assert resource.encoding == encoding


async def test_a_file_is_decoded_with_its_encoding_and_a_bom_dropped(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}')
    as_json = FileResource(uri="file://d", path=path, mime_type="application/json")
    as_bytes = FileResource(uri="file://d", path=path, encoding=None)
    path_latin = tmp_path / "latin.txt"
    path_latin.write_bytes("naïve".encode("latin-1"))
    latin = FileResource(uri="file://l", path=path_latin, mime_type="image/png", encoding="latin-1")
    assert await as_json.read() == '{"a": 1}'
    assert await as_bytes.read() == b'\xef\xbb\xbf{"a": 1}'
    assert await latin.read() == "naïve"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"path": Path("relative.txt")}, "Path must be absolute"),
        ({"path": Path("/x"), "encoding": "not-a-codec"}, "unknown encoding: not-a-codec"),
        ({"path": Path("/x"), "mime_type": "text/plain; charset=nope"}, "unknown encoding"),
        ({"path": Path("/x"), "encoding": "base64_codec"}, "not a text encoding"),
    ],
)
def test_a_file_resource_that_could_never_be_read_fails_when_made(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        FileResource(uri="file://x", **options)


async def test_a_missing_directory_fails_the_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await DirectoryResource(uri="dir://x", path=tmp_path / "missing").read()


async def test_add_resource_takes_an_object_alone() -> None:
    mcp = MCPServer("Shop", keys=[KEY])
    with pytest.raises(TypeError, match="alone"):
        mcp.add_resource(TextResource(uri="t://x", text=""), "t://y")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="give the URI"):
        mcp.add_resource(lambda: "x")


async def test_braces_in_an_objects_uri_are_part_of_it() -> None:
    mcp = MCPServer("Shop", keys=[KEY], resources=[TextResource(uri="odd://{x}", text="odd")])
    async with Client(mcp) as client:
        read = await client.read_resource("odd://{x}")
    assert read.raw["contents"][0]["text"] == "odd"


async def test_an_http_resource_fetches_its_url_on_each_read() -> None:
    hits: list[str] = []

    class Catalog(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            status = 200 if self.path == "/catalog.json" else 404
            body = b'{"books": 1204}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Catalog)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        mcp = MCPServer(
            "Shop",
            keys=[KEY],
            resources=[HttpResource(uri="web://catalog", url=f"{base}/catalog.json")],
        )
        async with Client(mcp) as client:
            first = await client.read_resource("web://catalog")
            await client.read_resource("web://catalog")
        missing = HttpResource(uri="web://missing", url=f"{base}/missing")
        with pytest.raises(httpx.HTTPStatusError):
            await missing.read()
    finally:
        server.shutdown()
        thread.join()
    assert first.raw["contents"] == [
        {"uri": "web://catalog", "mimeType": "application/json", "text": '{"books": 1204}'}
    ]
    assert hits == ["/catalog.json", "/catalog.json", "/missing"]
