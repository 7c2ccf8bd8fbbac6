"""Hostile ``Host`` and ``Origin`` values are refused without being kept or echoed: the
DNS-rebinding check remembers only small decisions, and its error quotes a bounded part."""

from __future__ import annotations

import httpx
import pytest

from engine import MCPServer
from tests.conftest import KEY
from tests.fleet_helpers import serve_asgi
from tests.http_helpers import post, request

pytestmark = pytest.mark.anyio

LONG = 60_000


async def test_long_hosts_and_origins_are_refused_unremembered_and_quoted_short() -> None:
    app = MCPServer("Shelf", keys=[KEY]).streamable_http_app()
    async with (
        serve_asgi(app) as base,
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=30) as http,
    ):
        refused = []
        for i in range(20):
            host = {"Host": f"{i}.example.com" + "h" * LONG}
            origin = {"Origin": f"https://{i}.example.com/" + "o" * LONG}
            refused.append(await post(http, request("tools/list"), headers=host))
            refused.append(await post(http, request("tools/list"), headers=origin))
        answered = await post(http, request("tools/list"))
    assert [response.status_code for response in refused] == [421, 403] * 20
    assert max(len(response.content) for response in refused) < 1_000
    assert "characters)" in refused[0].text and "characters)" in refused[1].text
    assert answered.status_code == 200
    # Only the small, legitimate pair is remembered.
    assert list(app.endpoint.origins._decisions) == [(base.removeprefix("http://"), None)]
