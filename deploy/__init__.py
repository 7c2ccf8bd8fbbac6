"""Deployment helpers: the local fleet (``deploy/fleet.py``) and the nginx template."""
