"""``make demo`` runs one order across two real replicas, then stops them and exits 0.

The first test runs the demo with the command line of the Makefile's ``demo`` target (read from
the Makefile, ``$(BIN)/python`` standing for this interpreter), twice in a row, each time in a
temporary directory of its own (``TMPDIR``) that must be empty again afterwards. The second
starts ``--serve``, waits for its ready line, calls a tool on both replicas, and terminates it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2026-07-28"
READY = "Serving; press Ctrl-C to stop."
REPLICA_URL = re.compile(r"^  replica ([AB]): (http://127\.0\.0\.1:(\d+)/mcp)$", re.MULTILINE)


def make_demo_command() -> list[str]:
    """The recipe of the Makefile's ``demo`` target, with ``$(BIN)/python`` as this Python."""
    recipe: list[str] | None = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if recipe is None:
            if line.startswith("demo:"):
                recipe = []
        elif line.startswith("\t"):
            recipe.append(line.strip())
        else:
            break
    assert recipe is not None and len(recipe) == 1, recipe
    command = shlex.split(recipe[0])
    assert command[0] == "$(BIN)/python", command
    return [sys.executable, *command[1:]]


def demo_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    env.pop("ENGINE_STORE", None)
    return env


def closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return True
    return False


def test_make_demo_shows_the_exchange_and_exits_0(tmp_path: Path) -> None:
    command = make_demo_command()
    assert command[1:] == ["examples/demo.py"]  # no flag: the demo ends on its own
    for attempt in range(2):  # a second run right after the first works too
        started = time.monotonic()
        run = subprocess.run(
            command,
            cwd=ROOT,
            env=demo_env(tmp_path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, (attempt, run.stdout, run.stderr)
        assert time.monotonic() - started < 60
        out = run.stdout
        assert "Two replicas of the bookshop share one key and one embedded store (SQLite):" in out
        replicas = dict((name, int(port)) for name, _, port in REPLICA_URL.findall(out))
        assert sorted(replicas) == ["A", "B"], out
        assert "Round 1, served by replica A:" in out
        assert '"resultType": "input_required"' in out
        assert '"requestState": "s1.' in out
        assert "characters, sealed)" in out
        assert "The user is asked: 'Neuromancer' is out of stock (2-3 weeks). Order anyway?" in out
        assert "Round 2, served by replica B:" in out
        assert "Round 3" not in out
        assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in out
        assert '"resultType": "complete"' in out
        assert "The call is complete; both replicas are stopped." in out
        assert READY not in out
        assert all(closed(port) for port in replicas.values()), replicas
        assert list(tmp_path.iterdir()) == []  # the store and the logs are gone


def test_demo_help_names_serve() -> None:
    run = subprocess.run(
        [sys.executable, "examples/demo.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert "--serve" in run.stdout


def call_tool(url: str, title: str) -> tuple[str, dict[str, Any]]:
    params = {
        "name": "order_book",
        "arguments": {"title": title},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "order_book",
    }
    request = urllib.request.Request(url, body.encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("x-engine-replica", "?"), json.loads(response.read())["result"]


def test_demo_serve_keeps_serving_until_terminated(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [sys.executable, "examples/demo.py", "--serve"],
        cwd=ROOT,
        env=demo_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while READY not in "".join(seen):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "".join(seen)
            seen.append(line)
        out = "".join(seen)
        assert "Backordered 'Neuromancer'; it ships in 2-3 weeks." in out
        replicas = {name: (url, int(port)) for name, url, port in REPLICA_URL.findall(out)}
        assert sorted(replicas) == ["A", "B"], out
        time.sleep(0.5)
        assert demo.poll() is None, "".join(seen)  # still serving after the exchange
        for name, (url, _) in replicas.items():
            replica, result = call_tool(url, "Dune")
            assert replica == name
            assert result["resultType"] == "complete", result
            assert result["structuredContent"] == {"result": "Ordered 'Dune'."}
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=30) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    reader.join(timeout=10)
    assert all(closed(port) for _, port in replicas.values()), replicas
    assert list(tmp_path.iterdir()) == []
