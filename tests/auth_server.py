"""A small OAuth 2.1 authorization server for the tests, on a real loopback socket.

It does what the auth tests need of Keycloak or Auth0, and nothing else:

- metadata (RFC 8414) at ``/.well-known/oauth-authorization-server`` and
  ``/.well-known/openid-configuration``;
- its signing keys as a JWKS at ``/jwks``, RSA, rotated on demand (``rotate()``), each fetch
  counted;
- ``/token``: the client credentials grant (``client_secret_basic`` or ``_post``) and the
  authorization code grant with PKCE (S256), issuing RS256 JWT access tokens whose ``aud`` is the
  ``resource`` asked for (RFC 8707) and whose ``scope`` is what the client asked for among what
  it may have;
- ``/authorize``: approves at once, as the user the client is registered for, and redirects back
  with the code, the state and the issuer (RFC 9207);
- ``/register``: dynamic client registration (RFC 7591), a new client for user ``dynamic-user``;
- ``/introspect`` (RFC 7662): what it issued and has not revoked is active, for the resource
  server's own client; each introspection counted, and each token it was asked about.

``with server.hanging():`` makes ``/jwks`` and ``/introspect`` take requests (and count them)
but answer none until the block ends: a provider that stalls.

``mint()`` signs a token directly, with any claims, header or key, so a test can make every kind
of token a verifier must refuse. ``serve_authorization_server()`` runs it with uvicorn in the
test's event loop.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.fleet_helpers import serve_asgi

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

TOKEN_LIFETIME = 300
RESOURCE_SERVER = ("bookshop-mcp", "resource-server-secret")
"""The credentials the MCP server introspects tokens with."""


@dataclass
class Client:
    """A registered client: who it acts for and which scopes it may be given."""

    client_id: str
    secret: str | None
    user: str
    scopes: tuple[str, ...]
    redirect_uris: tuple[str, ...] = ()


@dataclass
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey

    def jwk(self) -> dict[str, Any]:
        public = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return public | {"kid": self.kid, "use": "sig", "alg": "RS256"}


def new_key(kid: str | None = None) -> SigningKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return SigningKey(kid or f"key-{secrets.token_hex(4)}", key)


@dataclass
class Codes:
    """An authorization code waiting for its token request."""

    client_id: str
    challenge: str
    redirect_uri: str
    scope: str
    resource: str | None


@dataclass
class AuthorizationServer:
    """The server's state: its clients, keys, codes and what it issued (see the module)."""

    issuer: str = ""
    clients: dict[str, Client] = field(default_factory=dict)
    keys: list[SigningKey] = field(default_factory=lambda: [new_key("key-1")])
    issued: set[str] = field(default_factory=set)
    revoked: set[str] = field(default_factory=set)
    codes: dict[str, Codes] = field(default_factory=dict)
    jwks_fetches: int = 0
    introspections: int = 0
    introspected: Counter[str] = field(default_factory=Counter)
    """How many times each token was asked about."""
    token_requests: int = 0
    released: anyio.Event | None = None
    """While set, ``/jwks`` and ``/introspect`` wait for it before answering."""
    stalled: anyio.Event = field(default_factory=anyio.Event)
    """Set when a request arrives at a hanging endpoint."""

    # --- test controls ------------------------------------------------------------------------

    def add_client(
        self,
        client_id: str,
        secret: str | None,
        *,
        user: str | None = None,
        scopes: Iterable[str] = ("shop",),
    ) -> Client:
        client = Client(client_id, secret, user or client_id, tuple(scopes))
        self.clients[client_id] = client
        return client

    @contextlib.contextmanager
    def hanging(self) -> Iterator[None]:
        """``/jwks`` and ``/introspect`` answer nothing while the block runs."""
        released = self.released = anyio.Event()
        self.stalled = anyio.Event()
        try:
            yield
        finally:
            self.released = None
            released.set()

    async def _stall(self) -> None:
        if self.released is not None:
            self.stalled.set()
            await self.released.wait()

    @property
    def signing(self) -> SigningKey:
        return self.keys[-1]

    def rotate(self) -> SigningKey:
        """Publish a new key and sign with it from now on; the old one stays published."""
        key = new_key()
        self.keys.append(key)
        return key

    def mint(
        self,
        subject: str = "ada",
        *,
        audience: str | list[str] | None = None,
        scope: str = "shop",
        key: SigningKey | None = None,
        algorithm: str = "RS256",
        headers: dict[str, Any] | None = None,
        lifetime: int = TOKEN_LIFETIME,
        **claims: Any,
    ) -> str:
        """A token signed by this server's current key (or ``key``), with ``claims`` on top."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + lifetime,
            "scope": scope,
            "client_id": claims.pop("client_id", subject),
            "jti": secrets.token_hex(8),
        }
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        signer = key or self.signing
        token = jwt.encode(
            payload,
            signer.private,
            algorithm=algorithm,
            headers={"kid": signer.kid, "typ": "at+jwt", **(headers or {})},
        )
        self.issued.add(token)
        return token

    # --- the ASGI app -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": kind + ".complete"})
                if kind == "lifespan.shutdown":
                    return
        path, method = scope["path"], scope["method"]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        if path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            await _json(send, 200, self.metadata())
        elif path == "/jwks":
            self.jwks_fetches += 1
            await self._stall()
            await _json(send, 200, {"keys": [key.jwk() for key in self.keys]})
        elif path == "/token" and method == "POST":
            self.token_requests += 1
            status, answer = self.token(form, headers)
            await _json(send, status, answer)
        elif path == "/introspect" and method == "POST":
            self.introspections += 1
            self.introspected[form.get("token", "")] += 1
            await self._stall()
            status, answer = self.introspect(form, headers)
            await _json(send, status, answer)
        elif path == "/register" and method == "POST":
            status, answer = self.register(json.loads(body or b"{}"))
            await _json(send, status, answer)
        elif path == "/authorize":
            await self.authorize(query, send)
        else:
            await _json(send, 404, {"error": "not_found"})

    def metadata(self) -> dict[str, Any]:
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "introspection_endpoint": f"{base}/introspect",
            "jwks_uri": f"{base}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
            ],
            "authorization_response_iss_parameter_supported": True,
            "scopes_supported": ["shop", "books:write"],
        }

    def _client(self, form: dict[str, str], headers: dict[str, str]) -> Client | None:
        """The client a request authenticates as (Basic, or its id and secret in the form)."""
        given = headers.get("authorization", "")
        if given.lower().startswith("basic "):
            decoded = base64.b64decode(given[6:]).decode()
            client_id, _, secret = decoded.partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        client = self.clients.get(client_id)
        if client is None:
            return None
        if client.secret is not None and not secrets.compare_digest(client.secret, secret):
            return None
        return client

    def token(self, form: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        client = self._client(form, headers)
        if client is None:
            return 401, {"error": "invalid_client"}
        grant = form.get("grant_type")
        if grant == "client_credentials":
            scope, resource = form.get("scope", ""), form.get("resource")
        elif grant == "authorization_code":
            code = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            digest = hashlib.sha256(verifier.encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if code is None or code.client_id != client.client_id or challenge != code.challenge:
                return 400, {"error": "invalid_grant"}
            scope, resource = code.scope, form.get("resource") or code.resource
        else:
            return 400, {"error": "unsupported_grant_type"}
        granted = [s for s in (scope.split() or client.scopes) if s in client.scopes]
        token = self.mint(
            client.user, audience=resource, scope=" ".join(granted), client_id=client.client_id
        )
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME}
        return 200, answer | {"scope": " ".join(granted)}

    def register(self, metadata: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        client_id = f"dyn-{secrets.token_hex(4)}"
        secret = secrets.token_urlsafe(16)
        client = self.add_client(client_id, secret, user="dynamic-user", scopes=("shop",))
        client.redirect_uris = tuple(metadata.get("redirect_uris") or ())
        return 201, metadata | {
            "client_id": client_id,
            "client_secret": secret,
            "client_id_issued_at": int(time.time()),
            "token_endpoint_auth_method": "client_secret_post",
        }

    async def authorize(self, query: dict[str, str], send: Send) -> None:
        client = self.clients.get(query.get("client_id", ""))
        redirect = query.get("redirect_uri", "")
        if client is None or redirect not in client.redirect_uris:
            await _json(send, 400, {"error": "invalid_request"})
            return
        code = secrets.token_urlsafe(16)
        self.codes[code] = Codes(
            client.client_id,
            query.get("code_challenge", ""),
            redirect,
            query.get("scope", ""),
            query.get("resource"),
        )
        back = {"code": code, "state": query.get("state", ""), "iss": self.issuer}
        location = f"{redirect}?{urlencode(back)}"
        await send({"type": "http.response.start", "status": 302, "headers": [
            (b"location", location.encode()), (b"content-length", b"0")
        ]})  # fmt: skip
        await send({"type": "http.response.body", "body": b""})

    def introspect(
        self, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        client = self._client(form, headers)
        if client is None or client.client_id != RESOURCE_SERVER[0]:
            return 401, {"error": "invalid_client"}
        token = form.get("token", "")
        if token not in self.issued or token in self.revoked:
            return 200, {"active": False}
        claims = jwt.decode(token, options={"verify_signature": False})
        if claims.get("exp", 0) < time.time():
            return 200, {"active": False}
        return 200, {"active": True, "token_type": "Bearer"} | claims


async def _json(send: Send, status: int, value: Any) -> None:
    body = json.dumps(value).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serve_authorization_server(
    server: AuthorizationServer | None = None,
) -> AsyncIterator[AuthorizationServer]:
    """The authorization server on a loopback port, its issuer set to its URL."""
    server = server or AuthorizationServer()
    server.add_client(*RESOURCE_SERVER, scopes=())
    async with serve_asgi(server) as base:
        server.issuer = base
        yield server


def forged_hs256(token_claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """An HS256 token "signed" with ``secret``: with an RSA public key as the secret, the forgery
    a verifier that lets the token choose its algorithm would accept."""

    def part(value: Any) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing_input = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(token_claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def unsigned(token_claims: dict[str, Any], kid: str) -> str:
    """A token with ``alg: none`` and no signature."""

    def part(value: Any) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': kid})}.{part(token_claims)}."
