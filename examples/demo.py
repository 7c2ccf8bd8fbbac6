"""``make demo``: two replicas on 127.0.0.1, one order whose rounds alternate between them.

Both replicas get the same freshly generated key. The client below is plain ``urllib``: it runs
the multi-round loop itself, so every request and response is visible. After the transcript
both replicas keep serving until Ctrl-C (``--once`` stops right away).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2026-07-28"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_replica(name: str, port: int, key: str, store: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, ENGINE_KEYS=key, ENGINE_STORE=store, PYTHONPATH=str(ROOT))
    with log.open("wb") as output:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine",
                "serve",
                "examples/bookshop_server.py",
                "--port",
                str(port),
                "--replica",
                name,
            ],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def wait_listening(port: int, replica: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and replica.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"replica on port {port} did not start:\n{log.read_text()[-2000:]}")


def post(url: str, request_id: int, method: str, params: dict[str, Any]) -> tuple[str, Any]:
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
        "Mcp-Name": params["name"],
    }
    request = urllib.request.Request(url, body.encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        replica = response.headers.get("x-engine-replica", "?")
        return replica, json.loads(response.read())["result"]


def show(title: str, payload: Any) -> None:
    print(f"\n{title}\n{json.dumps(payload, indent=2, ensure_ascii=False)}")


def main(once: bool) -> int:
    key = secrets.token_hex(32)
    workdir = tempfile.mkdtemp(prefix="engine-demo-")
    store = f"sqlite:///{workdir}/calls.sqlite3"
    ports = {"A": free_port(), "B": free_port()}
    logs = {name: Path(workdir) / f"replica-{name}.log" for name in ports}
    replicas = [start_replica(name, port, key, store, logs[name]) for name, port in ports.items()]
    try:
        for (name, port), replica in zip(ports.items(), replicas, strict=True):
            wait_listening(port, replica, logs[name])
        urls = [f"http://127.0.0.1:{port}/mcp" for port in ports.values()]
        print("Two replicas of the bookshop share one key and one embedded store (SQLite):")
        for name, url in zip(ports, urls, strict=True):
            print(f"  replica {name}: {url}")
        print("\nOrdering 'Neuromancer', which is out of stock: the server has to ask.")
        params: dict[str, Any] = {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        for number in range(1, 5):
            replica, result = post(urls[(number - 1) % 2], number, "tools/call", params)
            shown = {k: v for k, v in result.items() if k != "_meta"}
            if "requestState" in shown:
                token = shown["requestState"]
                shown["requestState"] = f"{token[:32]}... ({len(token)} characters, sealed)"
            show(f"Round {number}, served by replica {replica}:", shown)
            if result.get("resultType") != "input_required":
                break
            answers = {}
            for request_key, question in result["inputRequests"].items():
                print(f"\n  The user is asked: {question['params']['message']}  → yes")
                answers[request_key] = {"action": "accept", "content": {"confirm": True}}
            params = {**params, "inputResponses": answers, "requestState": result["requestState"]}
        if once:
            return 0
        print("\nBoth replicas keep serving. Point any MCP client that speaks protocol")
        print("2026-07-28 at either URL above (the official `mcp` Client does), and send the")
        print("rounds of one call to different replicas: either one resumes it.")
        print("Press Ctrl-C to stop.")
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        for replica in replicas:
            replica.terminate()
        for replica in replicas:
            replica.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(once="--once" in sys.argv))
