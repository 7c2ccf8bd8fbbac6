"""``python -m engine serve app.py`` with nothing configured keeps its requestState secret in the
user's data directory (0600) beside the default store: a question asked before a restart is
answered after it, and the journal commands open the sealed journal without being given keys."""

from __future__ import annotations

import contextlib
import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.abuse.test_abuse_journal import APP, ARGUMENT, ELICITATION, answered, environment
from tests.fleet_helpers import ROOT, free_port, healthy_until_stopped
from tests.http_helpers import call, headers_for, request


@contextlib.contextmanager
def serving(app: Path, data: Path, log_path: Path) -> Iterator[str]:
    """The default path: no keys, no store, nothing but the app and this user's data home."""
    port = free_port()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "engine", "serve", str(app), "--port", str(port)],
            cwd=ROOT,
            env=environment(XDG_DATA_HOME=str(data)),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    with healthy_until_stopped(process, port, log_path):
        yield f"http://127.0.0.1:{port}/mcp"


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    with httpx.Client(trust_env=False, timeout=30) as http:
        response = http.post(url, content=json.dumps(body).encode(), headers=headers_for(body))
    assert response.status_code == 200, response.text[:500]
    result: dict[str, Any] = response.json()["result"]
    return result


def engine(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=ROOT,
        env=environment(XDG_DATA_HOME=str(data)),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_a_default_served_call_survives_a_restart_and_replays_without_keys(
    tmp_path: Path,
) -> None:
    app, data, log = tmp_path / "app.py", tmp_path / "data", tmp_path / "serve.log"
    app.write_text(APP)
    arguments = {"title": ARGUMENT}
    with serving(app, data, log) as url:
        first = post(url, call("order", arguments, capabilities=ELICITATION))
    assert first["resultType"] == "input_required", first
    kept = data / "mcp-engine" / "keys"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert "requestState keys: generated and kept in" in log.read_text()
    assert "ephemeral key" not in log.read_text()

    params: dict[str, Any] = {"name": "order", "arguments": arguments}
    with serving(app, data, log) as url:  # a new process: the same kept secret
        for note in ("yes", "wrapped"):
            [key] = first["inputRequests"]
            params["inputResponses"] = {key: answered(note)}
            params["requestState"] = first["requestState"]
            first = post(url, request("tools/call", params, capabilities=ELICITATION))
    assert first["content"][0]["text"].startswith(f"ordered {ARGUMENT}: yes wrapped")
    assert log.read_text().count("requestState keys: from") == 1

    listed = engine(data, "calls", "--json", "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    call_id = json.loads(listed.stdout)[0]["call_id"]
    replayed = engine(data, "replay", call_id, "--app", str(app))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "All 3 rounds match the record." in replayed.stdout
