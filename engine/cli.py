"""``python -m engine``: serve a server file, and operator tools."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from engine.server import MCPServer


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


def _serve(args: argparse.Namespace) -> int:
    if args.keys:
        os.environ["ENGINE_KEYS"] = args.keys
    if args.replica:
        os.environ["ENGINE_REPLICA_ID"] = args.replica
    store = store_url(args.store)
    if store is None:
        os.environ.pop("ENGINE_STORE", None)
    else:
        os.environ["ENGINE_STORE"] = store
    server = load_server(args.target)
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


def _keygen(args: argparse.Namespace) -> int:
    print(secrets.token_hex(32))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve FILE.py[:ATTR] over HTTP or stdio")
    serve.add_argument("target", help="the server file, optionally :ATTR naming the MCPServer")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead")
    serve.add_argument("--keys", help="comma-separated requestState secrets (or ENGINE_KEYS)")
    serve.add_argument("--replica", help="this replica's id, shown in responses")
    serve.add_argument(
        "--store",
        help=f"store URL (or ENGINE_STORE; default {DEFAULT_STORE}; 'none' for no store)",
    )
    serve.set_defaults(func=_serve)

    keygen = commands.add_parser("keygen", help="print a new requestState secret")
    keygen.set_defaults(func=_keygen)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result
