"""Registered handlers: tools, prompts, resources and resource templates.

Each wraps a user function analysed once at registration (:mod:`engine.di.signature`) and knows
how to turn what the function returned into the wire result of its method. Everything that can be
computed before a request arrives (schemas, listings, output adapters) is computed then, once.
"""
