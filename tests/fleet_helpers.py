"""Real processes and sockets for the interop tests: engine replicas and a round-robin proxy.

``engine_fleet`` starts ``python -m engine serve`` subprocesses (one per replica id, each with its
own ``ENGINE_KEYS``) and always stops them. ``RoundRobinProxy`` is a tiny ASGI reverse proxy that
sends each request to the next upstream in turn, streams the response back (JSON or
``text/event-stream``) and records which upstream served it. ``serve_asgi`` runs any ASGI app
with uvicorn on a loopback socket inside the current event loop.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
"""RFC 9110 §7.6.1 connection-specific headers: never forwarded by a proxy."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


# --- engine subprocesses --------------------------------------------------------------------------


@dataclass
class EngineProcess:
    """One ``python -m engine serve`` replica on a loopback port."""

    replica: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "<no log>"

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)


@contextlib.contextmanager
def healthy_until_stopped(
    process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 20.0
) -> Iterator[None]:
    """Wait for a served ``process`` to answer ``/healthz`` on ``port`` (its log in the error
    when it does not), then stop it when the block ends."""
    import urllib.request

    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text()) from None
                time.sleep(0.1)
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _spawn_engine(
    target: str,
    replica: str,
    keys: str,
    log_dir: Path,
    extra_env: Mapping[str, str] | None = None,
) -> EngineProcess:
    port = free_port()
    env = dict(os.environ)
    for name in ("ENGINE_KEYS", "ENGINE_REPLICA_ID", "ENGINE_ALLOWED_HOSTS"):
        env.pop(name, None)
    env["ENGINE_KEYS"] = keys
    env["ENGINE_STORE"] = "none"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra_env or {})
    log_path = log_dir / f"{replica}.log"
    with log_path.open("wb") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine",
                "serve",
                target,
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--replica",
                replica,
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return EngineProcess(replica, port, process, log_path)


def _wait_listening(replicas: Sequence[EngineProcess], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(replicas)
    while waiting:
        for replica in list(waiting):
            if replica.process.poll() is not None:
                raise RuntimeError(
                    f"replica {replica.replica} exited with {replica.process.returncode}:\n"
                    f"{replica.log_tail()}"
                )
            try:
                socket.create_connection((LOOPBACK, replica.port), timeout=0.2).close()
            except OSError:
                continue
            waiting.remove(replica)
        if not waiting:
            return
        if time.monotonic() > deadline:
            names = ", ".join(r.replica for r in waiting)
            raise TimeoutError(f"replicas did not start listening within {timeout}s: {names}")
        time.sleep(0.05)


@contextlib.contextmanager
def engine_fleet(
    target: str,
    replicas: Mapping[str, str],
    log_dir: Path,
    start_timeout: float = 20.0,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[dict[str, EngineProcess]]:
    """Serve ``target`` once per ``{replica id: ENGINE_KEYS}``, all started in parallel."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started: dict[str, EngineProcess] = {}
    try:
        for replica, keys in replicas.items():
            started[replica] = _spawn_engine(target, replica, keys, log_dir, extra_env)
        _wait_listening(list(started.values()), start_timeout)
        yield started
    finally:
        for process in started.values():
            process.stop()


# --- in-process uvicorn ---------------------------------------------------------------------------


class _TestServer(uvicorn.Server):
    """A uvicorn server that leaves the test runner's signal handlers alone and says when it
    has started (or given up starting)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.settled.set()

    async def serve_until_exit(self, sockets: list[socket.socket]) -> None:
        try:
            await self.serve(sockets)
        finally:
            self.settled.set()  # a failed startup must not leave the caller waiting


@contextlib.asynccontextmanager
async def serve_asgi(app: Any, start_timeout: float = 10.0) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on a fresh loopback socket; yields ``http://127.0.0.1:PORT``."""
    # Named as TCP, so asyncio turns Nagle off on its connections as it does for its own
    # listeners; a socket of protocol 0 leaves it on, and every split response waits 40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, access_log=False
    )
    server = _TestServer(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve_until_exit, [sock])
            with anyio.fail_after(start_timeout):
                await server.settled.wait()
            if not server.started:
                raise RuntimeError("uvicorn did not start; see its log output")
            try:
                yield f"http://{LOOPBACK}:{port}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


# --- the round-robin reverse proxy ----------------------------------------------------------------


@dataclass
class Forwarded:
    """One request the proxy forwarded, and what answered it."""

    upstream: str
    http_method: str
    path: str
    rpc_method: str | None
    params: dict[str, Any]
    status: int = 0
    content_type: str = ""
    replica: str | None = None
    """The upstream's ``x-engine-replica`` response header."""

    @property
    def tool(self) -> str | None:
        name = self.params.get("name")
        return name if isinstance(name, str) else None

    @property
    def resumed(self) -> bool:
        """Whether the request carried a ``requestState`` (a retry round of a call)."""
        return "requestState" in self.params


def _connection_tokens(headers: Sequence[tuple[bytes, bytes]]) -> set[str]:
    tokens: set[str] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens |= {t.strip().lower() for t in value.decode("latin-1").split(",") if t.strip()}
    return tokens


def _forwardable(
    headers: Sequence[tuple[bytes, bytes]], drop: set[str]
) -> list[tuple[bytes, bytes]]:
    skip = HOP_BY_HOP | drop | _connection_tokens(headers)
    return [(k, v) for k, v in headers if k.decode("latin-1").lower() not in skip]


def _jsonrpc_summary(body: bytes) -> tuple[str | None, dict[str, Any]]:
    try:
        message = json.loads(body)
    except ValueError:
        return None, {}
    if not isinstance(message, dict):
        return None, {}
    method = message.get("method")
    params = message.get("params")
    return (method if isinstance(method, str) else None), (
        params if isinstance(params, dict) else {}
    )


class RoundRobinProxy:
    """ASGI reverse proxy: request ``n`` goes to ``upstreams[n % len(upstreams)]``.

    The method, path, query, end-to-end headers and body are forwarded with ``httpx``; the
    response status, end-to-end headers and body are streamed back chunk by chunk as they
    arrive, so server-sent events pass through live. ``forwarded`` records every request.
    """

    def __init__(self, upstreams: Sequence[str], timeout: float = 15.0) -> None:
        if not upstreams:
            raise ValueError("a proxy needs at least one upstream")
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self.forwarded: list[Forwarded] = []
        self._turn = itertools.cycle(range(len(self.upstreams)))
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def posts(self, rpc_method: str | None = None) -> list[Forwarded]:
        return [
            f
            for f in self.forwarded
            if f.http_method == "POST" and (rpc_method is None or f.rpc_method == rpc_method)
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # trust_env=False: never route loopback traffic through an environment proxy.
                self._client = httpx.AsyncClient(timeout=self._timeout, trust_env=False)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                    self._client = None
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._client is not None, "the proxy runs only under an ASGI lifespan"
        body = await _read_body(receive)
        upstream = self.upstreams[next(self._turn)]
        url = upstream + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        rpc_method, params = _jsonrpc_summary(body) if scope["method"] == "POST" else (None, {})
        record = Forwarded(upstream, scope["method"], scope["path"], rpc_method, params)
        self.forwarded.append(record)
        # host and content-length describe this hop: httpx sets them for the upstream request.
        headers = _forwardable(scope["headers"], {"host", "content-length"})
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            record.status = 502
            text = f"upstream {upstream} failed: {exc!r}".encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 502,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                }
            )
            await send({"type": "http.response.body", "body": text})
            return
        try:
            record.status = response.status_code
            record.content_type = response.headers.get("content-type", "")
            record.replica = response.headers.get("x-engine-replica")
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": _forwardable(response.headers.raw, set()),
                }
            )
            # aiter_raw: the bytes exactly as sent, so content-length/-encoding stay truthful.
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
