"""Era detection: one rule for HTTP and stdio (docs/legacy.md, "One endpoint, both eras")."""

from __future__ import annotations

from typing import Any

import pytest

from engine.protocol.era import Era, era_of

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def message(method: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {} if meta is None else {"_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def is_2025(raw: Any, **where: Any) -> bool:
    return era_of(raw, **where) is Era.V2025_11_25


def test_initialize_opens_the_2025_era_on_every_transport() -> None:
    assert is_2025(message("initialize"))
    assert is_2025(message("initialize"), headers={})


def test_a_request_with_the_modern_meta_is_modern_whatever_else_it_carries() -> None:
    raw = message("initialize", MODERN_META)
    assert not is_2025(raw, headers={"mcp-session-id": "s"}, in_session=True)


def test_a_session_or_a_2025_version_header_marks_an_http_request_legacy() -> None:
    assert is_2025(message("tools/list"), headers={"mcp-session-id": "s"})
    assert is_2025(message("tools/list"), headers={"mcp-protocol-version": " 2025-06-18 "})
    assert not is_2025(message("tools/list"), headers={"mcp-protocol-version": "2026-07-28"})
    assert not is_2025(message("tools/list"), headers={})


def test_on_stdio_every_message_after_a_2025_initialize_is_legacy() -> None:
    assert is_2025(message("tools/list"), in_session=True)
    assert not is_2025(message("tools/list"), in_session=False)


@pytest.mark.parametrize("raw", [None, [], "initialize", 3])
def test_what_is_not_a_message_object_is_left_to_the_modern_dispatch(raw: Any) -> None:
    assert not is_2025(raw, headers={"mcp-session-id": "s"}, in_session=True)
