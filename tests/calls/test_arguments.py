"""A call's arguments, checked against the handler's input model before anything runs:
readable errors, and the plain-argument fast path (decided in ``engine/di/plain_arguments.py``)
that must validate exactly as the model does."""

from dataclasses import replace
from typing import Annotated, Any

import pytest
from pydantic import Field

from engine import MCPServer
from engine.testing import Client
from tests.conftest import KEY

pytestmark = pytest.mark.anyio


async def test_invalid_arguments_give_a_readable_error_result() -> None:
    mcp = MCPServer("Args", keys=[KEY])

    @mcp.tool()
    def add(a: int, b: int) -> int:
        return a + b

    async with Client(mcp) as client:
        missing = await client.call_tool("add", {"a": 1})
        wrong = await client.call_tool("add", {"a": "x", "b": 2})
        fine = await client.call_tool("add", {"a": 1, "b": 2})
    assert missing.is_error and missing.text == "Invalid arguments for tool add: b: Field required"
    assert wrong.is_error and wrong.text.startswith("Invalid arguments for tool add: a: Input ")
    assert fine.structured_content == {"result": 3}


def _through_the_model(signature: Any, raw: Any) -> dict[str, Any] | str:
    """What the arguments model alone makes of ``raw``: the values, or the error text."""
    from engine.calls.arguments import InvalidArguments, validate_arguments

    try:
        return validate_arguments(replace(signature, plain_arguments=None), raw)
    except InvalidArguments as exc:
        return str(exc)


def _validated(signature: Any, raw: Any) -> dict[str, Any] | str:
    from engine.calls.arguments import InvalidArguments, validate_arguments

    try:
        return validate_arguments(signature, raw)
    except InvalidArguments as exc:
        return str(exc)


def test_plain_arguments_validate_exactly_as_the_model_does() -> None:
    from engine.di.signature import analyze

    def book(
        title: str,
        copies: int,
        price: float = 9.5,
        gift: bool = False,
        note: Annotated[str, Field(description="for the card")] = "",
        shelf: int = None,  # type: ignore[assignment]  # noqa: RUF013 - a None default is not validated
    ) -> str:
        return title

    signature = analyze(book, "book")
    assert signature.plain_arguments is not None
    inputs: list[Any] = [
        {"title": "Dune", "copies": 2},
        {"title": "Dune", "copies": 2, "price": 12.0, "gift": True, "note": "hi", "shelf": 3},
        {"title": "Dune", "copies": 2, "price": 12},  # an int for a float becomes 12.0
        {"title": "Dune", "copies": "2"},  # lax: "2" becomes 2
        {"title": "Dune", "copies": 2.0},
        {"title": "Dune", "copies": True},
        {"title": "Dune", "copies": 2, "shelf": None},  # explicit None is validated
        {"title": "Dune", "copies": 2, "extra": [1, 2]},  # extra keys are ignored
        {"title": 7, "copies": 2},
        {"copies": 2},
        {},
        None,
    ]
    for raw in inputs:
        expected = _through_the_model(signature, raw)
        got = _validated(signature, raw)
        assert got == expected, raw
        if isinstance(expected, dict):
            assert [type(v) for v in got.values()] == [type(v) for v in expected.values()], raw


def test_arguments_with_constraints_or_aliases_always_go_through_the_model() -> None:
    from engine.di.signature import analyze

    def short(title: Annotated[str, Field(max_length=3)]) -> str:
        return title

    def aliased(title: Annotated[str, Field(alias="name")]) -> str:
        return title

    def optional(title: str | None = None) -> str:
        return title or ""

    def listed(titles: list[str]) -> str:
        return ",".join(titles)

    def strict(copies: Annotated[int, Field(strict=True)]) -> int:
        return copies

    for fn in (short, aliased, optional, listed, strict):
        assert analyze(fn, fn.__name__).plain_arguments is None, fn.__name__
    assert _validated(analyze(short, "short"), {"title": "Dune"}).endswith(  # type: ignore[union-attr]
        "title: String should have at most 3 characters"
    )
