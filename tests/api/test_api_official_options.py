"""Constructor options of the official ``MCPServer`` taken here: ``log_level``, ``debug``,
``cache_hints``, ``subscriptions``, and ``auth`` given as the official ``AuthSettings``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from engine import MCPServer
from engine.caching import CacheHint
from tests.conftest import KEY
from tests.http_helpers import asgi_client, assert_error, assert_result, post, request

pytestmark = pytest.mark.anyio


def weather(**options: Any) -> MCPServer:
    mcp = MCPServer("Weather", keys=[KEY], **options)

    @mcp.tool()
    def forecast(city: str) -> str:
        return f"Sunny in {city}"

    @mcp.resource("config://units")
    def units() -> str:
        return "metric"

    return mcp


# --- log_level and debug -------------------------------------------------------------------------


@contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger as in a program that configured no logging (pytest's handlers set
    aside), restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    try:
        yield root
    finally:
        root.handlers, root.level = handlers, level


def test_log_level_configures_logging_when_nothing_else_did() -> None:
    with bare_root() as root:
        MCPServer("Weather", keys=[KEY])
        assert root.handlers == []  # not given: logging is the program's own business
        mcp = MCPServer("Weather", keys=[KEY], log_level="debug")
        assert mcp.settings.log_level == "DEBUG"
        assert (root.level, len(root.handlers)) == (logging.DEBUG, 1)
        MCPServer("Weather", keys=[KEY], log_level="ERROR")
        assert root.level == logging.DEBUG  # a configured root stays as it is


def test_a_log_level_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="DEBUG, INFO, WARNING, ERROR, CRITICAL"):
        MCPServer("Weather", log_level="verbose")


def test_debug_reaches_the_http_app() -> None:
    assert weather().streamable_http_app().debug is False
    assert weather(debug=True).streamable_http_app().debug is True


# --- cache_hints ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OfficialHint:
    """The fields of the official ``CacheHint``."""

    ttl_ms: int = 0
    scope: str = "private"


async def test_cache_hints_set_each_methods_hint_and_the_rest_keep_the_default() -> None:
    mcp = weather(
        list_ttl_ms=10,
        cache_hints={
            "tools/list": CacheHint(ttl_ms=60_000, scope="public"),
            "resources/read": OfficialHint(ttl_ms=5_000),
            "server/discover": {"ttl_ms": 1_000},
        },
    )
    async with asgi_client(mcp.streamable_http_app()) as http:
        hints = {}
        for method, params in [
            ("tools/list", {}),
            ("resources/read", {"uri": "config://units"}),
            ("server/discover", {}),
            ("resources/list", {}),
        ]:
            result = assert_result(await post(http, request(method, params)))
            hints[method] = (result["ttlMs"], result["cacheScope"])
    assert hints == {
        "tools/list": (60_000, "public"),
        "resources/read": (5_000, "private"),
        "server/discover": (1_000, "private"),
        "resources/list": (10, "private"),  # no hint: list_ttl_ms, not shared
    }


def test_a_hint_for_a_method_that_cannot_carry_one_is_refused() -> None:
    with pytest.raises(ValueError, match="'tools/call' cannot carry caching hints"):
        weather(cache_hints={"tools/call": CacheHint(ttl_ms=1)})
    with pytest.raises(ValueError, match="ttl_ms"):
        CacheHint(ttl_ms=-1)


# --- subscriptions -------------------------------------------------------------------------------


async def test_discover_announces_changes_and_the_log_lines_a_client_may_ask_for() -> None:
    async with asgi_client(weather().streamable_http_app()) as http:
        discovered = assert_result(await post(http, request("server/discover")))
    # logging: a request that asks for log lines (its _meta logLevel) gets them, and the
    # specification asks a server that sends them to declare so.
    assert discovered["capabilities"] == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
    }


async def test_subscriptions_false_serves_no_listen_and_announces_no_change() -> None:
    mcp = weather(subscriptions=False)
    listen = request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    async with asgi_client(mcp.streamable_http_app()) as http:
        refused = await post(http, listen)
        discovered = assert_result(await post(http, request("server/discover")))
        called = assert_result(
            await post(
                http, request("tools/call", {"name": "forecast", "arguments": {"city": "Oslo"}})
            )
        )
    assert_error(refused, 404, -32601)
    assert discovered["capabilities"]["tools"] == {"listChanged": False}
    assert discovered["capabilities"]["resources"] == {"listChanged": False, "subscribe": False}
    assert called["content"][0]["text"] == "Sunny in Oslo"


def test_a_subscription_bus_is_refused_with_the_store_to_use_instead() -> None:
    with pytest.raises(TypeError, match="store='redis://"):
        weather(subscriptions=object())


# --- auth ----------------------------------------------------------------------------------------


class OfficialAuthSettings(BaseModel):
    """The fields of the official ``AuthSettings``."""

    issuer_url: str
    resource_server_url: str | None
    required_scopes: list[str] | None = None
    service_documentation_url: str | None = None
    client_registration_options: Any = None
    revocation_options: Any = None
    identity_assertion_enabled: bool = False
    validate_token_resource: bool | None = None


class Verifier:
    async def verify_token(self, token: str) -> None:
        return None


def test_the_official_auth_settings_are_read_by_their_fields() -> None:
    official = OfficialAuthSettings(
        issuer_url="https://auth.example.com/",
        resource_server_url="http://127.0.0.1:8000/mcp",
        required_scopes=["notes:read"],
    )
    mcp = MCPServer("Notes", keys=[KEY], token_verifier=Verifier(), auth=official)
    auth = mcp.core.auth
    assert auth is not None
    assert (auth.issuer_url, auth.scopes) == ("https://auth.example.com/", ("notes:read",))

    grants = official.model_copy(update={"identity_assertion_enabled": True})
    with pytest.raises(ValueError, match="resource server only"):
        MCPServer("Notes", keys=[KEY], token_verifier=Verifier(), auth=grants)
    with pytest.raises(TypeError, match="AuthSettings"):
        MCPServer("Notes", keys=[KEY], token_verifier=Verifier(), auth=object())  # type: ignore[arg-type]
