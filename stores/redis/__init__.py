"""`RedisStore`: shared state for many replicas, on Redis or Redis Cluster.

The store is one class composed of a module per facet of the `Store` protocol; its public name
is `RedisStore`.
"""

from .store import RedisStore

__all__ = ["RedisStore"]
