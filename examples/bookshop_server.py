"""The bookshop as a servable file: ``python -m engine serve examples/bookshop_server.py``.

Keys come from ``ENGINE_KEYS`` (or ``--keys``), so every replica started this way can resume
the others' calls.
"""

from examples.bookshop import build

mcp = build()
