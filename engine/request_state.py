"""``RequestStateSecurity``: the official SDK's one object for how requestStates are protected,
mapped onto this server's own options.

Code written for the official ``MCPServer(request_state_security=...)`` runs unchanged: its
keys become this server's key ring (``keys=``), its codec a :class:`~engine.state.codec.CodecRing`,
``ttl`` the ``state_ttl``, ``audience`` the ``audience``, and ``bind_principal`` the
``principal=`` callback. Giving both it and those options is refused: one server, one policy.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Final

from engine.calls.runner import Principal, token_principal
from engine.scope import RequestScope
from engine.settings import ServerOptions
from engine.state.codec import CodecRing, RequestStateCodec
from engine.state.seal import KeyRing, KeySpec

log = logging.getLogger("engine.seal")

SECURITY_OPTIONS: Final = ("keys", "state_ttl", "audience")
"""The ``MCPServer`` options ``request_state_security`` stands for."""


def authenticated_principal(scope: RequestScope) -> str | None:
    """The default principal binding: the issuer and subject of the request's verified access
    token (``None`` on a request without one, stdio among them)."""
    return token_principal(scope)


class RequestStateSecurity:
    """How this server's requestStates are sealed, how long they live, and whom they belong to.

    Give exactly one of ``keys`` (shared secrets of at least 32 bytes each: the first seals,
    every one opens, so a ring rotates as docs/state.md says) or ``codec`` (an object with
    ``seal(bytes) -> str`` and ``unseal(str) -> bytes`` that raises
    :class:`~engine.errors.InvalidRequestState` for a token it did not mint). ``ttl`` is the
    seconds a token stays valid, re-stamped every round (whole seconds: a fraction counts as
    the next whole second). ``audience`` is what tokens are bound to (the server's name when
    ``None``). ``bind_principal(scope)`` names who makes a request from its
    :class:`~engine.scope.RequestScope`; by default the issuer and subject of its verified
    access token; ``None`` binds tokens to no one.
    """

    keys: KeyRing
    ttl: float
    bind_principal: Principal | None
    audience: str | None

    def __init__(
        self,
        *,
        keys: Sequence[KeySpec | bytearray] | KeyRing | None = None,
        codec: RequestStateCodec | None = None,
        ttl: float = 600.0,
        bind_principal: Principal | None = authenticated_principal,
        audience: str | None = None,
    ) -> None:
        if (keys is None) == (codec is None):
            raise ValueError(
                "RequestStateSecurity needs exactly one of keys=[secret, ...] (this server seals "
                "with them) or codec=your_codec (it seals with that)"
            )
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, int | float)
            or not math.isfinite(ttl)
            or ttl <= 0
        ):
            raise ValueError(
                "RequestStateSecurity ttl must be a positive, finite number of seconds, got "
                f"{ttl!r}"
            )
        if bind_principal is not None and not callable(bind_principal):
            raise TypeError(
                f"bind_principal must be a function of the request, or None; got {bind_principal!r}"
            )
        self.keys = CodecRing(codec) if codec is not None else _ring(keys or ())
        self.ttl = ttl
        self.bind_principal = bind_principal
        self.audience = audience

    @classmethod
    def ephemeral(cls, *, ttl: float = 600.0, audience: str | None = None) -> RequestStateSecurity:
        """A key made now, known to this process only: its calls cannot be resumed by another
        replica, or after a restart (what a server given no keys does, without its warning)."""
        return cls(keys=KeyRing.ephemeral_ring(), ttl=ttl, audience=audience)

    @property
    def state_ttl(self) -> int:
        """``ttl`` in the whole seconds a token counts."""
        return max(1, math.ceil(self.ttl))

    def server_options(
        self, principal: Principal | None, options: ServerOptions, *, authenticated: bool
    ) -> tuple[Principal | None, ServerOptions]:
        """The ``principal`` and options a server given this policy runs with; options that
        would say the same things twice are refused. ``authenticated``: the server verifies
        access tokens."""
        given = [name for name in SECURITY_OPTIONS if options.get(name) is not None]
        if principal is not None:
            given.append("principal")
        if given:
            raise ValueError(
                f"MCPServer got request_state_security and {', '.join(given)}, which it sets: "
                "give one or the other (RequestStateSecurity(keys=..., ttl=..., audience=..., "
                "bind_principal=...) holds them all)"
            )
        merged = options.copy()
        merged["keys"] = self.keys
        merged["state_ttl"] = self.state_ttl
        merged["audience"] = self.audience
        binding = self.bind_principal
        if binding is authenticated_principal:
            return (token_principal if authenticated else None), merged
        if binding is None and authenticated:
            log.warning(
                "request_state_security has bind_principal=None: calls, tasks and 2025-11-25 "
                "sessions of this server belong to no user, so one user's can be resumed by "
                "another"
            )
        return binding, merged


def _ring(keys: Sequence[Any] | KeyRing) -> KeyRing:
    """The ring of ``keys`` (each checked by the ring, which names the one at fault)."""
    if isinstance(keys, KeyRing):
        return keys
    if isinstance(keys, str | bytes | bytearray) or not isinstance(keys, Sequence):
        raise TypeError("keys must be a list of secrets: keys=[secret] (a str or bytes each)")
    if not keys:
        raise ValueError("keys needs at least one secret")
    return KeyRing(list(keys))


__all__ = ["RequestStateCodec", "RequestStateSecurity", "authenticated_principal"]
