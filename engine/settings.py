"""Settings read from the environment, once, at the edge."""

from __future__ import annotations

import os

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def env_flag(name: str, *, default: bool) -> bool:
    """A yes/no setting from the environment: ``1/true/yes/on`` or ``0/false/no/off`` (any
    case); ``default`` when unset or spelled otherwise."""
    value = os.environ.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    return default


def env_number(name: str, *, default: float, hint: str) -> float:
    """A number from the environment; ``default`` when unset or empty. ``hint`` says which
    numbers the setting takes, for the error."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a number {hint}, got {value!r}; unset it for {default:g}"
        ) from None
