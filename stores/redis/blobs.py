"""Blobs on Redis (`BlobStore`): a string per blob under its call's hash tag, expiring by itself."""

from __future__ import annotations

from .._checks import check_call_id, check_ttl
from .client import as_bytes
from .core import RedisCore, milliseconds


class RedisBlobs(RedisCore):
    """`BlobStore` of `RedisStore`."""

    async def put_blob(self, call_id: str, blob_id: str, data: bytes, ttl: float) -> None:
        check_call_id(call_id)
        check_ttl(ttl)
        key = self._key(call_id, "blob", blob_id)
        await self._call(
            f"put_blob {blob_id!r} of call {call_id!r}",
            lambda: self._client.set(key, bytes(data), px=milliseconds(ttl)),
        )

    async def get_blob(self, call_id: str, blob_id: str) -> bytes | None:
        key = self._key(call_id, "blob", blob_id)
        value = await self._call(
            f"get_blob {blob_id!r} of call {call_id!r}", lambda: self._client.get(key)
        )
        return None if value is None else as_bytes(value, "a blob")
