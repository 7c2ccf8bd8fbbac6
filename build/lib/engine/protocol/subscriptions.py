"""``subscriptions/listen``: the only place a 2026-07-28 client hears about list changes.

A subscription acknowledges what it will deliver, then forwards each matching notification,
tagged with its ``subscriptionId`` (the JSON-RPC id of the listen request), until the client
goes away. Notifications reach the server from any replica through its bus.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from engine.errors import INVALID_PARAMS, MCPError
from engine.protocol.jsonrpc import notification_bytes, parse
from engine.protocol.modern import Exchange, check_version, read_meta
from engine.protocol.served import Served

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_LIST_FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


class Subscription:
    def __init__(self, server: Served, subscription_id: Any, honoured: dict[str, Any]) -> None:
        self.server = server
        self.subscription_id = subscription_id
        self.honoured = honoured
        self.methods = {method for flag, method in _LIST_FLAGS.items() if honoured.get(flag)}
        self.uris = set(honoured.get("resourceSubscriptions", []))

    def wants(self, method: str, params: dict[str, Any]) -> bool:
        if method == "notifications/resources/updated":
            return params.get("uri") in self.uris
        return method in self.methods

    def frame(self, method: str, params: dict[str, Any]) -> bytes:
        tagged = dict(params)
        tagged["_meta"] = {**params.get("_meta", {}), SUBSCRIPTION_ID: self.subscription_id}
        return notification_bytes(method, tagged)

    async def run(self, sender: MemoryObjectSendStream[bytes]) -> None:
        """Send the acknowledgement, then every wanted notification, until cancelled."""

        async def listener(method: str, params: dict[str, Any]) -> None:
            if self.wants(method, params):
                # A stream that cannot keep up loses notifications; the server never blocks.
                with contextlib.suppress(anyio.WouldBlock):
                    sender.send_nowait(self.frame(method, params))

        async with sender:
            await sender.send(
                self.frame(
                    "notifications/subscriptions/acknowledged", {"notifications": self.honoured}
                )
            )
            self.server.add_listener(listener)
            try:
                await anyio.sleep_forever()
            finally:
                self.server.remove_listener(listener)


def open_subscription(server: Served, raw: Any, exchange: Exchange) -> Subscription:
    """Validate a listen request; the subscription to run, or :class:`MCPError`."""
    message = parse(raw)
    params = message.params
    version, _, _ = read_meta(params)
    if exchange.validate is not None and exchange.headers is not None:
        exchange.validate(exchange.headers, message.method, params, version)
    check_version(version)
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise MCPError(
            INVALID_PARAMS,
            "Invalid params: 'notifications' (a filter object) is "
            'required, e.g. {"toolsListChanged": true}',
        )
    honoured: dict[str, Any] = {flag: True for flag in _LIST_FLAGS if wanted.get(flag) is True}
    uris = wanted.get("resourceSubscriptions")
    if isinstance(uris, list) and all(isinstance(u, str) for u in uris) and uris:
        honoured["resourceSubscriptions"] = list(uris)
    return Subscription(server, message.id, honoured)
