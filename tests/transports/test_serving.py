"""What an operator sees: /healthz and /metrics, and how ``mcp.run`` serves."""

import contextlib
import gc
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from uvicorn.protocols.http import auto as http_auto
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.testing import Client, ProtocolError
from engine.transports import serving
from examples.bookshop import build
from stores import MemoryStore, RedisStore
from tests.conftest import KEY
from tests.private_redis import PrivateRedis, free_ports

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio

YES = {"action": "accept", "content": {"confirm": True}}


async def test_healthz_answers_when_the_process_and_store_do() -> None:
    app = build(keys=[KEY], store=MemoryStore(), replica_id="r1").streamable_http_app()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"replica": "r1", "store": "ok", "status": "ok"}
    assert response.headers["x-engine-replica"] == "r1"


async def test_healthz_is_503_while_the_store_is_down(tmp_path: Path) -> None:
    redis = PrivateRedis(tmp_path, free_ports(1)[0])
    await redis.start()
    mcp = build(keys=[KEY], store=RedisStore(redis.url, op_timeout=0.3))
    app = mcp.streamable_http_app()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        assert (await client.get("/healthz")).status_code == 200
        await redis.kill()
        down = await client.get("/healthz")
        await redis.start()
        back = await client.get("/healthz")
    await redis.kill()
    assert down.status_code == 503
    assert down.json()["status"] == "unavailable"
    assert back.status_code == 200


async def test_metrics_count_rounds_duplicates_and_rejections() -> None:
    mcp = build(keys=[KEY], store=MemoryStore())
    async with Client(mcp, elicitation=lambda p: YES) as client:
        await client.call_tool("order_book", {"title": "Neuromancer"})
        first = await client.send(
            "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        )
        retry = {
            "name": "order_book",
            "arguments": {"title": "Neuromancer"},
            "inputResponses": {"confirm_backorder": YES},
            "requestState": first["requestState"],
        }
        await client.send("tools/call", retry)
        await client.send("tools/call", retry)
        with pytest.raises(ProtocolError):
            await client.send("tools/call", {**retry, "requestState": "s1.nope"})
    app = mcp.streamable_http_app()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        text = (await client.get("/metrics")).text
    assert 'engine_rounds_total{method="tools/call",outcome="input_required"} 2' in text
    assert 'engine_rounds_total{method="tools/call",outcome="complete"} 2' in text
    assert "engine_duplicates_served_total 1" in text
    assert "engine_calls_completed_total 2" in text
    assert 'engine_token_rejections_total{reason="malformed"} 1' in text
    assert "# TYPE engine_state_spills_total counter" in text


def test_run_serves_with_the_uvicorn_options_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_GC_FREEZE", raising=False)
    monkeypatch.delenv("ENGINE_ACCESS_LOG", raising=False)
    served: dict[str, Any] = {}

    def serve(
        app: Any,
        *,
        host: str,
        port: int,
        settings: dict[str, Any],
        limits: Any = None,
        sockets: Any = None,
    ) -> None:
        served.update(settings, app=app, host=host, port=port, limits=limits, sockets=sockets)

    monkeypatch.setattr(serving, "serve", serve)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    mcp = build(keys=[KEY])
    mcp.run("streamable-http", port=9123, uvicorn_options={"loop": "asyncio", "access_log": False})
    assert (served["port"], served["loop"], served["access_log"]) == (9123, "asyncio", False)
    assert served["sockets"] is None  # binds host:port itself
    assert served["log_level"] == "info"
    assert served["app"].endpoint.freeze_after_startup is True
    mcp.run("streamable-http")
    assert served["access_log"] is False  # off unless asked for
    # The connection limits always reach the server: the defaults, or what was given.
    assert (served["limits"].max_head_bytes, served["limits"].max_connections) == (65536, None)
    build(keys=[KEY], max_connections=7, head_timeout=2.5).run("streamable-http")
    assert (served["limits"].max_connections, served["limits"].head_timeout) == (7, 2.5)
    # The environment is read when a server is made.
    monkeypatch.setenv("ENGINE_ACCESS_LOG", "1")
    build(keys=[KEY]).run("streamable-http")
    assert served["access_log"] is True
    build(keys=[KEY]).run("streamable-http", uvicorn_options={"access_log": False})
    assert served["access_log"] is False
    monkeypatch.delenv("ENGINE_ACCESS_LOG")
    monkeypatch.setenv("ENGINE_GC_FREEZE", "0")
    build(keys=[KEY]).run("streamable-http")
    assert served["app"].endpoint.freeze_after_startup is False
    monkeypatch.setenv("ENGINE_GC_FREEZE", "off")
    build(keys=[KEY]).run("streamable-http")
    assert served["app"].endpoint.freeze_after_startup is False
    with pytest.raises(ValueError, match="on the host and port passed to it"):
        mcp.run("streamable-http", uvicorn_options={"port": 9124})
    with pytest.raises(ValueError, match=r"engine serve FILE\.py\[:ATTR\] --workers N"):
        mcp.run("streamable-http", uvicorn_options={"workers": 2})
    with pytest.raises(ValueError, match=r"takes no workers: run `python -m engine serve"):
        mcp.run("streamable-http", workers=2)


def test_run_parses_http_with_httptools_on_uvloop_unless_told_otherwise() -> None:
    """Both come with the package: uvicorn's pure-Python parser serves far fewer calls per
    second (docs/benchmarks.md has the figures)."""
    app = build(keys=[KEY]).streamable_http_app()
    assert serving.stack(uvicorn.Config(app, log_config=None)) == ("httptools", "uvloop")
    given = uvicorn.Config(app, log_config=None, http=H11Protocol, loop="none")
    assert serving.stack(given) == ("h11", "the event loop policy's")


def test_serving_warns_when_its_fast_parser_or_loop_does_not_import(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(http_auto, "AutoHTTPProtocol", H11Protocol)  # as without httptools
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it fails
    monkeypatch.setattr(serving.DrainingServer, "run", _started_at_once)
    app = build(keys=[KEY]).streamable_http_app()

    def served(**settings: Any) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="engine.http"):
            serving.serve(app, host="127.0.0.1", port=0, settings={"log_config": None, **settings})
        return [r.getMessage() for r in caplog.records if r.name == "engine.http"]

    logged = served()
    assert logged[0] == "HTTP parsed by h11, on the asyncio event loop"
    assert "pip install httptools" in logged[1] and "pip install uvloop" in logged[2]
    assert served(http="h11", loop="asyncio") == ["HTTP parsed by h11, on the asyncio event loop"]


def _started_at_once(self: uvicorn.Server, sockets: Any = None) -> None:
    self.started = True


async def lifespan_freeze_counts(app: Any) -> tuple[int, int]:
    """The collector's frozen-object count before startup and once startup is complete."""
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    counts = [gc.get_freeze_count()]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            counts.append(gc.get_freeze_count())

    await app({"type": "lifespan"}, receive, send)
    return counts[0], counts[1]


async def test_a_served_process_leaves_its_startup_objects_out_of_collections() -> None:
    try:
        before, after = await lifespan_freeze_counts(
            build(keys=[KEY]).streamable_http_app(freeze_after_startup=True)
        )
        assert after > before
    finally:
        gc.unfreeze()
    before, after = await lifespan_freeze_counts(build(keys=[KEY]).streamable_http_app())
    assert after == before  # mounted in someone else's application: their process, their call


def _send(conn: socket.socket, method: str, path: str, body: bytes = b"") -> None:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += (
            "Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            "Mcp-Method: tools/call\r\nMcp-Name: slow\r\n"
        )
    conn.sendall(head.encode() + b"\r\n" + body)


def _read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response read from a keep-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError(f"the server closed the connection (after {data!r})")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += conn.recv(65536)
    return int(lines[0].split()[1]), headers, body


def _request(conn: socket.socket, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    _send(conn, method, path)
    return _read_response(conn)


SLOW_SERVER = """
import sys
sys.path.insert(0, {root!r})
import anyio
from engine import MCPServer

mcp = MCPServer("Drained", keys=[{key!r}])


@mcp.tool()
async def slow() -> str:
    \"\"\"Take a second.\"\"\"
    await anyio.sleep(1)
    return "done"


mcp.run("streamable-http", port={port}, uvicorn_options={{"log_level": "warning"}})
"""


@contextlib.contextmanager
def served_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A server run by ``mcp.run`` in its own process, listening; killed if still alive."""
    port = free_ports(1)[0]
    script = tmp_path / "serve.py"
    script.write_text(SLOW_SERVER.format(root=str(ROOT), key=KEY, port=port))
    process = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None, "did not start"
                time.sleep(0.05)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _terminate_and_wait_for_the_listener(process: subprocess.Popen[bytes], port: int) -> None:
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        assert time.monotonic() < deadline, "still accepting connections"
        time.sleep(0.05)


def test_a_drain_serves_a_request_sent_on_an_idle_keep_alive_connection(tmp_path: Path) -> None:
    """A proxy may send on an idle connection just as SIGTERM arrives: that request is served,
    and its response closes the connection, rather than the connection being dropped under it."""
    with served_process(tmp_path) as (process, port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            status, headers, _ = _request(conn, "GET", "/healthz")
            assert status == 200 and headers.get("connection") != "close"
            _terminate_and_wait_for_the_listener(process, port)
            time.sleep(0.3)  # where uvicorn alone would have closed this idle connection
            status, headers, body = _request(conn, "GET", "/healthz")
            assert status == 200 and b'"status":"ok"' in body
            assert headers.get("connection") == "close"
            assert conn.recv(1) == b""
        assert process.wait(timeout=10) == 0


def test_a_drain_closes_a_busy_connection_after_its_response(tmp_path: Path) -> None:
    """A connection serving a request at SIGTERM is not handed back to the proxy for more."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "slow",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    with served_process(tmp_path) as (process, port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            started = time.monotonic()
            _send(conn, "POST", "/mcp", json.dumps(call).encode())
            time.sleep(0.3)  # the tool is running
            _terminate_and_wait_for_the_listener(process, port)
            status, headers, body = _read_response(conn)
            assert status == 200 and b'"text":"done"' in body
            assert headers.get("connection") == "close"
            assert conn.recv(1) == b""
            assert time.monotonic() - started < 4  # not after an idle connection's timeout
        assert process.wait(timeout=10) == 0


def histogram_of(text: str, name: str, labels: str) -> tuple[list[tuple[str, int]], int, float]:
    """The buckets (``le``, cumulative count), count and sum of one histogram in an exposition."""
    buckets: list[tuple[str, int]] = []
    count, total = -1, -1.0
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        if sample.startswith(f"{name}_bucket{{{labels},le="):
            buckets.append((sample.split('le="')[1].rstrip('"}'), int(value)))
        elif sample == f"{name}_count{{{labels}}}":
            count = int(value)
        elif sample == f"{name}_sum{{{labels}}}":
            total = float(value)
    return buckets, count, total


async def test_metrics_time_rounds_and_store_operations(tmp_path: Path) -> None:
    """Round durations by method and outcome, store operations by name: Prometheus histograms
    whose buckets only grow and end in +Inf with the count."""
    mcp = build(keys=[KEY], store=f"sqlite:///{tmp_path / 'calls.db'}")
    async with Client(mcp, elicitation=lambda p: YES) as client:
        first = await client.send(
            "tools/call", {"name": "order_book", "arguments": {"title": "Neuromancer"}}
        )
        retry = {
            "name": "order_book",
            "arguments": {"title": "Neuromancer"},
            "inputResponses": {"confirm_backorder": YES},
            "requestState": first["requestState"],
        }
        await client.send("tools/call", retry)
    text = mcp.core.metrics.exposition()
    assert "# TYPE engine_round_duration_seconds histogram" in text
    assert "# TYPE engine_store_operation_duration_seconds histogram" in text
    for labels in (
        'method="tools/call",outcome="input_required"',
        'method="tools/call",outcome="complete"',
    ):
        buckets, count, total = histogram_of(text, "engine_round_duration_seconds", labels)
        assert count == 1 and total > 0
        assert buckets[-1] == ("+Inf", 1)
        assert [n for _, n in buckets] == sorted(n for _, n in buckets)
    for operation in ("claim", "complete", "journal"):
        labels = f'operation="{operation}"'
        buckets, count, total = histogram_of(
            text, "engine_store_operation_duration_seconds", labels
        )
        assert count >= 1 and total > 0, (operation, text)
        assert buckets[-1] == ("+Inf", count)
