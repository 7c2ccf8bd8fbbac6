"""``ENGINE_LOG_FORMAT=json``: the log of ``python -m engine serve`` (the default path, its
embedded store) is one JSON object per line, and a line written during a round (by the engine
or by the tool) names the call, the round, the tool, the principal and the replica, but never an
argument, an answer, a requestState or a key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.conftest import KEY
from tests.fleet_helpers import free_port, healthy_until_stopped
from tests.http_helpers import assert_result, call, post, request

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SHOP = "tests/observability/logging_shop.py"
TITLE = "Title-9b1e7c"
"""An argument value no log line may show."""
ANSWER = {"action": "accept", "content": {"confirm": True}}


def serve(tmp_path: Path, port: int, *args: str, **env: str) -> subprocess.Popen[bytes]:
    environ = {**os.environ, "ENGINE_KEYS": KEY, "PYTHONPATH": str(ROOT), **env}
    environ.pop("ENGINE_STORE", None)
    command = [sys.executable, "-m", "engine", "serve", SHOP, "--port", str(port)]
    command += ["--replica", "replica-j", *args]
    log = (tmp_path / "serve.log").open("wb")
    return subprocess.Popen(command, cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT)


async def two_rounds(base: str) -> str:
    """Call ``order_book`` as Alice and answer its question: the requestState of round 2."""
    headers = {"X-User": "alice"}
    capabilities = {"elicitation": {}}
    async with httpx2.AsyncClient(base_url=base, trust_env=False, timeout=20) as http:
        first = assert_result(
            await post(
                http,
                call("order_book", {"title": TITLE}, capabilities=capabilities),
                headers=headers,
            )
        )
        state = first["requestState"]
        params = {
            "name": "order_book",
            "arguments": {"title": TITLE},
            "inputResponses": {key: ANSWER for key in first["inputRequests"]},
            "requestState": state,
        }
        second = assert_result(
            await post(
                http, request("tools/call", params, capabilities=capabilities), headers=headers
            )
        )
        assert second["content"][0]["text"] == f"Ordered {TITLE}."
        failed = assert_result(await post(http, call("fail", {"title": TITLE}), headers=headers))
        assert failed["isError"] is True
    return str(state)


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_every_line_is_json_and_a_rounds_lines_name_their_call(tmp_path: Path) -> None:
    port = free_port()
    process = serve(tmp_path, port, ENGINE_LOG_FORMAT="json")
    with healthy_until_stopped(process, port, tmp_path / "serve.log"):
        state = await two_rounds(f"http://127.0.0.1:{port}")
    text = (tmp_path / "serve.log").read_text()
    lines = lines_of(tmp_path / "serve.log")
    asked = next(line for line in lines if line["message"] == "asking whether to order")
    placed = next(line for line in lines if line["message"] == "order placed")
    failed = next(line for line in lines if "error" in line)

    assert all(line["replica"] == "replica-j" for line in lines)
    assert {"ts", "level", "logger", "message"} <= set(lines[0])
    assert asked["call_id"] == placed["call_id"]
    assert (asked["round"], placed["round"]) == (1, 2)
    assert asked["tool"] == placed["tool"] == "order_book"
    assert asked["principal"] == placed["principal"] == "alice"
    assert asked["logger"] == "shop" and asked["level"] == "info"
    assert failed["tool"] == "fail" and failed["call_id"] != asked["call_id"]
    assert failed["error"]["type"] == "builtins.RuntimeError"
    assert any("fail" in frame for frame in failed["error"]["stack"])
    for secret in (TITLE, KEY, state[:40], '"confirm": true'):
        assert secret not in text


def test_the_flag_sets_the_format_and_a_wrong_value_is_refused(tmp_path: Path) -> None:
    port = free_port()
    process = serve(tmp_path, port, "--log-format", "json")
    with healthy_until_stopped(process, port, tmp_path / "serve.log"):
        pass
    assert lines_of(tmp_path / "serve.log")

    wrong = subprocess.run(
        [sys.executable, "-m", "engine", "serve", SHOP],
        cwd=ROOT,
        env={**os.environ, "ENGINE_LOG_FORMAT": "xml"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2
    assert "ENGINE_LOG_FORMAT must be 'text' or 'json', not 'xml'" in wrong.stderr
