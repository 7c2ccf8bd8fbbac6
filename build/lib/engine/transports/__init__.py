"""Transports: Streamable HTTP (a plain ASGI application) and stdio."""
