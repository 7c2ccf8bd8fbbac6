"""The bookshop served by ``mcp.run`` on uvicorn's pure-Python HTTP parser (h11), which the
connection limits wrap as they wrap httptools: ``python -m tests.abuse.h11_bookshop PORT``."""

import sys

from examples.bookshop import build

if __name__ == "__main__":
    build().run("streamable-http", port=int(sys.argv[1]), uvicorn_options={"http": "h11"})
