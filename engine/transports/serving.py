"""Serving the HTTP app under uvicorn, with a drain that never drops a request a proxy sent.

On SIGTERM uvicorn closes its listener, then closes every idle keep-alive connection at once. A
proxy in front (nginx) may be sending a request on one of those connections at that very
moment; the request is lost, and since a proxy does not resend a POST that may have reached
the server, its client gets a 502. Here no connection is closed under a request: one busy at
SIGTERM closes once its response is sent, a request still arriving on an idle one is served and
its response closes the connection, and one that stays idle ends by its keep-alive timeout,
which a proxy must outlast anyway (it gives idle connections up first, as in steady state).

uvicorn's own HTTP/1.1 protocols (httptools or h11, by name or ``auto``) are served writing
through `engine.transports._writes`, one socket write per response, and held to the connection
limits of `engine.transports._connections` (head size and time, body time and rate, the number
of connections); a protocol class passed in ``uvicorn_options`` is served as it is.

The cap on connections is kept below the process's file-descriptor limit, whose soft value is
raised to the hard one at start: a process out of descriptors fails to accept any connection,
the legitimate ones included, while one at its cap still sheds idle connections or answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from uvicorn.config import HTTP_PROTOCOLS, STARTUP_FAILURE
from uvicorn.importer import import_from_string

from engine._internal import logs
from engine.settings import ConnectionLimits
from engine.transports._connections import ConnectionGuard, guarded
from engine.transports._writes import coalescing

if TYPE_CHECKING:
    from engine.transports.starlette_app import MCPStarlette

DESCRIPTORS_KEPT = 128
"""File descriptors left beside connections: the store's, the log's, files a handler opens."""
MAX_DEFAULT_CONNECTIONS = 10_000
"""The derived cap's ceiling, however many descriptors the process may open."""

log = logging.getLogger("engine.http")


def _idle(connection: Any) -> bool:
    """Whether a uvicorn connection is between requests (its keep-alive wait)."""
    cycle = getattr(connection, "cycle", None)
    return cycle is None or bool(cycle.response_complete)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first lets keep-alive connections end on their own."""

    def __init__(
        self, config: uvicorn.Config, app: MCPStarlette, guard: ConnectionGuard | None = None
    ) -> None:
        super().__init__(config)
        self.app = app
        self.guard = guard
        self._sweep_every = 1 if guard is None else max(1, round(guard.interval() * 10))

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup, then the URL a client connects to: uvicorn names only the root."""
        await super().startup(sockets=sockets)
        if self.should_exit or not self.servers or self.config.uds or self.config.fd is not None:
            return
        bound = [sock.getsockname() for server in self.servers for sock in server.sockets]
        if not bound:
            return
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if self.config.is_ssl else "http"
        log.info("serving MCP on %s://%s:%d%s", scheme, shown, bound[0][1], self.app.endpoint.path)

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's tick (every 0.1 s), which also closes the connections past a deadline."""
        if self.guard is not None and counter % self._sweep_every == 0:
            self.guard.sweep(asyncio.get_running_loop().time())
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        log.info("Draining: no new connections; open ones end after their current response")
        self.app.draining = True  # every response started from now on closes its connection
        connections = self.server_state.connections
        for connection in list(connections):
            if not _idle(connection):
                connection.shutdown()  # busy: it closes once its response is sent
        loop = asyncio.get_running_loop()
        started = loop.time()
        budget = self.config.timeout_graceful_shutdown
        limit = math.inf if budget is None else budget
        deadline = started + min(self.config.timeout_keep_alive + 0.5, limit)
        # uvicorn's set of connections has no event to wait on; it polls it too
        while (  # noqa: ASYNC110
            not self.force_exit
            and loop.time() < deadline
            and any(_idle(connection) for connection in connections)
        ):
            await asyncio.sleep(0.05)
        ending = None
        if budget is not None:  # the whole drain keeps to the deadline it was given
            left = self.config.timeout_graceful_shutdown = max(
                0, math.floor(budget - (loop.time() - started))
            )
            # Calls waiting for answers end a second before uvicorn would cancel them.
            ending = loop.call_later(max(0.0, left - 1.0), self._end_waiting_calls)
        try:
            await super().shutdown(sockets=None)
        finally:
            if ending is not None:
                ending.cancel()

    def _end_waiting_calls(self) -> None:
        ended = self.app.end_waiting_calls()
        if ended:
            log.warning(
                "Drain time (ENGINE_DRAIN_TIMEOUT) running out: ended %d calls waiting for "
                "their clients' answers; each was told to call again",
                ended,
            )


_PROTOCOL_NAMES = {"H11Protocol": "h11", "HttpToolsProtocol": "httptools"}


def _fast_loop_expected() -> bool:
    """Whether this platform installs uvloop with the package (see pyproject.toml)."""
    return sys.implementation.name == "cpython" and sys.platform not in ("win32", "cygwin")


def stack(config: uvicorn.Config) -> tuple[str, str]:
    """The HTTP implementation and the event loop ``config`` serves with: ``auto`` resolved
    as uvicorn resolves it, by importing the fast one and falling back when that fails."""
    if getattr(config, "http2", False):  # uvicorn then serves zttp, whatever ``http`` says
        http = "zttp"
    elif config.http == "auto":
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        http = _PROTOCOL_NAMES.get(AutoHTTPProtocol.__name__, AutoHTTPProtocol.__name__)
    elif isinstance(config.http, str):
        http = config.http
    else:
        http = _PROTOCOL_NAMES.get(config.http.__name__, config.http.__qualname__)
    loop = config.loop
    if loop == "auto":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            loop = "asyncio"
        else:
            loop = "uvloop"
    elif loop == "none":
        loop = "the event loop policy's"
    return http, loop


def checked_uvicorn_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``uvicorn_options`` of ``mcp.run()``, refused when they would change what it serves."""
    given = dict(options or {})
    clashing = sorted({"app", "app_dir", "host", "port", "uds", "fd", "lifespan"} & set(given))
    if clashing:
        raise ValueError(
            f"uvicorn_options cannot set {', '.join(clashing)}: run() serves this server's "
            "app on the host and port passed to it, and always runs its lifespan, since it "
            "starts the server's store"
        )
    if given.get("reload") or (given.get("workers") or 1) > 1:
        raise ValueError(
            "uvicorn_options cannot ask for reload or several workers: run() serves in this "
            "process. Run `python -m engine serve FILE.py[:ATTR] --workers N` (N processes on "
            "one port, sharing the store) or `--reload`, which import the file in processes of "
            "their own"
        )
    return given


def uvicorn_settings(
    drain_timeout: float, access_log: bool, uvicorn_options: dict[str, Any]
) -> dict[str, Any]:
    """uvicorn's ``Config`` keywords for ``mcp.run``: ``uvicorn_options`` over the defaults."""
    settings: dict[str, Any] = {
        "log_level": "info",
        # A line per request through logging is a large share of a replica's work; the proxy
        # in front logs each request already.
        "access_log": access_log,
        "timeout_graceful_shutdown": max(1, round(drain_timeout)),
        **uvicorn_options,
    }
    if "log_config" not in uvicorn_options and logs.log_format() == "json":
        # uvicorn would give its own loggers text handlers: route them through the JSON lines.
        settings["log_config"] = logs.logging_config("json")
    return settings


def serve_app(
    app: MCPStarlette,
    *,
    host: str,
    port: int,
    drain_timeout: float,
    access_log: bool,
    limits: ConnectionLimits,
    uvicorn_options: dict[str, Any],
    sockets: Sequence[socket.socket] | None = None,
) -> None:
    """``mcp.run("streamable-http")``: serve until SIGTERM (drained) or Ctrl-C."""
    # uvicorn drains on SIGTERM, then re-raises it with the handler it found: make that one
    # a clean exit, so a drained replica ends with status 0 rather than 143.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    settings = uvicorn_settings(drain_timeout, access_log, uvicorn_options)
    serve(app, host=host, port=port, settings=settings, limits=limits, sockets=sockets)


async def serve_app_async(
    app: MCPStarlette,
    *,
    host: str,
    port: int,
    drain_timeout: float,
    access_log: bool,
    limits: ConnectionLimits,
    uvicorn_options: dict[str, Any],
) -> None:
    """``await mcp.run_streamable_http_async()``: serve on the caller's event loop until
    SIGTERM (drained), Ctrl-C or cancellation. The process's signal handlers are the caller's
    again once it returns."""
    settings = uvicorn_settings(drain_timeout, access_log, uvicorn_options)
    server = draining_server(app, host=host, port=port, settings=settings, limits=limits)
    ended = anyio.Event()

    async def run() -> None:
        try:
            with anyio.CancelScope(shield=True):  # a cancel drains it instead: see below
                await server.serve()
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await ended.wait()
        finally:
            if not ended.is_set():  # cancelled: drain as on SIGTERM, and stop listening
                server.should_exit = True
    if not server.started:
        raise RuntimeError(f"the server did not start on {host}:{port}: see the log above")


class CannotListen(OSError):
    """``host:port`` cannot be listened on (in use, not this machine's address, a privileged
    port): found before uvicorn starts, so it is one line rather than a log after startup."""

    def __init__(self, host: str, port: int, reason: str, *, in_use: bool) -> None:
        self.host, self.port, self.reason, self.in_use = host, port, reason, in_use
        what = "is in use" if in_use else f"cannot be listened on ({reason})"
        super().__init__(f"port {port} on {host} {what}")


def check_listenable(host: str, port: int) -> None:
    """Bind each address uvicorn would bind for ``host:port``, as it does (``SO_REUSEADDR``),
    and let go; `CannotListen` when one fails. A process that takes the port between this and
    uvicorn's own bind still gets uvicorn's error."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotListen(host, port, str(exc.strerror or exc), in_use=False) from None
    for family, kind, proto, _, address in dict.fromkeys(found):
        with socket.socket(family, kind, proto) as sock:
            if os.name != "nt":  # on Windows it would let two servers share the port
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                in_use = exc.errno == errno.EADDRINUSE
                raise CannotListen(host, port, exc.strerror or str(exc), in_use=in_use) from None


def raise_descriptor_limit() -> int | None:
    """Raise this process's soft limit of open files to its hard limit; the limit now in force
    (``None`` where there is none to read, as on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return None if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (OSError, ValueError):  # above what the kernel allows (nr_open): keep the soft one
        return soft
    return wanted


def connection_cap(given: int | None, descriptors: int | None) -> int:
    """The cap on open connections: ``given``, else what the descriptor limit leaves room for
    (the cap, the refusals lingering beside it, and `DESCRIPTORS_KEPT`)."""
    if descriptors is None:
        room = MAX_DEFAULT_CONNECTIONS
    else:
        room = max(16, (descriptors - DESCRIPTORS_KEPT) * 8 // 9)
    if given is None:
        return min(room, MAX_DEFAULT_CONNECTIONS)
    if descriptors is not None and given > room:
        log.warning(
            "max_connections=%d leaves too few of the %d file descriptors this process may "
            "open (with refusals lingering and %d kept for the store and files); serving at "
            "most %d. Raise the limit (ulimit -n) to serve more",
            given,
            descriptors,
            DESCRIPTORS_KEPT,
            room,
        )
        return room
    return given


def draining_server(
    app: MCPStarlette,
    *,
    host: str,
    port: int,
    settings: dict[str, Any],
    limits: ConnectionLimits | None = None,
    sockets: Sequence[socket.socket] | None = None,
) -> DrainingServer:
    """The uvicorn server of ``app``: the drain above and, given ``limits``, the connection
    limits. `CannotListen` before anything starts when ``host:port`` cannot be bound; given
    ``sockets`` already listening, it binds nothing."""
    if sockets is None:
        check_listenable(host, port)
    if limits is not None:
        settings = {"h11_max_incomplete_event_size": limits.max_head_bytes, **settings}
    config = uvicorn.Config(app, host=host, port=port, lifespan="on", **settings)
    http, loop = stack(config)
    log.info("HTTP parsed by %s, on the %s event loop", http, loop)
    if config.http == "auto" and http == "h11":
        log.warning(
            "httptools does not import, so uvicorn parses HTTP in pure Python (h11): about "
            "half the calls per core. Install it (pip install httptools, a dependency of "
            "mcp-engine), or pass uvicorn_options={'http': 'h11'} to choose h11 knowingly"
        )
    if config.loop == "auto" and loop == "asyncio" and _fast_loop_expected():
        log.warning(
            "uvloop does not import, so uvicorn runs on the standard asyncio loop: fewer calls "
            "per core. Install it (pip install uvloop, a dependency of mcp-engine), or pass "
            "uvicorn_options={'loop': 'asyncio'} to choose asyncio knowingly"
        )
    guard = None
    if isinstance(config.http, str) and http in ("httptools", "h11"):
        protocol = coalescing(import_from_string(HTTP_PROTOCOLS[http]))
        if limits is not None:
            cap = connection_cap(limits.max_connections, raise_descriptor_limit())
            guard = ConnectionGuard(limits, cap)
            protocol = guarded(protocol, guard)
            log.info(
                "Connections: at most %d open; heads of %d bytes within %gs; bodies stalling "
                "%gs at most",
                cap,
                limits.max_head_bytes,
                limits.head_timeout,
                limits.body_timeout,
            )
        config.http = protocol
    return DrainingServer(config, app, guard)


def serve(
    app: MCPStarlette,
    *,
    host: str,
    port: int,
    settings: dict[str, Any],
    limits: ConnectionLimits | None = None,
    sockets: Sequence[socket.socket] | None = None,
) -> None:
    """Run ``app`` until SIGTERM or Ctrl-C (what ``uvicorn.run`` does for one process); given
    ``sockets`` already listening, it serves on those."""
    server = draining_server(
        app, host=host, port=port, settings=settings, limits=limits, sockets=sockets
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=None if sockets is None else list(sockets))
    finally:
        if server.config.uds and os.path.exists(server.config.uds):
            os.remove(server.config.uds)
    if not server.started:
        sys.exit(STARTUP_FAILURE)
