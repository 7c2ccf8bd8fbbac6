"""``IntrospectionVerifier``: opaque access tokens, asked about at the authorization server.

A token that is no JWT (or one the server should be able to revoke at once) is checked by
POSTing it to the authorization server's introspection endpoint (RFC 7662), authenticated as
this resource server's own client. The answer is kept for a short while, so a client's rounds do
not each cost a round trip: an active token for ``cache_seconds`` (never past its ``exp``), an
inactive one for ``negative_cache_seconds`` (so a flood of bad tokens is not forwarded one by one
either). Both caches are keyed by the token's SHA-256, and kept apart: inactive answers fill a
table bounded by ``negative_cache_bytes`` of their own, so no number of bad tokens pushes a good
one out. A revoked token stays accepted for at most ``cache_seconds`` on each replica.

What reaches the endpoint is bounded (:mod:`engine.auth.single_flight`):

- concurrent requests with one token share one introspection, and its failure: all of them are
  answered together, at most ``timeout`` seconds after it started;
- after a failure the endpoint is not asked for a while (1 s, doubling to 30 s): a token not in
  the caches meanwhile gets 503 with ``Retry-After`` at once, while cached answers are served;
- tokens this verifier has not seen active are introspected at most
  ``unknown_tokens_per_second`` a second (a burst of five seconds' worth): past that rate a new
  token gets 503 with ``Retry-After``. A token seen active (until its ``exp``) is asked about
  again when its answer is stale whatever the rate, so the users already served stay served.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import httpx

from engine.auth.provider import AccessToken, time_claim_refused, token_from_claims
from engine.auth.provider_client import ProviderClient
from engine.auth.single_flight import Backoff, Flight, VerifierUnavailable

log = logging.getLogger("engine.auth")

MAX_CACHED = 10_000
"""Active tokens remembered at most (each with its claims: a few kilobytes); the one answered
longest ago goes first."""
INACTIVE_ENTRY_BYTES = 128
"""What one remembered inactive answer costs: the token's digest, its expiry and its share of
the table."""
KNOWN_WITHOUT_EXPIRY = 3600.0
"""How long a token seen active without an ``exp`` counts as known (exempt from the rate)."""
BURST_SECONDS = 5.0
"""The rate's burst: this many seconds' worth of new tokens at once."""


class IntrospectionUnavailable(VerifierUnavailable):
    """The introspection endpoint did not answer usefully: the token could not be checked."""


class IntrospectionVerifier:
    """Checks tokens at ``introspection_endpoint`` (see the module).

    - ``client_id``, ``client_secret``: this resource server's credentials at the
      authorization server (sent as HTTP Basic, ``client_secret_basic``).
    - ``audience``: when given, an active token must name one of these in ``aud`` (RFC 8707).
    - ``issuer``: when given, an active token's ``iss`` must be this.
    - ``cache_seconds`` (30), ``negative_cache_seconds`` (10): how long an answer is kept.
    - ``negative_cache_bytes`` (1 MiB): the memory inactive answers may take (128 bytes each).
    - ``unknown_tokens_per_second`` (50): how many tokens not seen active may be introspected
      a second.
    - ``timeout`` (5): seconds one introspection may take in all.
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
        negative_cache_bytes: int = 1024 * 1024,
        unknown_tokens_per_second: float = 50.0,
        timeout: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if unknown_tokens_per_second <= 0:
            raise ValueError("unknown_tokens_per_second must be positive, e.g. 50")
        self.endpoint = introspection_endpoint
        self.credentials = (client_id, client_secret)
        if isinstance(audience, str):
            audience = [audience]
        self.audiences = list(audience) if audience is not None else None
        self.issuer = issuer
        self.cache_seconds = cache_seconds
        self.negative_cache_seconds = negative_cache_seconds
        self.max_inactive = max(1, negative_cache_bytes // INACTIVE_ENTRY_BYTES)
        self.rate = unknown_tokens_per_second
        self.burst = max(1.0, unknown_tokens_per_second * BURST_SECONDS)
        self.timeout = timeout
        self.client = ProviderClient(http_client, timeout)
        self._active: dict[bytes, tuple[float, float, AccessToken]] = {}
        """Active tokens by digest: until when the answer is fresh, until when the token is
        known (its ``exp``), and the token."""
        self._inactive: dict[bytes, float] = {}
        """Inactive tokens by digest, until when: in the order they were answered, which is
        the order they expire in."""
        self._pending: dict[bytes, Flight[AccessToken | None]] = {}
        self.backoff = Backoff()
        self._allowance = self.burst
        self._allowance_at = time.monotonic()
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
        now = time.monotonic()
        active = self._active.get(key)
        if active is not None and active[0] > now:
            return active[2]
        inactive = self._inactive.get(key)
        if inactive is not None:
            if inactive > now:
                return None
            del self._inactive[key]
        flight = self._pending.get(key)
        if flight is None:
            self._may_ask(known=active is not None and active[1] > now)
            flight = self._pending[key] = Flight()
            try:
                ask = functools.partial(self._introspect, token)
                await flight.fly(ask, self.timeout, (IntrospectionUnavailable,))
            finally:
                del self._pending[key]
                self._settle(key, flight)
        verified, failure = await flight.outcome()
        if failure is not None:
            raise IntrospectionUnavailable(
                f"{self.endpoint}: {failure}", retry_after=self.backoff.remaining()
            )
        return verified

    def _may_ask(self, *, known: bool) -> None:
        """Raise when the endpoint may not be asked about a token now: it failed a moment ago,
        or (for a token not known to be active) too many new tokens came this second."""
        paused = self.backoff.remaining()
        if paused:
            raise IntrospectionUnavailable(
                f"{self.endpoint} failed a moment ago; asking it again in {paused:.1f} s",
                retry_after=paused,
                limit="introspection_backoff",
            )
        if known:
            return
        now = time.monotonic()
        allowance = min(self.burst, self._allowance + (now - self._allowance_at) * self.rate)
        self._allowance_at = now
        if allowance < 1:
            self._allowance = allowance
            raise IntrospectionUnavailable(
                f"more than {self.rate:g} unknown tokens a second to introspect "
                "(unknown_tokens_per_second)",
                retry_after=(1 - allowance) / self.rate,
                limit="introspection_rate",
            )
        self._allowance = allowance - 1

    def _settle(self, key: bytes, flight: Flight[AccessToken | None]) -> None:
        """Remember the answer, or pause asking after a failure."""
        if flight.failure is not None:
            self.backoff.failed()
            log.error(
                "cannot introspect a token at %s (%s); asking again in %.0f s at the earliest",
                self.endpoint,
                flight.failure,
                self.backoff.pause,
            )
            return
        self.backoff.succeeded()
        now = time.monotonic()
        verified = flight.value
        if verified is None:
            inactive = self._inactive
            while len(inactive) >= self.max_inactive:
                del inactive[next(iter(inactive))]  # the oldest answer, the first to expire
            inactive[key] = now + self.negative_cache_seconds
            return
        self._inactive.pop(key, None)
        known = now + KNOWN_WITHOUT_EXPIRY
        if verified.expires_at is not None:
            known = now + verified.expires_at - time.time()
        active = self._active
        active.pop(key, None)  # answered again: now the newest
        while len(active) >= MAX_CACHED:
            del active[next(iter(active))]
        active[key] = (min(now + self.cache_seconds, known), known, verified)

    async def _introspect(self, token: str) -> AccessToken | None:
        self.introspections += 1
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            async with self.client.session() as client:
                response = await client.post(self.endpoint, data=form, auth=self.credentials)
        except httpx.HTTPError as exc:
            raise IntrospectionUnavailable(type(exc).__name__) from None
        if response.status_code != 200:
            raise IntrospectionUnavailable(f"answered {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise IntrospectionUnavailable("answered no JSON") from None
        if not isinstance(answer, dict):
            raise IntrospectionUnavailable("answered no JSON object")
        return self._accepted(token, answer)

    def _accepted(self, token: str, answer: dict[str, Any]) -> AccessToken | None:
        if answer.get("active") is not True:
            return _refused("inactive")
        malformed = time_claim_refused(answer)
        if malformed is not None:
            return _refused(malformed)
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
