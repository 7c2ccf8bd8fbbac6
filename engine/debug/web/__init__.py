"""The journal in a browser: ``python -m engine journal-ui``, or mounted beside ``/mcp``."""
