"""Importing the engine must not load a store's driver: redis-py alone costs tens of
milliseconds at every start (CLI commands, stdio servers), and a server on SQLite or in memory
never needs it. Nor OpenTelemetry, an optional extra: a server that nobody configured tracing
for never imports it, and one without it installed serves as well."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRIVER = re.compile(r"(redis\w*|hiredis|_?sqlite3)(\..*)?")
"""The store drivers' modules (``redis*``, ``hiredis``, ``sqlite3``, ``_sqlite3``) and their
submodules."""


def _run(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_importing_the_engine_loads_no_store_driver() -> None:
    stderr = _run("import engine", "-X", "importtime").stderr
    imported = [
        line.rpartition("|")[2].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "engine" in imported  # the output is what we think it is
    assert [module for module in imported if DRIVER.fullmatch(module)] == []


def test_the_backends_load_their_driver_when_first_used() -> None:
    code = """
import json, sys

def drivers():
    return sorted(m for m in sys.modules if m.split(".")[0] in (
        "redis", "hiredis", "sqlite3", "_sqlite3"))

import stores, stores.base, stores.packing
seen = {"import": drivers(), "dir": "RedisStore" in dir(stores)}
stores.SQLiteStore
seen["sqlite"] = drivers()
stores.RedisStore
seen["redis"] = drivers()
print(json.dumps(seen))
"""
    seen = json.loads(_run(code).stdout)
    assert seen["import"] == []
    assert seen["dir"]
    assert {"sqlite3", "_sqlite3"} <= set(seen["sqlite"])
    assert not any(module.startswith("redis") for module in seen["sqlite"])
    assert "redis" in seen["redis"]


def test_the_token_verifiers_load_pyjwt_and_httpx_when_first_named() -> None:
    code = """
import json, sys

def loaded():
    return sorted(m for m in ("jwt", "httpx") if m in sys.modules)

import engine
seen = {"import": loaded()}
engine.JWTVerifier
seen["named"] = loaded()
print(json.dumps(seen))
"""
    seen = json.loads(_run(code).stdout)
    assert seen == {"import": [], "named": ["httpx", "jwt"]}


SERVE_ONE_CALL = """
import json, sys
import anyio
from engine import MCPServer
from engine.testing import Client

mcp = MCPServer("Quiet", keys=["k" * 32], store="memory://")

@mcp.tool()
async def echo(text: str) -> str:
    return text

async def main():
    async with mcp.running(), Client(mcp) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert not result.is_error, result

anyio.run(main)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"
    or m == "engine._internal.otel_spans")))
"""

NOT_INSTALLED = """
import sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
"""


def test_serving_a_call_loads_no_opentelemetry_when_nothing_configured_it() -> None:
    """Installed (the dev extra has it) but configured by nobody: never imported."""
    assert json.loads(_run(SERVE_ONE_CALL).stdout) == []


def test_a_server_serves_without_opentelemetry_installed() -> None:
    assert json.loads(_run(NOT_INSTALLED + SERVE_ONE_CALL).stdout) == []


def test_opentelemetry_without_a_provider_makes_no_spans() -> None:
    """Imported by someone, but no tracer provider set: the engine's spans module stays out."""
    loaded = json.loads(_run("import opentelemetry.trace\n" + SERVE_ONE_CALL).stdout)
    assert "opentelemetry.trace" in loaded
    assert "engine._internal.otel_spans" not in loaded


def test_engine_tracing_on_without_opentelemetry_says_what_to_install() -> None:
    code = (
        NOT_INSTALLED
        + """
import os
os.environ["ENGINE_TRACING"] = "on"
from engine import MCPServer
try:
    MCPServer("Traced")
except RuntimeError as exc:
    print(exc)
"""
    )
    assert "pip install 'mcp-engine[otel]'" in _run(code).stdout
