"""``mcp.dependency_overrides[real] = fake``: swap resolvers, typically in tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class DependencyOverrides(dict[Callable[..., Any], Callable[..., Any]]):
    """``mcp.dependency_overrides[real] = fake``: swap a resolver, typically in tests.

    Every change bumps :attr:`version`, so handlers re-plan with the override's own signature.
    """

    version = 0

    def __setitem__(self, key: Callable[..., Any], value: Callable[..., Any]) -> None:
        super().__setitem__(key, value)
        self.version += 1

    def __delitem__(self, key: Callable[..., Any]) -> None:
        super().__delitem__(key)
        self.version += 1

    def clear(self) -> None:
        super().clear()
        self.version += 1

    def pop(self, key: Any, *default: Any) -> Any:
        self.version += 1
        return super().pop(key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self.version += 1
