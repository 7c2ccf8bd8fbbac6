"""Streamable HTTP header rules of 2026-07-28: ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name`` and ``Mcp-Param-*`` must agree with the body they travel with."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from engine.errors import HEADER_MISMATCH, INVALID_PARAMS, MCPError

_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)
_B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def mismatch(message: str) -> MCPError:
    return MCPError(HEADER_MISMATCH, f"Header mismatch: {message}")


def decode_value(raw: str, header: str) -> str:
    """A header value as the client meant it: trimmed, and base64-decoded if in sentinel form."""
    value = raw.strip()
    if not value.startswith("=?"):
        return value
    found = _SENTINEL.match(value)
    if found is None:
        return value
    encoded = found.group(1)
    if len(encoded) % 4 or not _B64.match(encoded):
        raise mismatch(f"{header} has invalid base64 in its =?base64?...?= form")
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise mismatch(f"{header} has invalid base64 in its =?base64?...?= form") from None


def expected_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _same(header_value: str, body_value: Any) -> bool:
    """Compare as the spec says: numbers numerically (``42`` equals ``42.0``), else as text."""
    if isinstance(body_value, bool):
        return header_value == expected_text(body_value)
    if isinstance(body_value, int | float):
        try:
            if isinstance(body_value, int) and header_value.lstrip("+-").isdigit():
                return int(header_value) == body_value
            return float(header_value) == float(body_value)
        except (ValueError, OverflowError):
            return False
    return header_value == expected_text(body_value)


def _verbatim(header_value: str | None, body_value: Any) -> bool:
    """The header is present and is the body value itself, not an encoded form of it."""
    return (
        header_value is not None
        and header_value == body_value
        and not header_value.startswith("=?")
    )


NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def check(
    headers: Mapping[str, str],
    method: str,
    params: dict[str, Any],
    version: str,
    param_headers: Mapping[str, str] | None = None,
) -> None:
    """Raise ``-32020`` when a required header is missing or disagrees with the body."""
    name_param = NAME_PARAM.get(method)
    if (
        not param_headers
        and headers.get("mcp-protocol-version") == version
        and headers.get("mcp-method") == method
        and (name_param is None or _verbatim(headers.get("mcp-name"), params.get(name_param)))
    ):
        return  # every header as sent equals its body value: nothing to trim or decode
    header_version = headers.get("mcp-protocol-version")
    if header_version is None:
        raise mismatch("MCP-Protocol-Version header is required")
    if header_version.strip() != version:
        raise mismatch(
            f"MCP-Protocol-Version header value {header_version.strip()!r} does not match body "
            f"value {version!r}"
        )
    header_method = headers.get("mcp-method")
    if header_method is None:
        raise mismatch("Mcp-Method header is required")
    if header_method.strip() != method:
        raise mismatch(
            f"Mcp-Method header value {header_method.strip()!r} does not match body value "
            f"{method!r}"
        )
    if name_param is not None:
        header_name = headers.get("mcp-name")
        body_name = params.get(name_param)
        if header_name is None:
            raise mismatch(f"Mcp-Name header is required for {method}")
        if type(body_name) is not str:  # not a header question: the body itself is wrong
            raise MCPError(
                INVALID_PARAMS, f"Invalid params: {name_param!r} of {method} must be a string"
            )
        decoded = decode_value(header_name, "Mcp-Name")
        if decoded != body_name:
            raise mismatch(
                f"Mcp-Name header value {decoded!r} does not match body value {body_name!r}"
            )
    if param_headers:
        arguments = params.get("arguments") or {}
        for argument, header in param_headers.items():
            value = arguments.get(argument) if isinstance(arguments, dict) else None
            raw = headers.get(f"mcp-param-{header.lower()}")
            if value is None:
                continue
            if raw is None:
                raise mismatch(f"Mcp-Param-{header} header is required when {argument!r} is set")
            decoded = decode_value(raw, f"Mcp-Param-{header}")
            if not _same(decoded, value):
                raise mismatch(
                    f"Mcp-Param-{header} header value {decoded!r} does not match body value "
                    f"{value!r}"
                )
