"""An authorization server's signing keys (a JWKS), fetched once and kept, refetched with care.

Keys are fetched on first use and kept for ``max_age`` seconds; a token whose ``kid`` the kept
set lacks (the provider rotated its keys) makes the set be fetched again at once, at most
``refetches_per_minute`` times a minute, so tokens with made-up key ids cannot turn a replica into
a load generator against the provider.

One fetch serves every request that needs it (:mod:`engine.auth.single_flight`): requests that
arrive while it runs wait for it, and get its keys, or its failure, together, at most
``timeout`` seconds after it started. A failed fetch pauses fetching (1 s, doubling to 30 s),
whether or not a set is kept. A set that cannot be fetched again is used as it was kept (the
provider's keys outlive a short outage), and while a kept set that is past ``max_age`` is fetched
again, the other requests go on with it rather than wait. With no set at all, or for a token
naming a key the kept set lacks while the set cannot be fetched, verification raises
:class:`KeysUnavailable` and the request is answered 503 with ``Retry-After`` (the token may
be good: the client keeps it), at once while fetching is paused.

Only public signing keys are kept: ``oct`` (shared secret) keys and keys for encryption are
dropped, so no token can be checked against a secret derived from a public key.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from engine.auth.provider_client import ProviderClient
from engine.auth.single_flight import Backoff, Flight, VerifierUnavailable

log = logging.getLogger("engine.auth")

ASYMMETRIC = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
"""The algorithms a public key of each type can verify."""
EC_CURVES = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}


class KeysUnavailable(VerifierUnavailable):
    """The key set could not be fetched and none is kept: tokens cannot be checked now."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One public key of the set, and the algorithms it may verify."""

    kid: str | None
    key: Any
    algorithms: tuple[str, ...]


def signing_keys(document: Any, allowed: Iterable[str]) -> list[SigningKey]:
    """The keys of a JWKS document that can verify a token signed with an ``allowed``
    algorithm; any other key (a secret, an encryption key, one that does not parse) is left
    out."""
    allowed = tuple(allowed)
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError('a JWKS is a JSON object with a "keys" list')
    keys = []
    for jwk in document["keys"]:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        family = ASYMMETRIC.get(jwk.get("kty", ""), ())
        given = jwk.get("alg")
        usable: tuple[str, ...]
        if given is not None:
            usable = (given,) if given in family else ()
        elif jwk.get("kty") == "EC":
            usable = (EC_CURVES.get(jwk.get("crv", ""), ""),)
        else:
            usable = family
        usable = tuple(alg for alg in usable if alg in allowed)
        if not usable:
            continue
        try:
            parsed = PyJWK(jwk, usable[0])
        except PyJWKError as exc:
            log.warning("a key of the JWKS was skipped: %s", exc)
            continue
        kid = jwk.get("kid")
        keys.append(SigningKey(kid if isinstance(kid, str) else None, parsed.key, usable))
    return keys


class JWKSCache:
    """The signing keys at ``url``, kept and refetched as the module says."""

    def __init__(
        self,
        url: str,
        algorithms: Iterable[str],
        *,
        max_age: float = 600.0,
        refetches_per_minute: int = 5,
        timeout: float = 5.0,
        fixed: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.algorithms = tuple(algorithms)
        self.max_age = max_age
        self.refetches_per_minute = refetches_per_minute
        self.timeout = timeout
        self.client = ProviderClient(None, timeout)
        """The verifier's (`JWTVerifier` gives the one it opens and closes)."""
        self._keys: list[SigningKey] | None = None
        self._fetched_at = 0.0
        self._refetches: deque[float] = deque()
        self._flight: Flight[list[SigningKey]] | None = None
        """The fetch under way, if any: every request that needs the set waits for this one."""
        self.backoff = Backoff()
        self.fetches = 0
        """How many times the set was fetched (for the log and the tests)."""
        if fixed is not None:
            self._keys = signing_keys(fixed, self.algorithms)
            self._fetched_at = float("inf")

    async def find(self, kid: str | None) -> SigningKey | None:
        """The key a token names by ``kid`` (without one: the only key of the set). Raises
        ``KeysUnavailable`` when the key cannot be looked for now: no set is kept, or the token
        names a key the kept set lacks and the set cannot be fetched again."""
        if self._keys is None:
            await self._refresh()
        elif (
            time.monotonic() - self._fetched_at > self.max_age
            and self._flight is None
            and not self.backoff.remaining()
        ):
            await self._refresh()  # the others go on with the kept set meanwhile
        found = self._lookup(kid)
        if found is not None or kid is None or self._fetched_at == float("inf"):
            return found
        if self._flight is None:
            paused = self.backoff.remaining()
            if paused:
                raise self._unavailable(kid, f"fetching it again in {paused:.1f} s", "jwks_backoff")
            if not self._may_refetch():
                return None  # made-up key ids: refused without a fetch
            log.info("key id %r is not in the JWKS; fetching it again", kid[:64])
        failure = await self._refresh()
        found = self._lookup(kid)
        if found is None and failure is not None:
            raise self._unavailable(kid, failure, None)
        return found

    def _unavailable(self, kid: str, why: str, limit: str | None) -> KeysUnavailable:
        return KeysUnavailable(
            f"key id {kid[:64]!r} is not in the JWKS kept, and the JWKS at {self.url} cannot be "
            f"fetched: {why}",
            retry_after=self.backoff.remaining(),
            limit=limit,
        )

    def _lookup(self, kid: str | None) -> SigningKey | None:
        keys = self._keys or []
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        for key in keys:
            if key.kid == kid:
                return key
        return None

    def _may_refetch(self) -> bool:
        now = time.monotonic()
        window = self._refetches
        while window and now - window[0] > 60:
            window.popleft()
        if len(window) >= self.refetches_per_minute:
            return False
        window.append(now)
        return True

    async def _refresh(self) -> str | None:
        """Fetch the set, or wait for the fetch under way; why it failed, or ``None``. Raises
        ``KeysUnavailable`` when no set is kept and none could be fetched (at once while
        fetching is paused)."""
        flight = self._flight
        if flight is None:
            paused = self.backoff.remaining()
            if paused:
                if self._keys is None:
                    raise KeysUnavailable(
                        f"the JWKS at {self.url} could not be fetched; fetching it again in "
                        f"{paused:.1f} s",
                        retry_after=paused,
                        limit="jwks_backoff",
                    )
                return None
            flight = self._flight = Flight()
            try:
                await flight.fly(self._fetch, self.timeout, (httpx.HTTPError, ValueError))
            finally:
                self._flight = None
                self._settle(flight)
        _, failure = await flight.outcome()
        if failure is not None and self._keys is None:
            raise KeysUnavailable(
                f"cannot fetch the JWKS at {self.url}: {failure}",
                retry_after=self.backoff.remaining(),
            )
        return failure

    def _settle(self, flight: Flight[list[SigningKey]]) -> None:
        """Keep what the fetch brought, or pause fetching after its failure."""
        if flight.failure is None and flight.value is not None:
            self._keys = flight.value
            self._fetched_at = time.monotonic()
            self.backoff.succeeded()
            return
        self.backoff.failed()
        kept = "keeping the set fetched earlier" if self._keys is not None else "no set is kept"
        log.error(
            "cannot fetch the JWKS at %s (%s); %s, and it is fetched again in %.0f s at the "
            "earliest",
            self.url,
            flight.failure,
            kept,
            self.backoff.pause,
        )

    async def _fetch(self) -> list[SigningKey]:
        self.fetches += 1
        async with self.client.session() as client:
            response = await client.get(self.url, timeout=self.timeout)
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        try:
            document = response.json()
        except ValueError:
            raise ValueError("the answer is not JSON") from None
        keys = signing_keys(document, self.algorithms)
        log.info("fetched the JWKS at %s: %d signing keys", self.url, len(keys))
        return keys


__all__ = ["ASYMMETRIC", "JWKSCache", "KeysUnavailable", "SigningKey", "signing_keys"]
