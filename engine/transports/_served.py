"""What the transports reach of a server beyond the protocol layer's :class:`Served`: its
lifecycle, health, store, fleet messaging and authorization (a server's
:class:`~engine.server_core.ServerCore` provides it)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Protocol

from engine.auth.provider import AccessToken, TokenVerifier
from engine.auth.settings import AuthSettings
from engine.fleet.bus import Bus
from engine.fleet.notifications import Listener
from engine.handlers.tool import Tool
from engine.protocol.served import Served
from engine.state.seal import KeyRing
from stores.base import Store


class Hosted(Served, Protocol):
    @property
    def keys(self) -> KeyRing: ...

    @property
    def store(self) -> Store | None: ...

    @property
    def bus(self) -> Bus: ...

    @property
    def tools(self) -> dict[str, Tool]: ...

    def running(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

    async def health(self) -> tuple[bool, dict[str, Any]]: ...

    def add_session_stream(self, session_id: str, listener: Listener) -> None: ...

    def remove_session_stream(self, session_id: str, listener: Listener) -> None: ...

    @property
    def auth(self) -> AuthSettings | None:
        """How bearer tokens are checked; ``None``: the endpoint is open."""
        ...

    @property
    def token_verifier(self) -> TokenVerifier | None: ...

    def declared_scopes(self) -> set[str]:
        """Every scope a handler requires (listed in the protected resource metadata)."""
        ...

    def target_scopes(self, method: Any, params: Any) -> tuple[str, ...]:
        """The scopes the handler a request names requires (none for other requests)."""
        ...

    def request_principal(
        self, headers: Mapping[str, str], access_token: AccessToken | None
    ) -> str | None:
        """Who makes a request: what the ``principal`` callback says, or the token's issuer and
        subject; ``None``: nobody in particular."""
        ...


__all__ = ["Hosted"]
