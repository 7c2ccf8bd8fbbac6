"""``@mcp.resource`` with RFC 6570 templates: variables as arguments, optional query
parameters, values refused by ``ResourceSecurity``, and the errors a read can end with."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types
import pytest

from engine import (
    Context,
    FunctionResource,
    InvalidUriTemplate,
    MCPServer,
    ReadResourceContents,
    ResourceError,
    ResourceNotFoundError,
    ResourceSecurity,
    ResourceSecurityError,
    ResourceTemplate,
    UnexpectedResourceError,
    safe_join,
)
from engine.testing import Client, ProtocolError
from engine.types import InputRequiredResult
from tests.conftest import KEY

pytestmark = pytest.mark.anyio

MANUALS = {"printing/setup.md": "Load paper, then power on."}


def bookshop(**options: object) -> MCPServer:
    mcp = MCPServer("Bookshop", keys=[KEY], **options)  # type: ignore[arg-type]

    @mcp.resource("manuals://{+path}")
    def manual(path: str) -> str:
        if path not in MANUALS:
            raise ResourceNotFoundError(f"No manual at {path!r}.")
        return MANUALS[path]

    @mcp.resource("orders://{order_id}")
    def order(order_id: int) -> dict[str, int]:
        return {"order_id": order_id, "next": order_id + 1}

    @mcp.resource("reviews://{isbn}{?limit,sort}")
    def reviews(isbn: str, limit: int = 10, sort: str = "newest") -> str:
        return f"{limit} {sort} reviews of {isbn}"

    @mcp.resource("shelves://browse{/path*}")
    def shelf(path: list[str]) -> str:
        return " > ".join(["catalog", *path])

    return mcp


async def text_of(client: Client, uri: str) -> str:
    text: str = (await client.read_resource(uri)).raw["contents"][0]["text"]
    return text


async def test_variables_become_typed_arguments() -> None:
    async with Client(bookshop()) as client:
        assert await text_of(client, "manuals://printing/setup.md") == MANUALS["printing/setup.md"]
        assert json.loads(await text_of(client, "orders://41")) == {"order_id": 41, "next": 42}
        assert await text_of(client, "reviews://dune") == "10 newest reviews of dune"
        assert await text_of(client, "reviews://dune?sort=top") == "10 top reviews of dune"
        assert (
            await text_of(client, "shelves://browse/fiction/sci-fi") == "catalog > fiction > sci-fi"
        )


async def test_templates_are_listed_with_their_text() -> None:
    async with Client(bookshop()) as client:
        listed = await client.send("resources/templates/list")
    assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == [
        "manuals://{+path}",
        "orders://{order_id}",
        "reviews://{isbn}{?limit,sort}",
        "shelves://browse{/path*}",
    ]
    assert {t["mimeType"] for t in listed["resourceTemplates"]} == {"text/plain"}


async def test_a_refused_value_is_an_unknown_resource_and_no_other_template_is_tried() -> None:
    mcp = bookshop()

    @mcp.resource("manuals://{+anything}", security=ResourceSecurity(exempt_params={"anything"}))
    def lax(anything: str) -> str:
        raise AssertionError("never reached: the first template that fits decides")

    async with Client(mcp) as client:
        refused = []
        for uri in ("manuals://../etc/passwd", "manuals://%2E%2E/x", "manuals:///etc/passwd"):
            with pytest.raises(ProtocolError) as caught:
                await client.read_resource(uri)
            refused.append((caught.value.code, caught.value.message, caught.value.data))
    assert refused == [
        (-32602, f"Unknown resource: {uri}", {"uri": uri})
        for uri in ("manuals://../etc/passwd", "manuals://%2E%2E/x", "manuals:///etc/passwd")
    ]


async def test_security_is_per_resource_or_server_wide() -> None:
    mcp = MCPServer("Imports", keys=[KEY])

    @mcp.resource("imports://{+source}", security=ResourceSecurity(exempt_params={"source"}))
    def preview(source: str) -> str:
        return f"from {source}"

    relaxed = MCPServer(
        "Relaxed", keys=[KEY], resource_security=ResourceSecurity(reject_path_traversal=False)
    )

    @relaxed.resource("imports://{+source}")
    def preview_relaxed(source: str) -> str:
        return f"from {source}"

    async with Client(mcp) as client:
        assert await text_of(client, "imports:///srv/catalog.csv") == "from /srv/catalog.csv"
    async with Client(relaxed) as client:
        assert await text_of(client, "imports://../x.csv") == "from ../x.csv"
        with pytest.raises(ProtocolError):
            await client.read_resource("imports:///srv/catalog.csv")


def test_the_policy_checks_each_value_once_decoded() -> None:
    policy = ResourceSecurity()
    assert policy.validate({"a": "v1.0..v2.0", "b": ["x", "y"]}) is None
    assert policy.validate({"a": "ok", "b": ["x", "../y"]}) == "b"
    assert policy.validate({"a": "key\0.txt"}) == "a"
    assert policy.validate({"a": "C:\\Windows"}) == "a"
    assert ResourceSecurity(reject_null_bytes=False).validate({"a": "key\0.txt"}) is None


async def test_not_found_and_deliberate_errors_keep_their_message() -> None:
    mcp = bookshop()

    @mcp.resource("stats://{table}")
    def stats(table: str) -> str:
        raise ResourceError(f"table {table} is being rebuilt")

    async with Client(mcp) as client:
        with pytest.raises(ProtocolError) as missing:
            await client.read_resource("manuals://nothing.md")
        with pytest.raises(ProtocolError) as rebuilding:
            await client.read_resource("stats://orders")
    assert (missing.value.code, missing.value.message, missing.value.data) == (
        -32602,
        "No manual at 'nothing.md'.",
        {"uri": "manuals://nothing.md"},
    )
    assert (rebuilding.value.code, rebuilding.value.message) == (
        -32603,
        "table orders is being rebuilt",
    )


async def test_a_tool_reading_a_missing_resource_gets_resource_not_found() -> None:
    mcp = bookshop()

    @mcp.tool()
    async def first_line(path: str, ctx: Context) -> str:
        try:
            [contents] = await ctx.read_resource(f"manuals://{path}")
        except ResourceNotFoundError as missing:
            return f"missing: {missing}"
        return str(contents.content).splitlines()[0]

    async with Client(mcp) as client:
        found = await client.call_tool("first_line", {"path": "printing/setup.md"})
        missing = await client.call_tool("first_line", {"path": "nothing.md"})
    assert found.text == "Load paper, then power on."
    assert missing.text == "missing: No manual at 'nothing.md'."


def test_registration_refuses_what_could_never_be_read() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])
    with pytest.raises(InvalidUriTemplate, match="Unclosed expression"):
        mcp.resource("file://{name")
    with pytest.raises(ValueError, match=r"Mismatch between URI parameters \{'user_id'\}"):

        @mcp.resource("users://{user_id}")
        def profile(user: str) -> str:
            return user

    with pytest.raises(ValueError, match=r"\['limit'\] have no default value"):

        @mcp.resource("reviews://{isbn}{?limit}")
        def reviews(isbn: str, limit: int) -> str:
            return isbn

    with pytest.raises(ValueError, match="has no URI template variables"):

        @mcp.resource("data://fixed")
        def fixed(name: str) -> str:
            return name

    with pytest.raises(TypeError, match="used incorrectly"):

        @mcp.resource  # type: ignore[arg-type]
        def forgot_the_uri() -> str:
            return ""


async def test_annotations_and_meta_are_listed() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.resource(
        "covers://{isbn}",
        mime_type="image/png",
        annotations=mcp_types.Annotations(audience=["user"], priority=0.7),
        meta={"cdn": "eu"},
    )
    def cover(isbn: str) -> bytes:
        return b"\x89PNG"

    async with Client(mcp) as client:
        listed = await client.send("resources/templates/list")
        read = await client.read_resource("covers://1")
    assert listed["resourceTemplates"][0]["annotations"] == {"audience": ["user"], "priority": 0.7}
    assert listed["resourceTemplates"][0]["_meta"] == {"cdn": "eu"}
    assert read.raw["contents"] == [
        {"uri": "covers://1", "mimeType": "image/png", "blob": "iVBORw==", "_meta": {"cdn": "eu"}}
    ]


async def test_a_list_is_one_json_text_unless_it_is_a_list_of_contents() -> None:
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.resource("genres://all")
    def genres() -> list[str]:
        return ["sf", "crime"]

    @mcp.resource("parts://both")
    def parts() -> list[ReadResourceContents]:
        return [ReadResourceContents("one", "text/plain"), ReadResourceContents(b"2", None)]

    async with Client(mcp) as client:
        one = (await client.read_resource("genres://all")).raw["contents"]
        two = (await client.read_resource("parts://both")).raw["contents"]
    assert [json.loads(c["text"]) for c in one] == [["sf", "crime"]]
    assert [("text" in c, "blob" in c) for c in two] == [(True, False), (False, True)]


async def test_a_template_object_matches_checks_and_makes_the_resource() -> None:
    def item(shelf: str, number: int) -> dict[str, object]:
        return {"shelf": shelf, "number": number}

    template = ResourceTemplate.from_function(
        item, "items://{shelf}/{number}", meta={"kind": "item"}
    )
    assert template.matches("items://a/7") == {"shelf": "a", "number": "7"}
    assert template.matches("items://a") is None
    with pytest.raises(ResourceSecurityError, match="'shelf'"):
        template.matches("items://..%2F..%2Fetc/7")
    resource = await template.create_resource("items://a/7", {"shelf": "a", "number": "7"}, None)
    assert json.loads(await resource.read()) == {"shelf": "a", "number": 7}
    assert (resource.uri, resource.name, resource.meta) == ("items://a/7", "item", {"kind": "item"})


async def test_add_resource_serves_a_template_object_behind_its_template() -> None:
    def item(shelf: str, number: int, ctx: Context) -> dict[str, object]:
        """One item of a shelf."""
        return {"shelf": shelf, "number": number, "in_a_request": ctx.request_id is not None}

    template = ResourceTemplate.from_function(
        item, "items://{shelf}/{number}", meta={"kind": "item"}
    )
    mcp = MCPServer("Bookshop", keys=[KEY])
    mcp.add_resource(template)

    assert await mcp.list_resource_templates() == [
        mcp_types.ResourceTemplate(
            uri_template="items://{shelf}/{number}",
            name="item",
            description="One item of a shelf.",
            mime_type="text/plain",
            _meta={"kind": "item"},
        )
    ]
    async with Client(mcp) as client:
        read = await client.read_resource("items://a/7")
        with pytest.raises(ProtocolError) as refused:
            await client.read_resource("items://..%2F..%2Fetc/7")
    [content] = read.raw["contents"]
    assert json.loads(content["text"]) == {"shelf": "a", "number": 7, "in_a_request": True}
    assert refused.value.code == -32602


async def test_a_template_object_wraps_a_crash_and_passes_a_resource_error() -> None:
    def broken(x: str) -> str:
        raise KeyError(x)

    def deliberate(x: str) -> str:
        raise ResourceError("not today")

    crash = ResourceTemplate.from_function(broken, "broken://{x}")
    with pytest.raises(UnexpectedResourceError) as direct:
        await crash.create_resource("broken://a", {"x": "a"}, None)
    mcp = MCPServer("Bookshop", keys=[KEY])
    mcp.add_resource(crash)
    async with Client(mcp) as client:
        with pytest.raises(ProtocolError) as served:
            await client.read_resource("broken://a")
    assert str(direct.value) == served.value.message
    assert served.value.message == "Error creating resource from template broken://a"
    refusal = ResourceTemplate.from_function(deliberate, "refuse://{x}")
    with pytest.raises(ResourceError, match="not today"):
        await refusal.create_resource("refuse://a", {"x": "a"}, None)


ASKS = {
    "ours": InputRequiredResult(request_state="page-2"),
    "wire_dict": {"resultType": "input_required", "requestState": "page-2"},
    "official": mcp_types.InputRequiredResult(request_state="page-2"),
}


@pytest.mark.parametrize("shape", list(ASKS))
async def test_a_template_object_hands_back_input_requests_of_any_shape(shape: str) -> None:
    def ask(x: str) -> object:
        return ASKS[shape]

    template = ResourceTemplate.from_function(ask, "ask://{x}")
    assert await template.create_resource("ask://a", {"x": "a"}, None) is ASKS[shape]
    resource = FunctionResource(uri="ask://fixed", fn=lambda: ASKS[shape])
    with pytest.raises(ValueError, match="static resources cannot return InputRequiredResult"):
        await resource.read()


async def test_a_template_object_gives_the_context_to_a_function_that_takes_it() -> None:
    def whose(x: str, ctx: Context) -> str:
        return f"{x} for request {ctx.request_id}"

    template = ResourceTemplate.from_function(whose, "who://{x}")
    assert template.context_kwarg == "ctx"
    mcp = MCPServer("Bookshop", keys=[KEY])

    @mcp.tool()
    async def via_template(x: str, ctx: Context) -> str:
        resource = await template.create_resource(f"who://{x}", {"x": x}, ctx)
        return str(await resource.read())

    async with Client(mcp) as client:
        result = await client.call_tool("via_template", {"x": "a"})
    assert result.text.startswith("a for request ")


def test_safe_join_keeps_a_path_under_its_base(tmp_path: Path) -> None:
    from engine import PathEscapeError

    (tmp_path / "docs").mkdir()
    (tmp_path / "outside").symlink_to(tmp_path.parent)
    assert safe_join(tmp_path, "docs", "a.md") == (tmp_path / "docs" / "a.md").resolve()
    for escaping in ("../etc/passwd", "/etc/passwd", "a\0b", "outside/x"):
        with pytest.raises(PathEscapeError):
            safe_join(tmp_path, escaping)
