"""``JWTVerifier``: access tokens that are JWTs, checked against the issuer's published keys.

Most authorization servers (Keycloak, Auth0, Entra ID, Okta...) issue access tokens as JWTs
signed with a key they publish as a JWKS. A token is accepted when:

- its header names an allowed asymmetric algorithm (never ``none``, never a shared-secret
  ``HS*`` one: a public key is public, so an HMAC "signed" with it proves nothing), and a key
  of the set that is meant for that algorithm;
- its signature verifies with that key (PyJWT does the JOSE work);
- ``iss`` is the issuer, ``aud`` names this resource (RFC 8707: the token was issued for this
  server, not for another one the user also signs in to), ``exp`` is in the future and ``nbf``
  (when present) in the past, within ``leeway`` seconds of clock skew; ``exp``, ``nbf`` and
  ``iat`` are numbers (RFC 7519 NumericDate: a string, a boolean or null refuses the token).

Scopes come from ``scope`` (space-separated, RFC 9068) or ``scp`` (a list or a string, as Okta and
Entra ID send them); the client from ``client_id``, ``azp`` or ``appid``.

A client sends the same token with every round of every call until it expires, and checking a
signature costs more than serving a round, so a token that verified is remembered (by its text)
for ``cache_seconds``, never past its ``exp``: its signature and claims cannot change, only the
clock. A key the provider withdraws therefore stops verifying remembered tokens at most
``cache_seconds`` later. Tokens that fail are not remembered: each is checked again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import httpx
import jwt

from engine.auth.jwks import ASYMMETRIC, JWKSCache
from engine.auth.provider import AccessToken, scopes_of, time_claim_refused, token_from_claims
from engine.auth.provider_client import ProviderClient

log = logging.getLogger("engine.auth")

DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
SUPPORTED = frozenset(alg for family in ASYMMETRIC.values() for alg in family)
MAX_REMEMBERED = 4096
"""Verified tokens remembered at most (the oldest go first): about a token and its claims each,
a few kilobytes."""


class JWTVerifier:
    """Checks JWT access tokens against the JWKS at ``jwks_url`` (see the module).

    - ``issuer``: the ``iss`` tokens must carry, exactly (``AuthSettings.issuer_url``).
    - ``audience``: what ``aud`` must name: this server's resource URL, or the identifier the
      provider uses for it (an Entra ID application ID URI, an Auth0 API identifier); several
      are allowed as a list.
    - ``algorithms``: the allow-list (RS256, PS256, ES256 and EdDSA by default); only
      asymmetric algorithms are accepted.
    - ``leeway``: seconds of clock skew allowed on ``exp`` and ``nbf`` (30).
    - ``jwks_max_age``: seconds a fetched key set is kept before it is fetched again (600).
    - ``refetches_per_minute``: how often an unknown ``kid`` may make the set be fetched again
      (5).
    - ``timeout``: seconds one fetch of the set may take in all (5): the requests waiting for it
      are answered together by then (503 when no set is kept).
    - ``jwks``: a key set given as a dict instead of ``jwks_url``, never fetched (keys you pin).
    - ``http_client``: an ``httpx.AsyncClient`` of your own to fetch the keys with (a proxy, a
      private CA); otherwise the verifier opens one while its server runs.
    - ``cache_seconds``: how long a verified token is remembered (300; 0 checks every request).
    """

    def __init__(
        self,
        jwks_url: str | None = None,
        *,
        issuer: str,
        audience: str | Iterable[str],
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 30.0,
        jwks_max_age: float = 600.0,
        refetches_per_minute: int = 5,
        timeout: float = 5.0,
        jwks: Mapping[str, Any] | None = None,
        http_client: httpx.AsyncClient | None = None,
        cache_seconds: float = 300.0,
    ) -> None:
        allowed = tuple(algorithms)
        refused = [alg for alg in allowed if alg not in SUPPORTED]
        if refused or not allowed:
            raise ValueError(
                f"algorithms {refused or allowed!r} cannot verify access tokens here: give "
                f"asymmetric ones ({', '.join(sorted(SUPPORTED))}); 'none' and the HS* "
                "algorithms are never accepted"
            )
        if (jwks_url is None) == (jwks is None):
            raise ValueError("JWTVerifier takes one of jwks_url (fetched) or jwks (a fixed set)")
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not all(isinstance(a, str) and a for a in audiences):
            raise ValueError("audience must name this resource, e.g. https://mcp.example.com/mcp")
        if not isinstance(issuer, str) or not issuer:
            raise ValueError("issuer must be the iss of the tokens, e.g. https://auth.example.com")
        self.issuer = issuer
        self.audiences = audiences
        self.algorithms = allowed
        self.leeway = leeway
        self.keys = JWKSCache(
            jwks_url or "",
            allowed,
            max_age=jwks_max_age,
            refetches_per_minute=refetches_per_minute,
            timeout=timeout,
            fixed=jwks,
        )
        self.keys.client = ProviderClient(http_client, timeout)
        self.cache_seconds = cache_seconds
        self._verified: dict[str, tuple[float, AccessToken]] = {}
        """Tokens that verified, by their text: until when each may be taken as it is."""

    async def __aenter__(self) -> JWTVerifier:
        self.keys.client.open()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.keys.client.close()

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's details when it is valid here; ``None`` (and the reason logged) when
        not. Raises ``KeysUnavailable`` when no key set is kept and none can be fetched now."""
        remembered = self._verified.get(token)
        if remembered is not None:
            if remembered[0] > time.time():
                return remembered[1]
            del self._verified[token]
        verified = await self._verify(token)
        if verified is not None and self.cache_seconds > 0:
            self._remember(token, verified)
        return verified

    def _remember(self, token: str, verified: AccessToken) -> None:
        now = time.time()
        until = now + self.cache_seconds
        if verified.expires_at is not None:
            until = min(until, verified.expires_at + self.leeway)
        remembered = self._verified
        if len(remembered) >= MAX_REMEMBERED:
            for stale in [t for t, (at, _) in remembered.items() if at <= now]:
                del remembered[stale]
            while len(remembered) >= MAX_REMEMBERED:
                del remembered[next(iter(remembered))]
        remembered[token] = (until, verified)

    async def _verify(self, token: str) -> AccessToken | None:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return _refused("not a JWT")
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            return _refused(f"algorithm {str(algorithm)[:16]!r} is not allowed")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            return _refused("kid is not a string")
        key = await self.keys.find(kid)
        if key is None:
            return _refused(f"no key {kid[:64]!r} in the JWKS" if kid else "no kid, several keys")
        if algorithm not in key.algorithms:
            return _refused(f"key {str(kid)[:64]!r} is not for {algorithm}")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.audiences,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            return _refused(str(exc) or type(exc).__name__)
        malformed = time_claim_refused(claims)
        if malformed is not None:
            return _refused(malformed)
        return token_from_claims(token, claims, self.audiences)


def _refused(reason: str) -> AccessToken | None:
    log.info("bearer token refused: %s", reason)
    return None


__all__ = ["DEFAULT_ALGORITHMS", "JWTVerifier", "scopes_of"]
