"""Registration-time analysis: what a signature may contain, and the errors that say why not."""

import importlib.util
import sys
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, create_model

from engine import Context, Elicit, InvalidSignature, ListRoots, MCPServer, Resolve, Sample
from engine.testing import Client
from tests.conftest import KEY


class Stock(BaseModel):
    copies: int


def test_an_unclassifiable_resolver_parameter_names_resolver_and_parameter() -> None:
    mcp = MCPServer("Bad", keys=[KEY])

    async def needs_unknown(foo: int) -> int:
        return foo

    with pytest.raises(InvalidSignature) as caught:

        @mcp.tool()
        async def t(v: Annotated[int, Resolve(needs_unknown)]) -> int:
            return v

    assert str(caught.value).startswith(
        "Resolver 'needs_unknown' parameter 'foo' cannot be resolved: expected a Context, an "
        "Annotated[_, Resolve(...)], or a tool argument by name"
    )


def test_a_resolver_cycle_is_refused() -> None:
    mcp = MCPServer("Bad", keys=[KEY])

    async def r1(x: Annotated[int, Resolve(lambda: 0)]) -> int:
        return x

    async def r2(y: "Annotated[int, Resolve(r3)]") -> int:
        return y

    async def r3(z: Annotated[int, Resolve(r2)]) -> int:
        return z

    r2.__annotations__["y"] = Annotated[int, Resolve(r3)]
    with pytest.raises(InvalidSignature, match="Resolver 'r2' has a cyclic dependency"):

        @mcp.tool()
        async def t(v: Annotated[int, Resolve(r2)]) -> int:
            return v


def test_resolve_inside_a_union_is_refused() -> None:
    mcp = MCPServer("Bad", keys=[KEY])

    async def f() -> int:
        return 1

    with pytest.raises(InvalidSignature, match="wraps `Resolve"):

        @mcp.tool()
        async def t_union(v: Annotated[int, Resolve(f)] | None = None) -> int:
            return v or 0


def test_two_question_kinds_in_one_return_annotation_are_refused() -> None:
    mcp = MCPServer("Bad", keys=[KEY])

    async def two_arms() -> Elicit[Stock] | Sample:
        raise AssertionError

    with pytest.raises(InvalidSignature, match="'two_arms' return annotation has multiple"):

        @mcp.tool()
        async def t(v: Annotated[Stock, Resolve(two_arms)]) -> int:
            return 0


def test_star_args_are_refused() -> None:
    mcp = MCPServer("Bad", keys=[KEY])
    with pytest.raises(InvalidSignature, match="name each parameter"):

        @mcp.tool()
        async def t(*args: int) -> int:
            return 0


def test_context_parameters_are_found_by_annotation_under_any_name() -> None:
    mcp = MCPServer("Ctx", keys=[KEY])

    @mcp.tool()
    async def t(query: str, c: Context, maybe: Context | None = None) -> str:
        return query

    assert mcp.tools["t"].listing["inputSchema"]["properties"] == {
        "query": {"title": "Query", "type": "string"}
    }
    assert mcp.tools["t"].signature.context_names == ["c", "maybe"]


def test_wire_keys_default_to_the_resolver_name_and_can_be_overridden() -> None:
    mcp = MCPServer("Keys", keys=[KEY])

    def roots() -> ListRoots:
        return ListRoots()

    @mcp.tool()
    async def t(
        a: Annotated[object, Resolve(roots)], b: Annotated[object, Resolve(lambda: 1, key="one")]
    ) -> str:
        return ""

    assert sorted(mcp.tools["t"].signature.plan.keys) == ["one", "roots"]


def test_two_resolvers_with_one_name_are_disambiguated() -> None:
    def make() -> object:
        def same() -> int:
            return 1

        return same

    first, second = make(), make()
    mcp = MCPServer("Keys", keys=[KEY])

    @mcp.tool()
    async def t(a: Annotated[int, Resolve(first)], b: Annotated[int, Resolve(second)]) -> str:
        return ""

    assert [n.key for n in mcp.tools["t"].signature.plan.nodes] == ["same", "same_2"]


def _load(path: Path, module_name: str) -> object:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.anyio
async def test_the_same_file_under_two_module_names_resumes_the_same_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Path("examples/seeds/order_book_elicit.py").read_text()
    path = tmp_path / "shop.py"
    path.write_text(
        source.replace('MCPServer("Bookshop")', f'MCPServer("Bookshop", keys=["{KEY}"])')
    )
    as_main = _load(path, "__main_like__")
    as_import = _load(path, "shop")
    yes = {"action": "accept", "content": {"confirm": True}}
    async with Client(as_main.mcp, as_import.mcp, elicitation=lambda p: yes) as client:  # type: ignore[attr-defined]
        result = await client.call_tool("order_book", {"title": "Neuromancer"})
    assert list(result.rounds[0]["inputRequests"]) == ["confirm_backorder"]
    assert result.servers == ["0", "1"]
    assert result.text == "Backordered 'Neuromancer'; it ships in 2-3 weeks."


@pytest.mark.anyio
async def test_elicit_of_base_model_asks_a_form_made_at_run_time() -> None:
    mcp = MCPServer("Dynamic", keys=[KEY])
    Voucher = create_model("Voucher", code=(str, ...))

    async def ask_code(shop: str) -> Elicit[BaseModel]:
        return Elicit(f"Your {shop} voucher code?", Voucher)

    @mcp.tool()
    async def redeem(shop: str, voucher: Annotated[BaseModel, Resolve(ask_code)]) -> str:
        return f"redeemed {voucher.model_dump()['code']}"

    asked: list[dict[str, object]] = []

    def answer(params: dict[str, object]) -> dict[str, object]:
        asked.append(params)
        return {"action": "accept", "content": {"code": "DUNE-10"}}

    async with Client(mcp, elicitation=answer) as client:
        result = await client.call_tool("redeem", {"shop": "Bookshop"})
    assert result.text == "redeemed DUNE-10"
    assert asked[0]["requestedSchema"] == {
        "type": "object",
        "title": "Voucher",
        "properties": {"code": {"type": "string", "title": "Code"}},
        "required": ["code"],
    }
