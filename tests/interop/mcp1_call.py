"""Run by the ``mcp`` 1.x client's own virtualenv: call one tool over streamable HTTP and print
what the SDK handed back, as one JSON line.

Usage: python mcp1_call.py URL TOOL
"""

import asyncio
import importlib.metadata
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, tool: str) -> None:
    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        await session.list_tools()  # the SDK validates structured content against these schemas
        result = await session.call_tool(tool, {})
    print(
        json.dumps(
            {
                "sdk": importlib.metadata.version("mcp"),
                "protocolVersion": init.protocolVersion,
                "isError": result.isError,
                "structuredContent": result.structuredContent,
                "content": [block.model_dump(mode="json") for block in result.content],
            }
        )
    )


asyncio.run(main(sys.argv[1], sys.argv[2]))
