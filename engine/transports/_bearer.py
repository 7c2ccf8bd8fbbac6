"""Bearer tokens on the MCP endpoint: the checks of the MCP authorization spec over HTTP.

Every request to the endpoint, whatever its era or method, carries ``Authorization: Bearer``
with a token the server's verifier accepts: otherwise 401, with a ``WWW-Authenticate``
challenge naming the protected resource metadata (where a client learns which authorization
server to ask) and the scopes it needs. A valid token without a scope the server or the target
handler requires gets 403 ``insufficient_scope``, naming the scopes to ask for. A verifier that
cannot decide (its authorization server does not answer) gets 503, so a client retries instead of
discarding a good token.

The token never reaches a log: what is logged is why it was refused. ``/healthz``, ``/metrics``
and the metadata document itself stay open: a load balancer and a client without a token must
read them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic_core import to_json

from engine._internal.metrics import Metrics
from engine.auth.metadata import ResourceMetadata, metadata_url
from engine.auth.provider import AccessToken, TokenVerifier, access_token_of
from engine.auth.single_flight import VerifierUnavailable
from engine.transports._asgi import Header, Scope, Send

log = logging.getLogger("engine.auth")

MAX_TOKEN_CHARS = 16 * 1024
"""A longer bearer token is refused unread (JWTs from the usual providers are 1-4 KB)."""
RETRY_AFTER_SECONDS = b"5"
EXPIRY_SKEW = 60
"""Seconds past its ``expires_at`` a token a verifier accepted is still taken: the verifier's own
clock-skew leeway (the built-in ones allow 30 s), while a verifier that forgot to check the
expiry still has its expired tokens refused."""


@dataclass(slots=True)
class Refusal:
    """A request refused before it reaches the protocol layer: status, challenge and body."""

    status: int
    error: str | None
    description: str
    scopes: Sequence[str] = ()
    reason: str = ""
    """For the log and the metrics: why, in a word or two."""
    retry_after: bytes = RETRY_AFTER_SECONDS
    """With 503: when to retry."""


class BearerGate:
    """The token checks of one MCP endpoint, and the responses that refuse a request."""

    def __init__(
        self,
        verifier: TokenVerifier,
        metadata: ResourceMetadata,
        metrics: Metrics,
        mcp_path: str,
    ) -> None:
        self.verifier = verifier
        self.metadata = metadata
        self.metrics = metrics
        self.mcp_path = mcp_path
        auth = metadata.auth
        self.required = auth.scopes
        self.issuer = auth.issuer_url
        self.resource = auth.resource_server_url if auth.validate_token_resource else None

    async def authenticate(self, headers: Mapping[str, str]) -> AccessToken | Refusal:
        """The request's verified token, or why it is refused."""
        header = headers.get("authorization")
        if header is None:
            return self._unauthorized(None, "no token", "This server needs an access token")
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer":
            return self._unauthorized(
                None, "not bearer", "This server takes OAuth bearer tokens only"
            )
        # The token's syntax is its verifier's to judge; what is refused unread here could not be
        # a token at all (isascii is constant-time on the strings a header decodes to).
        if (
            not token
            or len(token) > MAX_TOKEN_CHARS
            or not token.isascii()
            or " " in token
            or "\t" in token
        ):
            return self._unauthorized("invalid_token", "malformed", "The access token is malformed")
        try:
            verified = await self.verifier.verify_token(token)
        except Exception as exc:
            return self._unavailable(exc, token)
        if verified is not None and not isinstance(verified, AccessToken):
            verified = access_token_of(verified)
        if verified is None:
            return self._unauthorized(
                "invalid_token",
                "invalid",
                "The access token is not valid here (expired, revoked, or issued for another "
                "server)",
            )
        if verified.expires_at is not None and verified.expires_at + EXPIRY_SKEW < time.time():
            return self._unauthorized("invalid_token", "expired", "The access token has expired")
        if self.resource is not None and not _same_resource(verified.resource, self.resource):
            return self._unauthorized(
                "invalid_token", "resource", "The access token was issued for another resource"
            )
        if self.required:
            granted = verified.scopes
            for scope in self.required:
                if scope not in granted:
                    return self._insufficient(self.required, granted)
        return verified

    def _unavailable(self, exc: Exception, token: str) -> Refusal:
        """503: the verifier cannot decide now. A ``VerifierUnavailable`` is not logged here:
        the verifier logs a failed question once, however many requests it answers, and one
        that stopped before asking (a pause, a rate) counts the limit it hit instead; a log
        line per refused request would be the flood itself."""
        retry_after = RETRY_AFTER_SECONDS
        if isinstance(exc, VerifierUnavailable):
            retry_after = exc.retry_after_header
            if exc.limit is not None:
                self.metrics.inc("engine_auth_limits_total", limit=exc.limit)
        else:
            reason = str(exc).replace(token, "<token>")
            log.error("the token verifier failed (%s: %s)", type(exc).__name__, reason)
        return Refusal(
            503,
            "temporarily_unavailable",
            "The access token could not be checked now (its authorization server did not "
            f"answer); retry in {retry_after.decode()} s with the same token",
            reason="verifier unavailable",
            retry_after=retry_after,
        )

    def scope_check(self, token: AccessToken, needed: Sequence[str]) -> Refusal | None:
        """403 when the token lacks a scope the server or the target (``needed``) requires."""
        granted = token.scopes
        wanted = [*self.required, *(s for s in needed if s not in self.required)]
        if all(scope in granted for scope in wanted):
            return None
        return self._insufficient(wanted, granted)

    def _insufficient(self, wanted: Sequence[str], granted: Sequence[str]) -> Refusal:
        missing = [scope for scope in wanted if scope not in granted]
        return Refusal(
            403,
            "insufficient_scope",
            f"This request needs the scope {' '.join(missing)}: ask {self.issuer} for a token "
            f"with scope={' '.join(wanted)}",
            wanted,
            "insufficient scope",
        )

    def _unauthorized(self, error: str | None, reason: str, said: str) -> Refusal:
        return Refusal(
            401,
            error,
            f"{said}: get one from {self.issuer} (the resource metadata says how) and send it "
            "as Authorization: Bearer <token>",
            self.required,
            reason,
        )

    async def refuse(
        self, refusal: Refusal, scope: Scope, headers: Mapping[str, str], send: Send, *extra: Header
    ) -> None:
        """Answer ``refusal``: its status, its ``WWW-Authenticate`` challenge and an OAuth
        error body."""
        self.metrics.inc("engine_auth_refusals_total", reason=refusal.reason)
        if refusal.status != 503:
            log.info("request refused (%d): %s", refusal.status, refusal.reason)
        fields = [(b"content-type", b"application/json"), *extra]
        if refusal.status == 503:
            fields.append((b"retry-after", refusal.retry_after))
        else:
            fields.append((b"www-authenticate", self.challenge(refusal, scope, headers)))
        body = to_json(
            {"error": refusal.error or "unauthorized", "error_description": refusal.description}
        )
        fields.append((b"content-length", b"%d" % len(body)))
        await send({"type": "http.response.start", "status": refusal.status, "headers": fields})
        await send({"type": "http.response.body", "body": body})

    def challenge(self, refusal: Refusal, scope: Scope, headers: Mapping[str, str]) -> bytes:
        """``Bearer`` with the error (none when no token was sent, RFC 6750 §3.1), the scopes
        to ask for and the metadata URL."""
        parts = []
        if refusal.error is not None:
            parts.append(f'error="{refusal.error}"')
            parts.append(f'error_description="{_quotable(refusal.description)}"')
        if refusal.scopes:
            parts.append(f'scope="{" ".join(refusal.scopes)}"')
        resource = self.resource_url(scope, headers)
        if resource is not None:
            parts.append(f'resource_metadata="{metadata_url(resource)}"')
        return ("Bearer " + ", ".join(parts)).encode("latin-1", "replace")

    def resource_url(self, scope: Scope, headers: Mapping[str, str]) -> str | None:
        path = scope.get("root_path", "") + self.mcp_path
        return self.metadata.resource_url(scope.get("scheme", "http"), headers, path)

    async def serve_metadata(
        self, scope: Scope, headers: Mapping[str, str], send: Send, *extra: Header
    ) -> None:
        """The protected resource metadata; any origin may read it (it is public)."""
        cors = [
            (b"access-control-allow-origin", b"*"),
            (b"access-control-allow-methods", b"GET, OPTIONS"),
            (b"access-control-allow-headers", b"mcp-protocol-version, authorization"),
        ]
        if scope["method"] == "OPTIONS":
            await _send(send, 204, b"", None, [*cors, *extra])
            return
        resource = self.resource_url(scope, headers)
        if resource is None:
            text = (
                b"Misdirected Request: this server does not name its resource after that Host; "
                b"add the host to allowed_hosts, or set resource_server_url"
            )
            await _send(send, 421, text, b"text/plain; charset=utf-8", list(extra))
            return
        document = self.metadata.document(resource)
        body = document if scope["method"] != "HEAD" else b""
        length = len(document)
        fields = [*cors, (b"cache-control", b"public, max-age=300"), *extra]
        if self.metadata.derived:
            fields.append((b"vary", b"Host, X-Forwarded-Host, X-Forwarded-Proto"))
        await _send(send, 200, body, b"application/json", fields, length)


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes | None,
    headers: list[Header],
    length: int | None = None,
) -> None:
    fields = list(headers)
    if content_type is not None:
        fields.append((b"content-type", content_type))
    fields.append((b"content-length", b"%d" % (len(body) if length is None else length)))
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


def _quotable(text: str) -> str:
    """``text`` inside a quoted header parameter: no quotes or backslashes, ASCII only."""
    return "".join(c for c in text if c not in '"\\' and 0x20 <= ord(c) < 0x7F)


def _same_resource(given: str | None, expected: str) -> bool:
    """Whether a token's resource is this one, a trailing slash aside."""
    return given is not None and given.rstrip("/") == expected.rstrip("/")


__all__ = ["BearerGate", "Refusal"]
