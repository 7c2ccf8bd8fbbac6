"""What a verified access token is, and what verifies one: the official server's shapes.

Code written for the official ``mcp`` package imports ``AccessToken`` and ``TokenVerifier`` from
``mcp.server.auth.provider``; here they are the same names in ``engine.auth.provider``, with the
same fields, so a verifier written for one runs on the other with its imports changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from engine.errors import InsufficientScope


class AccessToken(BaseModel):
    """A bearer token the verifier accepted, and what it says about its caller.

    ``subject`` is the token's ``sub`` (the resource owner; unique only within its issuer, which
    verifiers put in ``claims["iss"]``); ``resource`` the resource it was issued for (its
    audience, RFC 8707); ``expires_at`` seconds since the epoch.
    """

    token: str
    client_id: str
    scopes: list[str]
    expires_at: int | None = None
    resource: str | None = None
    subject: str | None = None
    claims: dict[str, Any] | None = None

    def __repr__(self) -> str:  # the token itself never reaches a log through a repr
        return (
            f"AccessToken(client_id={self.client_id!r}, subject={self.subject!r}, "
            f"scopes={self.scopes!r}, expires_at={self.expires_at!r}, resource={self.resource!r})"
        )

    __str__ = __repr__

    @property
    def issuer(self) -> str | None:
        issuer = (self.claims or {}).get("iss")
        return str(issuer) if issuer is not None else None


@runtime_checkable
class TokenVerifier(Protocol):
    """Turns a bearer token into an :class:`AccessToken`, or ``None`` when it is not valid here.

    A verifier that cannot decide (its authorization server does not answer) raises; the request
    is then answered 503 rather than 401, so a client does not throw away a good token.
    """

    async def verify_token(self, token: str) -> AccessToken | None: ...


def require_scopes(token: AccessToken | None, needed: tuple[str, ...]) -> None:
    """Raise :class:`InsufficientScope` when ``token`` lacks one of ``needed``: the scopes a
    call needed, checked again on a request that continues it (its task, its next round).
    Without a token (stdio, or a server without ``auth``) nothing is checked, as for the call
    itself."""
    if token is None or not needed:
        return
    granted = token.scopes
    for scope in needed:
        if scope not in granted:
            raise InsufficientScope(needed)


def access_token_of(value: Any) -> AccessToken:
    """One of our tokens from another model of its fields (the official ``AccessToken`` a
    verifier written for the official server returns), read by attribute."""
    if isinstance(value, AccessToken):
        return value
    fields = {
        name: getattr(value, name) for name in AccessToken.model_fields if hasattr(value, name)
    }
    return AccessToken.model_validate(fields)


def principal_of(token: AccessToken) -> str:
    """Who a token speaks for: its issuer and subject (``sub`` is unique only per issuer), or,
    for a token without a subject, its issuer and client.

    An issuer is a URL and has no space, so ``"<issuer> <subject>"`` names one pair only.
    """
    subject = token.subject if token.subject else f"client:{token.client_id}"
    return f"{token.issuer or ''} {subject}"


def scopes_of(claims: Mapping[str, Any]) -> list[str]:
    """``scope`` (space-separated) or ``scp`` (a list, or a space-separated string)."""
    given = claims.get("scope", claims.get("scp"))
    if isinstance(given, str):
        return given.split()
    if isinstance(given, list):
        return [scope for scope in given if isinstance(scope, str)]
    return []


TIME_CLAIMS = ("exp", "nbf", "iat")
"""The claims that are times: NumericDate, seconds since the epoch as a JSON number (RFC 7519
§2), never a string, a boolean or null."""


def time_claim_refused(claims: Mapping[str, Any]) -> str | None:
    """Why a token's time claims are not what the JWT spec says they are, or ``None``: one
    present but not a finite number refuses the token, as a missing required claim does."""
    for name in TIME_CLAIMS:
        if name in claims:
            value = claims[name]
            if type(value) not in (int, float) or not math.isfinite(value):
                return f"{name} is not a number of seconds (RFC 7519 NumericDate)"
    return None


def token_from_claims(
    token: str, claims: dict[str, Any], audiences: list[str] | None
) -> AccessToken:
    """An accepted token as its claims (a JWT's, or an introspection answer's) describe it;
    its resource is the first of ``audiences`` it names."""
    audience = claims.get("aud")
    named = audience if isinstance(audience, list) else [audience]
    resource = next((a for a in audiences or () if a in named), None)
    client = claims.get("client_id") or claims.get("azp") or claims.get("appid")
    subject = claims.get("sub")
    expires = claims.get("exp")
    return AccessToken(
        token=token,
        client_id=str(client) if client is not None else "",
        scopes=scopes_of(claims),
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=resource,
        subject=str(subject) if subject is not None else None,
        claims=claims,
    )


__all__ = [
    "AccessToken",
    "TokenVerifier",
    "access_token_of",
    "principal_of",
    "require_scopes",
    "scopes_of",
    "time_claim_refused",
    "token_from_claims",
]
