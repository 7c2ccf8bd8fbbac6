"""Run by the ``mcp`` 1.x client's own virtualenv: call an eliciting tool without declaring
elicitation, then an ordinary call, over streamable HTTP; print what the SDK handed back.

Usage: python mcp1_refused.py URL
"""

import asyncio
import importlib.metadata
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def main(url: str) -> None:
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        try:
            await session.call_tool("order_book", {"title": "Neuromancer"})
        except McpError as exc:
            refused = {"code": exc.error.code, "data": exc.error.data}
        else:
            refused = None
        served = await session.call_tool("order_book", {"title": "Dune"})
    print(
        json.dumps(
            {
                "sdk": importlib.metadata.version("mcp"),
                "refused": refused,
                "served": [block.model_dump(mode="json") for block in served.content],
            }
        )
    )


asyncio.run(main(sys.argv[1]))
