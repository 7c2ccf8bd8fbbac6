"""The ``ENGINE_`` variables of a group of settings, found by pydantic-settings' own source.

Imported when a server's settings are first read, not with the engine: a program that makes no
server (most of the command line's commands) does not load pydantic-settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, cast

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource


class _Variables(EnvSettingsSource):
    """The variables of ``group``'s fields in ``environ``: the prefix and each field's alias in
    any case, blank ones unset, the text as it is (no JSON); a field ``reads`` refuses is left
    out."""

    def __init__(
        self,
        group: type[BaseModel],
        environ: Mapping[str, str],
        prefix: str,
        reads: Callable[[FieldInfo], bool],
    ) -> None:
        self.environ, self.reads = environ, reads
        super().__init__(
            cast("type[BaseSettings]", group),  # it reads the fields and config of any model
            case_sensitive=False,
            env_prefix=prefix,
            env_prefix_target="alias",
            env_ignore_empty=True,
        )

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self.environ.items() if value.strip()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if not self.reads(field):
            return None, field_name, False
        return super().get_field_value(field, field_name)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        return value  # a list is written comma-separated, and split by the field's validator


def variables(
    group: type[BaseModel],
    environ: Mapping[str, str] | None,
    *,
    prefix: str,
    reads: Callable[[FieldInfo], bool],
) -> dict[str, str]:
    """``{alias: text}`` of the fields of ``group`` set in ``environ`` (``os.environ`` unless
    given)."""
    found = _Variables(group, os.environ if environ is None else environ, prefix, reads)()
    return {alias: str(text) for alias, text in found.items()}
