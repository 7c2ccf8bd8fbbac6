"""The import rule of docs/porting.md, held: every public name of the official
``mcp.server.mcpserver`` comes from ``engine`` (but the few it does not provide, on purpose),
and the rewrite of ``make official`` refuses to hide one that is missing."""

from __future__ import annotations

import pytest

import engine
from tests.official.rewrite import (
    NOT_PROVIDED,
    MissingExport,
    official_public_names,
    rewrite_source,
)


def test_every_public_official_name_is_exported_by_engine() -> None:
    lacking = {name for name in official_public_names() if not hasattr(engine, name)}
    assert lacking == set(NOT_PROVIDED)


def test_the_rewrite_takes_public_names_from_engine_and_internals_as_placeholders() -> None:
    source = "from mcp.server.mcpserver import Icon, Extension, ToolManager\n"
    assert rewrite_source(source) == (
        "from engine import Icon, Extension; from official_internal import unbound; "
        "ToolManager = unbound('mcp.server.mcpserver.ToolManager')\n"
    )


def test_the_rewrite_refuses_a_public_name_engine_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(engine, "Icon")
    with pytest.raises(MissingExport, match=r"Icon \(imported from mcp\.server\.mcpserver\)"):
        rewrite_source("from mcp.server.mcpserver import Icon, MCPServer\n")
