"""Importing the engine must not load a store's driver: redis-py alone costs tens of
milliseconds at every start (CLI commands, stdio servers), and a server on SQLite or in memory
never needs it."""

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
