"""OAuth 2.0 Protected Resource Metadata (RFC 9728): where a client learns how to get a token.

A client that is refused with 401 reads ``resource_metadata`` from the ``WWW-Authenticate``
challenge, fetches that document, and finds in it the authorization servers that issue tokens
for this resource and the scopes it knows. The document lives at
``/.well-known/oauth-protected-resource`` followed by the resource's path (``/mcp``), and at the
bare well-known path for clients that look there first.

The resource URL is configured (``AuthSettings.resource_server_url``) or derived from the
request: its scheme and ``Host``, and the ``X-Forwarded-*`` headers only where the deployment
says a proxy sets them (``trust_forwarded``), since a client chooses its own headers. A derived
URL names only a host of the server's ``allowed_hosts``: any other is refused, never reflected
(a cache would keep the document naming it), and an app that allows any host must be given
``resource_server_url``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from pydantic_core import to_json

from engine.auth.settings import AuthSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_~]+)(:\d{1,5})?")
"""A ``Host`` value a URL may be built from: a name or address, and a port."""


def metadata_path(resource_path: str) -> str:
    """Where the metadata of a resource at ``resource_path`` lives (RFC 9728 §3.1)."""
    path = resource_path.rstrip("/")
    return WELL_KNOWN + path


def metadata_url(resource_url: str) -> str:
    """The metadata URL of a resource: the well-known path between its origin and its path."""
    parts = urlsplit(resource_url)
    return f"{parts.scheme}://{parts.netloc}{metadata_path(parts.path)}"


def first_value(value: str | None) -> str | None:
    """The first of a header's comma-separated values (the client's side of a proxy chain)."""
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    return first or None


class ResourceMetadata:
    """The metadata document of one MCP endpoint, and the URLs a challenge names."""

    def __init__(
        self,
        auth: AuthSettings,
        handler_scopes: Callable[[], Iterable[str]],
        host_allowed: Callable[[str], bool],
    ) -> None:
        self.auth = auth
        self.trust_forwarded = auth.trust_forwarded
        self.handler_scopes = handler_scopes
        """The scopes the handlers require, read when the document is served: handlers may
        be registered after the app is made."""
        self.host_allowed = host_allowed
        """Whether a host of the request may name the resource (the ``Host`` allow-list)."""
        self._configured = auth.resource_server_url

    @property
    def derived(self) -> bool:
        """Whether the resource URL is built from each request (none is configured)."""
        return self._configured is None

    def resource_url(self, scheme: str, headers: Mapping[str, str], path: str) -> str | None:
        """This resource's URL: configured, or built from the request (``None`` when its host
        cannot be part of a URL or is not an allowed host)."""
        if self._configured is not None:
            return self._configured
        host = headers.get("host")
        if self.trust_forwarded:
            scheme = first_value(headers.get("x-forwarded-proto")) or scheme
            host = first_value(headers.get("x-forwarded-host")) or host
        if scheme not in ("http", "https") or host is None or not _HOST.fullmatch(host):
            return None
        if not self.host_allowed(host):
            return None
        return f"{scheme}://{host.lower()}{path}"

    def document(self, resource_url: str) -> bytes:
        """The JSON metadata of the resource at ``resource_url``."""
        auth = self.auth
        fields: dict[str, object] = {
            "resource": resource_url,
            "authorization_servers": auth.servers,
            "bearer_methods_supported": ["header"],
        }
        scopes = sorted({*auth.scopes, *self.handler_scopes()})
        if scopes:
            fields["scopes_supported"] = scopes
        if auth.resource_name is not None:
            fields["resource_name"] = auth.resource_name
        if auth.service_documentation_url is not None:
            fields["resource_documentation"] = auth.service_documentation_url
        return to_json(fields)


__all__ = ["WELL_KNOWN", "ResourceMetadata", "first_value", "metadata_path", "metadata_url"]
