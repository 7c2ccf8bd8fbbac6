"""The three servers ``list`` and ``call`` can talk to: a URL, a server file, a ``--stdio`` command.

Each is a connection with the same ``request(method, params, headers, meta)`` as
:class:`~engine.cli.http_session.Session`, speaking 2026-07-28: over Streamable HTTP to a URL; in
process to ``FILE.py[:ATTR]`` (loaded as ``serve`` loads it, driven by
:class:`engine.testing.Client`, so every message is real JSON-RPC); newline-delimited JSON-RPC on
the stdin/stdout of a spawned command. Notifications that arrive before a response (progress,
log messages) go to the connection's ``notify``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shlex
import subprocess
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from engine.cli.http_session import Notify, ProtocolFailure, Session, request_meta, result_of
from engine.cli.shared import CLIError


class Connection(Protocol):
    where: str
    replica: str
    notify: Notify | None

    def request(
        self,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    def close(self) -> None: ...


def is_url(target: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(target)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def check_target(target: str | None, stdio: str | None) -> None:
    """A URL, an existing ``FILE.py[:ATTR]``, or ``--stdio CMD`` (alone); CLIError otherwise."""
    if stdio is not None:
        if target is not None:
            raise CLIError(f"give either TARGET ({target}) or --stdio CMD, not both")
        if not shlex.split(stdio):
            raise CLIError("--stdio: give the command that runs the server")
        return
    if target is None:
        raise CLIError("give a TARGET: a URL, a server file FILE.py[:ATTR], or --stdio 'CMD'")
    if is_url(target):
        return
    path = target.partition(":")[0] if not os.path.exists(target) else target
    if path.endswith(".py") or os.path.exists(path):
        return
    if "://" not in target:
        raise CLIError(f"{target!r} is not a URL; give the MCP endpoint, like http://{target}")
    raise CLIError(
        f"{target!r} is not an http(s) URL; give the server's MCP endpoint, like "
        "http://127.0.0.1:8000/mcp"
    )


def open_connection(
    target: str | None,
    stdio: str | None,
    timeout: float,
    *,
    traceback: bool = False,
    token: str | None = None,
) -> Connection:
    """A connection to the server ``target`` names; ``token``: the bearer token of an HTTP
    server (stdio and a server file in this process take none)."""
    check_target(target, stdio)
    if stdio is not None:
        return StdioConnection(stdio, timeout)
    assert target is not None
    if is_url(target):
        return Session(target, timeout, token)
    return InProcessConnection(target, traceback)


class InProcessConnection:
    """A server file run in this process, through :class:`engine.testing.Client`."""

    def __init__(self, target: str, traceback: bool) -> None:
        import anyio
        import anyio.from_thread

        from engine.cli.shared import load_server
        from engine.testing import Client, ProtocolError

        self.where = target
        self.replica = "in process"
        self.notify: Notify | None = None
        self._error = ProtocolError
        # One process makes and resumes every round, for one user at a terminal: an ephemeral
        # key is all it needs, and a store (single-use rounds, a journal) is what serve adds.
        if not os.environ.get("ENGINE_KEYS"):
            logging.getLogger("engine.seal").addFilter(_no_ephemeral_key_warning)
        logging.getLogger("engine.app").addFilter(_no_store_warning)
        server = load_server(target, traceback=traceback)
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._client = Client(server)
        self._client.notifications = _Relay(self)
        self._closing = anyio.Event()
        try:
            self._held, _ = self._portal.start_task(self._hold)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    async def _hold(self, *, task_status: Any) -> None:
        """The client, entered and left in one task: the server's task groups (its store's,
        say) must be exited by the task that entered them."""
        async with self._client:
            task_status.started()
            await self._closing.wait()

    def request(
        self,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        sent = {**params, "_meta": request_meta(meta)}
        try:
            return self._portal.call(self._client.send, method, sent)
        except self._error as exc:
            data = f" {json.dumps(exc.data)}" if exc.data is not None else ""
            raise ProtocolFailure(f"{method} failed: {exc.code} {exc.message}{data}") from None

    def close(self) -> None:
        try:
            self._portal.call(self._closing.set)
            self._held.result()
        finally:
            self._portal_cm.__exit__(None, None, None)


def _no_ephemeral_key_warning(record: logging.LogRecord) -> bool:
    return "ephemeral key" not in record.getMessage()


def _no_store_warning(record: logging.LogRecord) -> bool:
    from engine.server_core import REPLAY_WARNING

    return record.getMessage() != REPLAY_WARNING


class _Relay(list[dict[str, Any]]):
    """``Client.notifications``, passing each notification on as it arrives."""

    def __init__(self, connection: InProcessConnection) -> None:
        super().__init__()
        self.connection = connection

    def append(self, item: dict[str, Any]) -> None:
        super().append(item)
        if self.connection.notify is not None:
            self.connection.notify(item["method"], item.get("params") or {})


class StdioConnection:
    """A spawned server: newline-delimited JSON-RPC on its stdin/stdout; its stderr is shown."""

    def __init__(self, command: str, timeout: float) -> None:
        self.where = command
        self.replica = "stdio"
        self.notify: Notify | None = None
        self.timeout = timeout
        self.ids = itertools.count(1)
        try:
            self.process = subprocess.Popen(
                shlex.split(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        except OSError as exc:
            raise CLIError(f"--stdio: cannot run {command!r}: {exc.strerror or exc}") from None

    def request(
        self,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        request_id = next(self.ids)
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": request_meta(meta)},
        }
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise self._gone() from None
        timer = threading.Timer(self.timeout, self.process.kill)
        timer.start()
        try:
            for line in self.process.stdout:
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(reply, dict):
                    continue
                if reply.get("id") == request_id and ("result" in reply or "error" in reply):
                    return result_of(method, reply, self)
                if "id" not in reply and isinstance(reply.get("method"), str) and self.notify:
                    got = reply.get("params")
                    self.notify(reply["method"], got if isinstance(got, dict) else {})
        finally:
            timer.cancel()
        raise self._gone()

    def _gone(self) -> ProtocolFailure:
        code = self.process.poll()
        how = f"exited with status {code}" if code is not None else "closed its output"
        return ProtocolFailure(
            f"the server {self.where!r} {how} before answering; is it an MCP server on stdio "
            "(like `python -m engine serve FILE.py --stdio`)?"
        )

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
