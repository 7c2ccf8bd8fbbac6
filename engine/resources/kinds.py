"""The resource objects there are: fixed text or bytes, a function, a file, a directory's
listing, a URL."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import Field, field_validator

from engine._internal.introspect import flavour
from engine.handlers.results import json_text
from engine.input_requests import input_required_of
from engine.resources.base import Resource, listed_as
from engine.types import Annotations, Icon

_TEXT_APPLICATION_TYPES = frozenset({"application/json", "application/xml"})


class TextResource(Resource):
    """Always the same text."""

    text: str

    async def read(self) -> str:
        return self.text


class BinaryResource(Resource):
    """Always the same bytes, sent as a base64 blob."""

    data: bytes

    async def read(self) -> bytes:
        return self.data


class FunctionResource(Resource):
    """A function of no arguments called on each read (in a worker thread when it is not
    async): ``str`` is the text, ``bytes`` the blob, anything else is sent as JSON.

    ``@mcp.resource(uri)`` is the usual way to serve a function; this object form is for
    building resources in code, :meth:`from_function` taking its fields from the function.
    """

    fn: Callable[[], Any] = Field(exclude=True)

    async def read(self) -> str | bytes:
        if flavour(self.fn)[0]:
            result = await self.fn()
        else:
            result = await anyio.to_thread.run_sync(self.fn)
        if input_required_of(result) is not None:
            raise ValueError(
                "static resources cannot return InputRequiredResult; only resource template "
                "functions participate in the multi-round-trip flow"
            )
        if isinstance(result, Resource):
            return await result.read()
        if isinstance(result, str | bytes):
            return result
        return json_text(result)

    @classmethod
    def from_function(
        cls,
        fn: Callable[[], Any],
        uri: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[Icon] | None = None,
        annotations: Annotations | None = None,
        meta: dict[str, Any] | None = None,
    ) -> FunctionResource:
        """The resource at ``uri`` that ``fn`` reads: named after it and described by its
        docstring unless told otherwise."""
        resource_name, listed_description = listed_as(fn, name, description, "resource")
        return cls(
            uri=uri,
            name=resource_name,
            title=title,
            description=listed_description,
            mime_type=mime_type or "text/plain",
            fn=fn,
            icons=icons,
            annotations=annotations,
            meta=meta,
        )


def _encoding_for(mime_type: str) -> str | None:
    """The encoding a file of ``mime_type`` is read with when none is given: the ``charset``
    it declares, else UTF-8 (a byte-order mark dropped) for text, JSON and XML; else none, so
    it is read as bytes."""
    essence, *parameters = (part.strip() for part in mime_type.split(";"))
    for parameter in parameters:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset" and value:
            return value.strip().strip('"')
    essence = essence.lower()
    textual = (
        essence.startswith("text/")
        or essence.endswith(("+json", "+xml"))
        or essence in _TEXT_APPLICATION_TYPES
    )
    return "utf-8-sig" if textual else None


def _absolute(path: Path) -> Path:
    if not path.is_absolute():
        raise ValueError(f"Path must be absolute, not {str(path)!r}: resolve it first")
    return path


class FileResource(Resource):
    """A file, read on each read: decoded with ``encoding`` and sent as text, or sent as bytes
    when ``encoding`` is ``None``. Not given, the encoding follows ``mime_type``: its
    ``charset``, else UTF-8 for textual types (``text/*``, JSON, XML), else bytes."""

    path: Path
    encoding: str | None = Field(default_factory=lambda data: _encoding_for(data["mime_type"]))

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: Path) -> Path:
        return _absolute(path)

    @field_validator("encoding")
    @classmethod
    def _text_encoding(cls, encoding: str | None) -> str | None:
        """An encoding that is no codec, or no text codec (``base64_codec``), fails here rather
        than at the first read."""
        if encoding is not None:
            try:
                "".encode(encoding)
            except LookupError as exc:
                raise ValueError(str(exc)) from exc
        return encoding

    async def read(self) -> str | bytes:
        if self.encoding is None:
            return await anyio.to_thread.run_sync(self.path.read_bytes)
        read_text = functools.partial(self.path.read_text, encoding=self.encoding)
        return await anyio.to_thread.run_sync(read_text)


class HttpResource(Resource):
    """The text at ``url``, fetched on each read (an HTTP error status fails the read)."""

    url: str
    mime_type: str = "application/json"

    async def read(self) -> str:
        import httpx  # only a server with such a resource pays for it

        async with httpx.AsyncClient() as client:
            response = await client.get(self.url)
            response.raise_for_status()
            return response.text


class DirectoryResource(Resource):
    """The files in a directory, as JSON ``{"files": [relative paths]}``: those matching the
    glob ``pattern`` when given, and in subdirectories too when ``recursive``."""

    path: Path
    recursive: bool = False
    pattern: str | None = None
    mime_type: str = "application/json"

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: Path) -> Path:
        return _absolute(path)

    def list_files(self) -> list[Path]:
        """Every entry the pattern matches (files and directories); raises when ``path`` is
        missing or not a directory."""
        if not self.path.exists():
            raise FileNotFoundError(f"Directory not found: {self.path}")
        if not self.path.is_dir():
            raise NotADirectoryError(f"Not a directory: {self.path}")
        pattern = self.pattern or "*"
        found = self.path.rglob(pattern) if self.recursive else self.path.glob(pattern)
        return list(found)

    async def read(self) -> str:
        entries = await anyio.to_thread.run_sync(self.list_files)
        files = [str(entry.relative_to(self.path)) for entry in entries if entry.is_file()]
        return json.dumps({"files": files}, indent=2)


__all__ = [
    "BinaryResource",
    "DirectoryResource",
    "FileResource",
    "FunctionResource",
    "HttpResource",
    "TextResource",
]
