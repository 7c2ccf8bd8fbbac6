"""``AuthSettings``: which authorization server a replica trusts and what it protects.

The fields are those of the official ``mcp.server.auth.settings.AuthSettings`` that a resource
server reads, so ported code keeps its ``AuthSettings(...)`` call. This server is a resource
server only: it does not issue tokens, so the official options for an embedded authorization
server (client registration, revocation, identity assertions) are refused by name.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, model_validator


def _as_text(value: Any) -> Any:
    """A URL given as ``AnyHttpUrl`` (as the official settings take it), or as a string."""
    return value if isinstance(value, str) or value is None else str(value)


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{value!r} is not an http(s) URL, such as https://auth.example.com")
    return value


HttpURL = Annotated[str, BeforeValidator(_as_text), AfterValidator(_http_url)]
"""An absolute http(s) URL, kept exactly as given: an issuer is compared as a string (RFC 8414
§3.3), so not even a trailing slash may be added."""

AUTHORIZATION_SERVER_OPTIONS = (
    "client_registration_options",
    "revocation_options",
    "identity_assertion_enabled",
)


class AuthSettings(BaseModel):
    """How this server checks bearer tokens (see docs/auth.md).

    - ``issuer_url``: the authorization server that issues tokens for this resource, named in
      the protected resource metadata so clients know where to get one.
    - ``resource_server_url``: this server's public MCP URL (``https://mcp.example.com/mcp``),
      the resource its tokens are issued for. When ``None``, it is derived from each request's
      scheme and ``Host`` (and ``X-Forwarded-Proto``/``X-Forwarded-Host`` when
      ``trust_forwarded``); give it in a deployment whose clients reach it through a proxy.
    - ``required_scopes``: scopes every request needs (403 ``insufficient_scope`` without them).
    - ``service_documentation_url``: listed in the metadata as ``resource_documentation``.
    - ``validate_token_resource``: refuse a token whose ``AccessToken.resource`` is not
      ``resource_server_url`` (for verifiers that report the resource but do not check it; the
      built-in verifiers check the audience themselves).
    - ``trust_forwarded``: take the scheme and host of the metadata URL from
      ``X-Forwarded-Proto`` and ``X-Forwarded-Host``. Only behind a proxy that sets them: a
      client could otherwise point the metadata URL at a host of its choosing.
    - ``resource_name``: a human-readable name in the metadata.
    """

    model_config = ConfigDict(frozen=True)

    issuer_url: HttpURL
    resource_server_url: HttpURL | None = None
    required_scopes: list[str] | None = None
    service_documentation_url: HttpURL | None = None
    validate_token_resource: bool | None = None
    trust_forwarded: bool = False
    resource_name: str | None = None
    authorization_servers: list[HttpURL] | None = None
    """Every authorization server clients may use; ``[issuer_url]`` when not given."""

    @model_validator(mode="before")
    @classmethod
    def _resource_server_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            given = [name for name in AUTHORIZATION_SERVER_OPTIONS if data.get(name)]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: this server is a resource server only and issues no "
                    "tokens; run an authorization server (Keycloak, Auth0, Entra ID...) and give "
                    "its issuer as issuer_url (see docs/auth.md)"
                )
            for name in AUTHORIZATION_SERVER_OPTIONS:
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _checked(self) -> AuthSettings:
        if self.validate_token_resource and self.resource_server_url is None:
            raise ValueError(
                "validate_token_resource needs resource_server_url: the URL tokens must be "
                "issued for"
            )
        for scope in self.required_scopes or ():
            check_scope(scope)
        return self

    @classmethod
    def of(cls, value: Any) -> AuthSettings:
        """These settings from ours, a dict of their fields, or another model of them (the
        official ``AuthSettings``), read by field name; its authorization-server options are
        refused when set, as here."""
        if isinstance(value, AuthSettings):
            return value
        if isinstance(value, dict):
            return cls.model_validate(value)
        if not hasattr(value, "issuer_url"):
            raise TypeError(
                f"auth must be an AuthSettings (engine.auth.settings), got {value!r}; see "
                "docs/auth.md"
            )
        names = [*cls.model_fields, *AUTHORIZATION_SERVER_OPTIONS]
        return cls.model_validate({n: getattr(value, n) for n in names if hasattr(value, n)})

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.required_scopes or ())

    @property
    def servers(self) -> list[str]:
        """The authorization servers named in the metadata."""
        return list(self.authorization_servers or [self.issuer_url])


def check_scope(scope: Any) -> str:
    """A scope as RFC 6749 §3.3 spells one: printable ASCII without spaces, quotes or
    backslashes (so it can stand in a ``WWW-Authenticate`` header as it is)."""
    if (
        not isinstance(scope, str)
        or not scope
        or any(c in ' "\\' or not 0x21 <= ord(c) <= 0x7E for c in scope)
    ):
        raise ValueError(
            f"{scope!r} is not a scope: a scope is printable ASCII without spaces, double quotes "
            "or backslashes (RFC 6749 §3.3), such as 'books:read'"
        )
    return scope


__all__ = ["AuthSettings", "check_scope"]
