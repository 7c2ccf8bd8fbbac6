"""docker-compose.yml checked against the code it runs (Docker itself cannot run here).

Fast and offline, so it runs in the default ``make test``: the services and their wiring, the
environment variables the engine really reads, the health check paths the HTTP app serves, the
ports nginx and the replicas listen on, AOF on Redis, and the nginx configuration compose mounts
(it must be the rendering of ``deploy/nginx.conf.template`` that ``deploy/fleet.py`` also uses).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from deploy.fleet import (
    COMPOSE_NGINX_PORT,
    COMPOSE_REPLICA_PORT,
    COMPOSE_REPLICAS,
    render_compose_nginx,
)

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
REPLICAS = list(COMPOSE_REPLICAS)
ENV_READ = re.compile(
    r"""\benv(?:iron)?(?:\.get|\.setdefault|\.pop)?\s*[\[(]\s*["']([A-Z][A-Z0-9_]+)["']"""
)


def settings_variables() -> set[str]:
    """The ``ENGINE_`` variables the settings groups declare (``engine.settings``)."""
    from engine._internal.setting_groups import variable_of
    from engine.settings import SETTING_GROUPS

    return {
        variable
        for group in SETTING_GROUPS
        for field in group.model_fields.values()
        if (variable := variable_of(field)) is not None
    }


def env_names_read(*paths: Path) -> set[str]:
    """Environment variable names the given Python sources read via ``os.environ``; for the
    engine, also those its settings declare."""
    names: set[str] = settings_variables() if ROOT / "engine" in paths else set()
    for path in paths:
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            names |= set(ENV_READ.findall(file.read_text()))
    return names


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def command_of(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def option(command: list[str], name: str) -> str:
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def health_test(service: dict[str, Any]) -> list[str]:
    test = service["healthcheck"]["test"]
    assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL"), test
    return [str(part) for part in test[1:]]


def test_the_topology(services: dict[str, Any], compose: dict[str, Any]) -> None:
    assert set(services) == {"redis", "nginx", *REPLICAS}
    assert set(compose["volumes"]) == {"redis-data", "effects"}


def test_redis_keeps_an_append_only_file_and_is_health_checked(services: dict[str, Any]) -> None:
    redis = services["redis"]
    command = command_of(redis)
    assert command[0] == "redis-server"
    assert option(command, "--appendonly") == "yes"
    assert option(command, "--appendfsync") in ("always", "everysec")
    assert any(v.endswith(":/data") for v in redis["volumes"]), "AOF must live on a volume"
    assert health_test(redis) == ["redis-cli", "ping"]
    assert "ports" not in redis, "Redis is reached by the replicas only"


def test_every_replica_runs_the_example_server_from_the_repository_image(
    services: dict[str, Any],
) -> None:
    for name in REPLICAS:
        replica = services[name]
        assert replica["build"]["context"] == "."
        assert (ROOT / replica["build"].get("dockerfile", "Dockerfile")).is_file()
        command = command_of(replica)
        assert command[:4] == ["python", "-m", "engine", "serve"]
        assert (ROOT / command[4]).is_file(), command[4]
        assert option(command, "--host") == "0.0.0.0"
        assert int(option(command, "--port")) == COMPOSE_REPLICA_PORT
        assert "--keys" not in command, "keys come from the environment, not the command line"
        assert "ports" not in replica, "replicas are reached through nginx only"
        assert replica["depends_on"]["redis"]["condition"] == "service_healthy"
        assert replica["stop_signal"] == "SIGTERM"


def test_replica_environment_uses_names_the_code_reads(services: dict[str, Any]) -> None:
    read_by_engine = env_names_read(ROOT / "engine")
    read_by_example = env_names_read(ROOT / "examples" / "fleet_server.py")
    assert {"ENGINE_KEYS", "ENGINE_STORE", "ENGINE_REPLICA_ID", "ENGINE_ALLOWED_HOSTS"} <= (
        read_by_engine
    )
    assert {"ENGINE_ACCESS_LOG", "ENGINE_GC_FREEZE"} <= read_by_engine
    for name in REPLICAS:
        environment = services[name]["environment"]
        assert isinstance(environment, dict), "environment as a mapping"
        unknown = set(environment) - read_by_engine - read_by_example
        assert not unknown, f"{name} sets variables nothing reads: {unknown}"
        assert {"ENGINE_KEYS", "ENGINE_STORE", "ENGINE_REPLICA_ID"} <= set(environment)


def test_replicas_share_keys_and_store_and_have_distinct_ids(services: dict[str, Any]) -> None:
    environments = [services[name]["environment"] for name in REPLICAS]
    keys = {env["ENGINE_KEYS"] for env in environments}
    assert len(keys) == 1
    [reference] = keys
    assert re.fullmatch(r"\$\{ENGINE_KEYS:\?[^}]+\}", reference), (
        "every replica takes the same key from the environment, and compose refuses to start "
        f"without one: {reference!r}"
    )
    assert len({env["ENGINE_STORE"] for env in environments}) == 1
    ids = [env["ENGINE_REPLICA_ID"] for env in environments]
    assert ids == REPLICAS, "distinct replica ids, named like their services"


def test_the_store_url_is_the_redis_service(services: dict[str, Any]) -> None:
    url = urlsplit(services[REPLICAS[0]]["environment"]["ENGINE_STORE"])
    assert url.scheme == "redis"
    assert url.hostname == "redis"
    assert url.port == 6379
    assert parse_qs(url.query).get("prefix"), "a key prefix, so Redis can be shared"


def test_replica_health_checks_hit_the_healthz_route(services: dict[str, Any]) -> None:
    http_source = (ROOT / "engine" / "transports" / "http.py").read_text()
    assert '"/healthz"' in http_source, "the HTTP app serves /healthz"
    for name in REPLICAS:
        test = " ".join(health_test(services[name]))
        assert f"http://127.0.0.1:{COMPOSE_REPLICA_PORT}/healthz" in test, test
        check = services[name]["healthcheck"]
        assert check["interval"] and check["retries"] >= 1


def test_nginx_is_in_front_on_8080_once_replicas_are_healthy(services: dict[str, Any]) -> None:
    nginx = services["nginx"]
    published = [str(p) for p in nginx["ports"]]
    assert [p.rsplit(":", 2)[-2:] for p in published] == [
        [str(COMPOSE_NGINX_PORT), str(COMPOSE_NGINX_PORT)]
    ]
    assert nginx["depends_on"] == {r: {"condition": "service_healthy"} for r in REPLICAS}
    assert f"http://127.0.0.1:{COMPOSE_NGINX_PORT}/nginx-healthz" in health_test(nginx)
    image, _, tag = nginx["image"].partition(":")
    assert image == "nginx"
    major, minor = (int(part) for part in re.findall(r"\d+", tag)[:2])
    assert (major, minor) >= (1, 28), "upstream `resolve` needs nginx 1.27.3 or later"


def test_nginx_mounts_the_rendered_template(services: dict[str, Any]) -> None:
    [mount] = services["nginx"]["volumes"]
    source, target, mode = mount.split(":")
    assert (target, mode) == ("/etc/nginx/nginx.conf", "ro")
    conf = (ROOT / source).read_text()
    assert conf == render_compose_nginx(), (
        "deploy/nginx.conf is stale: regenerate it with python -c 'from deploy.fleet import "
        'render_compose_nginx as r; open("deploy/nginx.conf", "w").write(r())\''
    )
    servers = re.findall(r"^\s*server (\S+) ", conf, flags=re.MULTILINE)
    assert servers == [f"{name}:{COMPOSE_REPLICA_PORT}" for name in REPLICAS]
    assert re.search(rf"^\s*listen {COMPOSE_NGINX_PORT}\b[^;]*;", conf, flags=re.MULTILINE)
    for directive in (
        "proxy_http_version 1.1;",
        "proxy_buffering off;",
        "proxy_next_upstream error timeout http_502 http_503;",
        "keepalive 256;",
        "worker_processes auto;",
        "worker_connections 16384;",
        "worker_rlimit_nofile 32768;",
    ):
        assert directive in conf


def test_the_dockerfile_serves_what_compose_expects() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"EXPOSE {COMPOSE_REPLICA_PORT}" in dockerfile
    assert f"http://127.0.0.1:{COMPOSE_REPLICA_PORT}/healthz" in dockerfile
    assert "STOPSIGNAL SIGTERM" in dockerfile
    assert '"examples/fleet_server.py"' in dockerfile
    for copied in ("pyproject.toml", r"ci/constraints\.txt", "engine", "stores", "examples"):
        assert re.search(rf"^COPY .*\b{copied}\b", dockerfile, flags=re.MULTILINE), copied
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv*", "tests"} <= set(ignored)
    assert not {"engine", "stores", "examples", "pyproject.toml"} & set(ignored)
    assert "!.ci/constraints.txt" in ignored  # the image installs the tested versions
    assert "-c constraints.txt" in dockerfile
