"""``make demo``: two replicas on 127.0.0.1, one order whose rounds alternate between them.

Both replicas get the same freshly generated key and one SQLite store in a temporary directory.
The client below is plain ``urllib``: it runs the multi-round loop itself, so every request and
response is visible. After the transcript the demo stops both replicas, removes the temporary
directory and exits 0; with ``--serve`` the replicas keep serving until Ctrl-C (or SIGTERM).
"""

from __future__ import annotations

import argparse
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


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: leave through ``finally``, which stops the replicas."""


def on_signal(signum: int, frame: object) -> None:
    raise Stopped


def stop(replicas: list[subprocess.Popen[bytes]]) -> None:
    for replica in replicas:
        if replica.poll() is None:
            replica.terminate()
    for replica in replicas:
        try:
            replica.wait(timeout=10)
        except subprocess.TimeoutExpired:
            replica.kill()
            replica.wait()


def serve(replicas: list[subprocess.Popen[bytes]], logs: list[Path]) -> int:
    print("\nBoth replicas keep serving. Point any MCP client that speaks protocol")
    print("2026-07-28 at either URL above (the official `mcp` Client does), and send the")
    print("rounds of one call to different replicas: either one resumes it.")
    print("Serving; press Ctrl-C to stop.")
    while True:
        for replica, log in zip(replicas, logs, strict=True):
            if replica.poll() is not None:
                print(f"A replica exited ({replica.returncode}):\n{log.read_text()[-2000:]}")
                return 1
        time.sleep(0.2)


def main(keep_serving: bool) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            signal.signal(signum, on_signal)
    key = secrets.token_hex(32)
    workdir = tempfile.mkdtemp(prefix="engine-demo-")
    store = f"sqlite:///{workdir}/calls.sqlite3"
    ports = {"A": free_port(), "B": free_port()}
    logs = {name: Path(workdir) / f"replica-{name}.log" for name in ports}
    replicas: list[subprocess.Popen[bytes]] = []
    try:
        for name, port in ports.items():
            replicas.append(start_replica(name, port, key, store, logs[name]))
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
        if result.get("resultType") != "complete" or result.get("isError"):
            print("\nThe order did not complete.")
            return 1
        if keep_serving:
            return serve(replicas, list(logs.values()))
        stop(replicas)
        print("\nThe call is complete; both replicas are stopped.")
        print("`python examples/demo.py --serve` keeps them serving instead.")
        return 0
    except (KeyboardInterrupt, Stopped):
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not skip the cleanup
            signal.signal(signum, signal.SIG_IGN)
        stop(replicas)
        shutil.rmtree(workdir, ignore_errors=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python examples/demo.py",
        description=(
            "Start two replicas of the bookshop on 127.0.0.1 (one key, one SQLite store in a "
            "temporary directory), order an out-of-stock book so that its two rounds are served "
            "by different replicas, then stop the replicas, remove the directory and exit."
        ),
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="after the exchange, keep both replicas serving until Ctrl-C or SIGTERM",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(keep_serving=parse_args(sys.argv[1:]).serve))
