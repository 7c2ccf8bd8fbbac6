"""What the commands share: the error a user can fix, the server file, the store, JSON options."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from engine.app import MCPServer


class CLIError(Exception):
    """A problem the user can fix; printed as ``error: ...`` with exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def load_server(target: str) -> MCPServer:
    """``FILE.py[:ATTR]`` → the MCPServer it defines (``mcp`` or the only one)."""
    path_text, _, attr = target.partition(":")
    if len(path_text) == 1 and attr and "\\" in attr:  # a Windows drive letter
        path_text, _, attr = target.rpartition(":")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise SystemExit(f"error: {path_text} is not a file; give FILE.py or FILE.py:ATTR")
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"error: cannot import {path_text}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    if attr:
        found: Any = module
        for part in attr.split("."):
            found = getattr(found, part, None)
        if callable(found) and not isinstance(found, MCPServer):
            found = found()
        if not isinstance(found, MCPServer):
            raise SystemExit(f"error: {path_text}:{attr} is not an MCPServer")
        return found
    servers = [v for v in vars(module).values() if isinstance(v, MCPServer)]
    if "mcp" in vars(module) and isinstance(module.mcp, MCPServer):
        return module.mcp
    if len(servers) == 1:
        return servers[0]
    raise SystemExit(
        f"error: {path_text} defines {len(servers)} MCPServer objects; name one as FILE.py:ATTR"
    )


DEFAULT_STORE = "sqlite:///.engine/calls.sqlite3"


def store_url(given: str | None) -> str | None:
    """``--store``, else ``ENGINE_STORE``, else the embedded default; ``none`` disables."""
    url = given or os.environ.get("ENGINE_STORE") or DEFAULT_STORE
    if url.lower() == "none":
        return None
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return url


EXAMPLE_OBJECT = '{"title": "Dune"}'


def json_object(text: str, option: str) -> dict[str, Any]:
    """An option's JSON object (``call --json``, ``replay --args``); CLIError otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CLIError(
            f"{option}: not JSON ({exc}); give an object like '{EXAMPLE_OBJECT}'"
        ) from None
    if not isinstance(value, dict):
        raise CLIError(f"{option}: give a JSON object, like '{EXAMPLE_OBJECT}'")
    return value
