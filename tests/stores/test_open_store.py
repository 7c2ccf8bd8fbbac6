"""open_store: URLs to stores, and clear refusals for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from stores import MemoryStore, RedisStore, SQLiteStore, Store, open_store

pytestmark = pytest.mark.anyio


async def test_a_store_is_returned_as_is() -> None:
    store = MemoryStore()
    assert open_store(store) is store


async def test_memory() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    await store.aclose()


async def test_sqlite_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data/engine.db")
    assert isinstance(store, SQLiteStore)
    assert store.path == "data/engine.db"
    await store.aclose()
    assert (tmp_path / "data" / "engine.db").exists()


async def test_sqlite_absolute_path(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/engine.db")  # tmp_path starts with "/"
    assert isinstance(store, SQLiteStore)
    assert store.path == f"{tmp_path}/engine.db"
    await store.aclose()


@pytest.mark.parametrize(
    ("url", "prefix", "client"),
    [
        ("redis://127.0.0.1:6379/0", "engine", Redis),
        ("redis://127.0.0.1:6379/2?prefix=tenant-a&socket_keepalive=true", "tenant-a", Redis),
        ("rediss://user:secret@redis.example:6380/0", "engine", Redis),
        ("unix:///run/redis.sock?db=1&prefix=p", "p", Redis),
        ("redis+cluster://127.0.0.1:7000?prefix=c", "c", RedisCluster),
    ],
)
async def test_redis_urls(url: str, prefix: str, client: type) -> None:
    for store in (open_store(url), RedisStore(url)):  # connect lazily: nothing need listen
        assert isinstance(store, RedisStore)
        assert store.prefix == prefix
        assert isinstance(store._client, client)
        await store.aclose()


async def test_redis_options_reach_the_client() -> None:
    url = "redis://127.0.0.1:6379/3?prefix=x&client_name=engine"
    for store in (open_store(url), RedisStore(url)):
        assert isinstance(store, RedisStore) and isinstance(store._client, Redis)
        kwargs = store._client.connection_pool.connection_kwargs
        assert kwargs["db"] == 3 and kwargs["client_name"] == "engine"
        assert "prefix" not in kwargs
        await store.aclose()


async def test_a_prefix_given_twice_must_agree() -> None:
    store = RedisStore("redis://127.0.0.1:6379/0?prefix=a", prefix="a")
    assert store.prefix == "a"
    await store.aclose()
    with pytest.raises(ValueError, match=r"prefix given twice: prefix='b' and \?prefix=a") as e:
        RedisStore("redis://127.0.0.1:6379/0?password=hunter2&prefix=a", prefix="b")
    assert "hunter2" not in str(e.value) and "prefix=a" in str(e.value).partition(" in ")[2]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres://localhost/db", "accepted forms: memory://"),
        ("engine.db", "accepted forms"),
        ("memory://somewhere", "use 'memory://'"),
        ("sqlite://host/engine.db", "sqlite:///relative/path.db"),
        ("sqlite:///", "names no file"),
        ("sqlite:///engine.db?mode=ro", r"the one option is \?synchronous=normal or"),
        ("sqlite:///engine.db?synchronous=off", "synchronous must be .normal. .* or .full."),
        ("redis://localhost?prefix=", "non-empty"),
        ("redis://localhost?prefix=a&prefix=b", "at most one"),
        ("redis://localhost?prefix={tag}", "without braces"),
        ("redis://localhost/0?prefx=tenant", "unknown option prefx"),
        ("unix:///run/redis.sock?db=1&socket_keeplive=true", "unknown option socket_keeplive"),
        ("redis://localhost/0?prefix=p#top", "remove the #fragment"),
        ("redis+cluster://127.0.0.1:7000?prefx=tenant", "unknown option .*prefx"),
    ],
)
async def test_bad_urls_are_refused_with_the_accepted_forms(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)


async def test_passwords_stay_out_of_error_messages() -> None:
    with pytest.raises(ValueError) as refused:
        open_store("postgres://user:hunter2@db.example/engine")
    assert "hunter2" not in str(refused.value) and "user:***@" in str(refused.value)
    with pytest.raises(ValueError, match="scheme 'http'") as refused:
        RedisStore("http://user:hunter2@redis.example")
    assert "hunter2" not in str(refused.value)
    for url in (
        "redis://redis.example/0?password=hunter2&bogus=1",
        "redis://user:hunter2@with-an-at@redis.example/0?prefix=a&prefix=b",
    ):
        with pytest.raises(ValueError) as refused:
            RedisStore(url)
        assert "hunter2" not in str(refused.value), refused.value


async def test_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="store URL or a Store"):
        open_store(42)  # type: ignore[arg-type]


async def test_the_three_stores_satisfy_the_protocol(tmp_path: Path) -> None:
    stores = [MemoryStore(), SQLiteStore(tmp_path / "x.db"), RedisStore("redis://127.0.0.1:1")]
    for store in stores:
        assert isinstance(store, Store)
        await store.aclose()
