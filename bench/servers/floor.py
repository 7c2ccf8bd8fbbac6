"""The floor: a do-nothing ASGI app under the same uvicorn settings as the two MCP servers.

It reads the request body and answers every POST with one canned JSON-RPC result, so the load
generator's 1-round loop runs against it unchanged. Its requests/s is the most any Python ASGI
server can do on this stack and machine; both MCP servers are measured against it.

    python bench/servers/floor.py --port 8123
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn

BODY = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text",'
    b'"text":"Reserved \'Dune\' (6 copies left)."}],"isError":false,"resultType":"complete"}}'
)
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))],
}
END = {"type": "http.response.body", "body": BODY}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send(START)
    await send(END)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        workers=1,
        loop="uvloop",
        http="httptools",
        log_level="critical",
        access_log=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
