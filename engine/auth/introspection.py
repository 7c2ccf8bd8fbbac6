"""``IntrospectionVerifier``: opaque access tokens, asked about at the authorization server.

A token that is no JWT (or one the server should be able to revoke at once) is checked by
POSTing it to the authorization server's introspection endpoint (RFC 7662), authenticated as
this resource server's own client. The answer is kept for a short while, so a client's rounds do
not each cost a round trip: an active token for ``cache_seconds`` (never past its ``exp``), an
inactive one for ``negative_cache_seconds`` (so a flood of bad tokens is not forwarded one by one
either). Concurrent requests with one token share one introspection.

The cache is keyed by the token's SHA-256 and bounded; a revoked token stays accepted for at
most ``cache_seconds`` on each replica.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import anyio
import httpx

from engine.auth.provider import AccessToken, token_from_claims
from engine.auth.provider_client import ProviderClient

log = logging.getLogger("engine.auth")

MAX_CACHED = 10_000


class IntrospectionUnavailable(Exception):
    """The introspection endpoint did not answer usefully: the token could not be checked."""


class IntrospectionVerifier:
    """Checks tokens at ``introspection_endpoint`` (see the module).

    - ``client_id``, ``client_secret``: this resource server's credentials at the
      authorization server (sent as HTTP Basic, ``client_secret_basic``).
    - ``audience``: when given, an active token must name one of these in ``aud`` (RFC 8707).
    - ``issuer``: when given, an active token's ``iss`` must be this.
    - ``cache_seconds`` (30), ``negative_cache_seconds`` (10): how long an answer is kept.
    - ``http_client``: an ``httpx.AsyncClient`` of your own (a proxy, a private CA); otherwise
      the verifier opens one while its server runs.
    """

    def __init__(
        self,
        introspection_endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str | Iterable[str] | None = None,
        issuer: str | None = None,
        cache_seconds: float = 30.0,
        negative_cache_seconds: float = 10.0,
        timeout: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.endpoint = introspection_endpoint
        self.credentials = (client_id, client_secret)
        if isinstance(audience, str):
            audience = [audience]
        self.audiences = list(audience) if audience is not None else None
        self.issuer = issuer
        self.cache_seconds = cache_seconds
        self.negative_cache_seconds = negative_cache_seconds
        self.timeout = timeout
        self.client = ProviderClient(http_client, timeout)
        self._cache: dict[bytes, tuple[float, AccessToken | None]] = {}
        self._pending: dict[bytes, anyio.Event] = {}
        self.introspections = 0
        """How many tokens were sent to the endpoint (for the log and the tests)."""

    async def __aenter__(self) -> IntrospectionVerifier:
        self.client.open()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.client.close()

    async def verify_token(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).digest()
        while True:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
            pending = self._pending.get(key)
            if pending is None:
                break
            await pending.wait()  # another request asks about this token: take its answer
        done = self._pending[key] = anyio.Event()
        try:
            verified = await self._introspect(token)
            now = time.monotonic()
            if verified is None:
                until = now + self.negative_cache_seconds
            else:
                until = now + self.cache_seconds
                if verified.expires_at is not None:
                    until = min(until, now + verified.expires_at - time.time())
            self._remember(key, until, verified)
            return verified
        finally:
            del self._pending[key]
            done.set()

    def _remember(self, key: bytes, until: float, verified: AccessToken | None) -> None:
        cache = self._cache
        if len(cache) >= MAX_CACHED:
            now = time.monotonic()
            for stale in [k for k, (at, _) in cache.items() if at <= now]:
                del cache[stale]
            while len(cache) >= MAX_CACHED:
                del cache[next(iter(cache))]  # the oldest entry
        cache[key] = (until, verified)

    async def _introspect(self, token: str) -> AccessToken | None:
        self.introspections += 1
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            async with self.client.session() as client:
                response = await client.post(self.endpoint, data=form, auth=self.credentials)
        except httpx.HTTPError as exc:
            raise IntrospectionUnavailable(f"{self.endpoint}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise IntrospectionUnavailable(f"{self.endpoint} answered {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise IntrospectionUnavailable(f"{self.endpoint} answered no JSON") from None
        if not isinstance(answer, dict):
            raise IntrospectionUnavailable(f"{self.endpoint} answered no JSON object")
        return self._accepted(token, answer)

    def _accepted(self, token: str, answer: dict[str, Any]) -> AccessToken | None:
        if answer.get("active") is not True:
            return _refused("inactive")
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires < time.time():
            return _refused("expired")
        if self.issuer is not None and answer.get("iss") != self.issuer:
            return _refused("another issuer")
        if self.audiences is not None:
            audience = answer.get("aud")
            named = audience if isinstance(audience, list) else [audience]
            if not any(a in named for a in self.audiences):
                return _refused("another audience")
        return token_from_claims(token, answer, self.audiences)


def _refused(reason: str) -> AccessToken | None:
    log.info("bearer token refused by introspection: %s", reason)
    return None


__all__ = ["IntrospectionUnavailable", "IntrospectionVerifier"]
