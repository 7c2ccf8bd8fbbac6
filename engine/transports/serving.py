"""Serving the HTTP app under uvicorn, with a drain that never drops a request a proxy sent.

On SIGTERM uvicorn closes its listener, then closes every idle keep-alive connection at once. A
proxy in front (nginx) may be sending a request on one of those connections at that very
moment; the request is lost, and since a proxy does not resend a POST that may have reached
the server, its client gets a 502. Here the idle connections are left to end on their own: a
request still arriving on one is served, and its response closes the connection; one that
stays idle ends by its keep-alive timeout, which a proxy outlasts only if misconfigured (it
must give idle connections up first, as it must in steady state anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import sys
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from engine.transports.http import StreamableHTTPApp

STARTUP_FAILURE = 3
"""uvicorn's exit status when the server never started (its lifespan failed, say)."""


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown first lets keep-alive connections end on their own."""

    def __init__(self, config: uvicorn.Config, app: StreamableHTTPApp) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        self.app.draining = True  # every response from now on closes its connection
        loop = asyncio.get_running_loop()
        started = loop.time()
        budget = self.config.timeout_graceful_shutdown
        deadline = started + min(self.config.timeout_keep_alive + 0.5, budget or float("inf"))
        # uvicorn's set of connections has no event to wait on; it polls it too
        while self.server_state.connections and not self.force_exit and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if budget is not None:  # the whole drain keeps to the deadline it was given
            self.config.timeout_graceful_shutdown = max(
                1, math.ceil(budget - (loop.time() - started))
            )
        await super().shutdown(sockets=None)


def serve(app: StreamableHTTPApp, *, host: str, port: int, settings: dict[str, Any]) -> None:
    """Run ``app`` until SIGTERM or Ctrl-C (what ``uvicorn.run`` does, with the drain above)."""
    config = uvicorn.Config(app, host=host, port=port, lifespan="on", **settings)
    server = DrainingServer(config, app)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
