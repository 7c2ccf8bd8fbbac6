"""The docker-compose topology with local processes: Redis, engine replicas, nginx in front.

``python deploy/fleet.py`` starts

- a Redis store: the one answering on 127.0.0.1:6379 (with a private key prefix, removed
  again on exit), or a fresh ``redis-server`` with AOF (``appendfsync always``) on a free port
  when none answers or when asked (``--redis private``);
- three ``python -m engine serve examples/fleet_server.py`` replicas (``--server`` names
  another file) on free loopback ports, sharing one generated key (``ENGINE_KEYS``, also
  written to ``keys`` in the fleet's directory for the journal commands) and the store URL
  (``ENGINE_STORE``), each with its own ``--replica`` id;
- nginx (installed with ``apt-get install -y nginx`` when missing) with a round-robin upstream
  over them, rendered from ``deploy/nginx.conf.template`` into a private directory and run as
  ``nginx -c <conf> -p <dir>`` in the foreground;

prints the MCP URL and how to read its calls' journal, and waits until interrupted (Ctrl-C or
SIGTERM), then stops everything.
``--once`` starts, checks ``/healthz`` through nginx, and stops. Everything listens on loopback.

Tests use the same thing as a context manager::

    with Fleet(redis="private") as fleet:
        fleet.url            # http://127.0.0.1:PORT/mcp, through nginx
        fleet.replicas       # {"fleet-1": Replica, ...}: ports, processes, logs
        fleet.kill_redis(); fleet.start_redis()
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "nginx.conf.template"
LOOPBACK = "127.0.0.1"
DEFAULT_SERVER = "examples/fleet_server.py"
SHARED_REDIS = (LOOPBACK, 6379)
RedisMode = Literal["auto", "shared", "private"]

UPSTREAM_OPTIONS = "max_fails=1 fail_timeout=2s"
"""Passive health checks: one failed connection takes a replica out of rotation for 2 s."""


class FleetError(RuntimeError):
    """The fleet could not start; the message says which part and why."""


# --- small utilities ------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (each socket stays bound until all are chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def redis_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a Redis server answers PING (a loading or refusing one does not)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes, dict[str, str]]:
    """GET ``http://127.0.0.1:port/path``: status, body, headers (lower-case names)."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, response.read(), headers
    finally:
        connection.close()


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals, timeout: float) -> int:
    """Signal ``process`` and wait; SIGKILL when it outlives ``timeout``. Its exit code."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout)
    return int(process.returncode)


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "<no log>"


# --- nginx ----------------------------------------------------------------------------------------


def render_nginx(
    *,
    listen: str,
    servers: Sequence[str],
    workers: str = "auto",
    main: Sequence[str] = (),
    access_log: str,
    temp_dir: str | None = None,
    resolver: str | None = None,
) -> str:
    """``deploy/nginx.conf.template`` with its placeholders filled in.

    ``servers`` are ``host:port`` upstreams; ``main`` are top-level directives (pid, error_log,
    daemon); ``temp_dir`` puts nginx's temporary paths there (needed when not running from the
    package's default prefix). With a ``resolver`` (a DNS server address), upstream names are
    re-resolved while nginx runs (``resolve``, nginx 1.27.3 and later), so a replica container
    that comes back with a new address is found again.
    """
    temp = ""
    if temp_dir is not None:
        temp = "".join(
            f"    {kind}_temp_path {temp_dir}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
    options = UPSTREAM_OPTIONS + (" resolve" if resolver is not None else "")
    upstreams = "\n".join(f"        server {server} {options};" for server in servers)
    text = TEMPLATE.read_text()
    for name, value in {
        "WORKERS": workers,
        "MAIN": "\n".join(main),
        "ACCESS_LOG": access_log,
        "TEMP_PATHS": temp.rstrip("\n"),
        "SERVERS": upstreams,
        "RESOLVER": f"    resolver {resolver} valid=5s ipv6=off;" if resolver is not None else "",
        "LISTEN": listen,
    }.items():
        text = text.replace(f"@@{name}@@", value)
    if "@@" in text:
        raise ValueError("deploy/nginx.conf.template has a placeholder render_nginx does not fill")
    return text


COMPOSE_REPLICAS = ("replica-1", "replica-2", "replica-3")
COMPOSE_REPLICA_PORT = 8000
COMPOSE_NGINX_PORT = 8080
DOCKER_DNS = "127.0.0.11"
"""Docker's embedded DNS server, inside every container on a user-defined network."""


def render_compose_nginx() -> str:
    """The configuration docker-compose.yml mounts as ``deploy/nginx.conf``."""
    return render_nginx(
        listen=str(COMPOSE_NGINX_PORT),
        servers=[f"{name}:{COMPOSE_REPLICA_PORT}" for name in COMPOSE_REPLICAS],
        workers="auto",
        main=["error_log /dev/stderr warn;", "pid /var/run/nginx.pid;"],
        access_log="/dev/stdout",
        resolver=DOCKER_DNS,
    )


def find_nginx(install: bool = True) -> str:
    """The nginx binary; installed from Debian's packages when missing and ``install``."""
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if found:
        return found
    if not install:
        raise FleetError("nginx is not installed: apt-get install -y nginx")
    if os.geteuid() != 0:
        raise FleetError("nginx is not installed and this is not root: sudo apt-get install nginx")
    print("nginx is missing: apt-get install -y nginx", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "nginx"]
    if subprocess.call(command, env=env, stdout=subprocess.DEVNULL) != 0:
        subprocess.check_call(["apt-get", "update", "-qq"], env=env)
        subprocess.check_call(command, env=env, stdout=subprocess.DEVNULL)
    return find_nginx(install=False)


# --- the parts ------------------------------------------------------------------------------------


@dataclass
class Replica:
    """One ``python -m engine serve`` process."""

    name: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"replica {self.name} is not running"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None, f"replica {self.name} was never started"
        self.process.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit; its exit code (negative: killed by that signal)."""
        assert self.process is not None, f"replica {self.name} was never started"
        return int(self.process.wait(timeout))

    def log(self) -> str:
        return _tail(self.log_path, 1_000_000)

    def log_tail(self, chars: int = 3000) -> str:
        return _tail(self.log_path, chars)


@dataclass
class RedisServer:
    """A private ``redis-server`` with AOF on every write, which a test may kill and restart."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def start(self, timeout: float = 15.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FleetError("redis-server is not installed: apt-get install -y redis-server")
        self.directory.mkdir(parents=True, exist_ok=True)
        log = (self.directory / "redis.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    LOOPBACK,
                    "--dir",
                    str(self.directory),
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not redis_answers(LOOPBACK, self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise FleetError(f"redis-server did not start:\n{self.log_tail()}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no shutdown save, so only what AOF already holds survives."""
        if self.process is not None:
            _stop(self.process, signal.SIGKILL, 10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, signal.SIGTERM, 10)
            self.process = None

    def log_tail(self, chars: int = 3000) -> str:
        return _tail(self.directory / "redis.log", chars)


@dataclass
class Nginx:
    """nginx in the foreground with a generated configuration in a private prefix."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> Path:
        return self.directory / "nginx.conf"

    @property
    def error_log(self) -> Path:
        return self.directory / "error.log"

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    def write_conf(self, upstream_ports: Sequence[int]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "temp").mkdir(exist_ok=True)
        self.conf.write_text(
            render_nginx(
                listen=f"{LOOPBACK}:{self.port}",
                servers=[f"{LOOPBACK}:{port}" for port in upstream_ports],
                main=[
                    "daemon off;",
                    "master_process on;",
                    f"pid {self.directory}/nginx.pid;",
                    f"error_log {self.error_log} notice;",
                ],
                access_log=str(self.access_log),
                temp_dir=str(self.directory / "temp"),
            )
        )

    def start(self, binary: str, timeout: float = 10.0) -> None:
        base = [binary, "-p", f"{self.directory}/", "-c", str(self.conf), "-e", str(self.error_log)]
        checked = subprocess.run([*base, "-t", "-q"], capture_output=True, text=True)
        if checked.returncode != 0:
            raise FleetError(f"nginx rejected {self.conf}:\n{checked.stderr}")
        with (self.directory / "nginx.out").open("ab") as out:
            self.process = subprocess.Popen(
                base,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise FleetError(f"nginx exited at start:\n{_tail(self.error_log)}")
            with contextlib.suppress(OSError):
                if http_get(self.port, "/nginx-healthz", timeout=0.5)[0] == 200:
                    return
            if time.monotonic() > deadline:
                raise FleetError(f"nginx did not answer within {timeout}s")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, signal.SIGTERM, 10)
            self.process = None


# --- the fleet ------------------------------------------------------------------------------------


@dataclass
class Fleet:
    """Redis, ``replicas`` engine processes and nginx, on loopback; a context manager."""

    replicas_count: int = 3
    redis: RedisMode = "auto"
    port: int = 0
    """nginx's port; 0 picks a free one."""
    server: str = DEFAULT_SERVER
    workdir: Path | None = None
    install_nginx: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the replicas."""
    replica_envs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Extra environment for one replica, by name (``fleet-3``: a clock set ahead, say)."""
    keys: str = field(default_factory=lambda: secrets.token_hex(32))
    prefix: str = field(default_factory=lambda: f"fleet-{secrets.token_hex(4)}")
    """The Redis key prefix: the fleet's keys never mix with anyone else's on a shared server."""

    replicas: dict[str, Replica] = field(init=False, default_factory=dict)
    private_redis: RedisServer | None = field(init=False, default=None)
    nginx: Nginx | None = field(init=False, default=None)
    store_url: str = field(init=False, default="")
    _stack: contextlib.ExitStack = field(init=False, default_factory=contextlib.ExitStack)
    _owns_workdir: bool = field(init=False, default=False)

    # --- addresses ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self.nginx is not None, "the fleet is not running"
        return f"http://{LOOPBACK}:{self.nginx.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint, through nginx."""
        return f"{self.base_url}/mcp"

    @property
    def effects_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "effects"

    @property
    def keys_file(self) -> Path:
        """The fleet's generated key, as ``--keys-file`` takes it: the journal commands need it
        to open the fleet's calls (the replicas get it as ``ENGINE_KEYS``)."""
        assert self.workdir is not None
        return self.workdir / "keys"

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Fleet:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="engine-fleet-"))
            self._owns_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.keys_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as keys:
            keys.write(self.keys + "\n")
        nginx_binary = find_nginx(self.install_nginx)
        self._start_store()
        names = [f"fleet-{n}" for n in range(1, self.replicas_count + 1)]
        ports = free_ports(len(names) + (0 if self.port else 1))
        nginx_port = self.port or ports.pop()
        for name, port in zip(names, ports, strict=True):
            self.replicas[name] = Replica(name, port, self.workdir / "logs" / f"{name}.log")
        for name in names:
            self.start_replica(name, wait=False)
        for name in names:
            self.wait_healthy(name)
        self.nginx = Nginx(nginx_port, self.workdir / "nginx")
        self.nginx.write_conf([r.port for r in self.replicas.values()])
        self.nginx.start(nginx_binary)
        status, body, _ = http_get(self.nginx.port, "/healthz")
        if status != 200:
            raise FleetError(f"/healthz through nginx answered {status}: {body!r}")

    def stop(self) -> None:
        """nginx first (no new traffic), then the replicas (they drain), then the store."""
        if self.nginx is not None:
            self.nginx.stop()
        for replica in self.replicas.values():
            if replica.process is not None:
                _stop(replica.process, signal.SIGTERM, 15)
        if self.private_redis is not None:
            self.private_redis.stop()
        self._stack.close()
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _start_store(self) -> None:
        assert self.workdir is not None
        mode = self.redis
        if mode == "auto":
            mode = "shared" if redis_answers(*SHARED_REDIS) else "private"
        if mode == "shared":
            if not redis_answers(*SHARED_REDIS):
                raise FleetError("no Redis answers on 127.0.0.1:6379 (use redis='private')")
            self.store_url = f"redis://{SHARED_REDIS[0]}:{SHARED_REDIS[1]}/0?prefix={self.prefix}"
            self._stack.callback(self._forget_shared_keys)
            return
        self.private_redis = RedisServer(free_ports(1)[0], self.workdir / "redis")
        self.private_redis.start()
        self.store_url = f"{self.private_redis.url}?prefix={self.prefix}"

    def _forget_shared_keys(self) -> None:
        """Remove this fleet's keys from the shared Redis (they would expire, but later)."""
        import redis

        client = redis.Redis(*SHARED_REDIS, socket_timeout=5)
        try:
            batch: list[bytes] = []
            for key in client.scan_iter(match=f"{self.prefix}:*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    client.unlink(*batch)
                    batch.clear()
            if batch:
                client.unlink(*batch)
        except redis.RedisError as exc:
            print(f"could not remove the fleet's Redis keys: {exc}", file=sys.stderr)
        finally:
            client.close()

    # --- replicas -----------------------------------------------------------------------------

    def replica_env(self, name: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ENGINE_") and k != "FLEET_EFFECTS_DIR"
        }
        env.update(
            ENGINE_KEYS=self.keys,
            ENGINE_STORE=self.store_url,
            ENGINE_REPLICA_ID=name,
            ENGINE_STAMP_RESULTS="1",
            FLEET_EFFECTS_DIR=str(self.effects_dir),
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            PYTHONUNBUFFERED="1",
        )
        env.update(self.env)
        env.update(self.replica_envs.get(name, {}))
        return env

    def start_replica(self, name: str, wait: bool = True) -> Replica:
        """Start (or start again, on the same port) the replica ``name``."""
        replica = self.replicas[name]
        if replica.alive():
            raise FleetError(f"replica {name} is already running")
        replica.log_path.parent.mkdir(parents=True, exist_ok=True)
        with replica.log_path.open("ab") as log:
            replica.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "engine",
                    "serve",
                    self.server,
                    "--host",
                    LOOPBACK,
                    "--port",
                    str(replica.port),
                    "--replica",
                    name,
                ],
                cwd=ROOT,
                env=self.replica_env(name),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_healthy(name)
        return replica

    def wait_healthy(self, name: str, timeout: float = 30.0) -> None:
        """Wait until the replica answers ``/healthz`` with 200 (process up, store reachable)."""
        replica = self.replicas[name]
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            if not replica.alive():
                raise FleetError(f"replica {name} exited:\n{replica.log_tail()}")
            try:
                status, body, _ = http_get(replica.port, "/healthz", timeout=1.0)
            except OSError as exc:
                last = repr(exc)
            else:
                if status == 200:
                    return
                last = f"{status} {body!r}"
            if time.monotonic() > deadline:
                raise FleetError(f"replica {name} not healthy within {timeout}s: {last}")
            time.sleep(0.05)

    def metrics(self, name: str) -> dict[str, float]:
        """A replica's ``/metrics``, summed per metric name (labels folded)."""
        status, body, _ = http_get(self.replicas[name].port, "/metrics")
        if status != 200:
            raise FleetError(f"/metrics of {name} answered {status}")
        totals: dict[str, float] = {}
        for line in body.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            sample, _, value = line.rpartition(" ")
            metric = sample.split("{", 1)[0]
            totals[metric] = totals.get(metric, 0.0) + float(value)
        return totals

    def health(self) -> tuple[int, dict[str, object]]:
        """``/healthz`` through nginx: the status and the answering replica's details."""
        assert self.nginx is not None
        status, body, _ = http_get(self.nginx.port, "/healthz")
        details: dict[str, object] = json.loads(body) if body.startswith(b"{") else {}
        return status, details

    # --- the store ----------------------------------------------------------------------------

    def kill_redis(self) -> None:
        """SIGKILL the private Redis (only a fleet started with ``redis='private'`` has one)."""
        if self.private_redis is None:
            raise FleetError("this fleet uses a shared Redis; start it with redis='private'")
        self.private_redis.kill()

    def start_redis(self) -> None:
        if self.private_redis is None:
            raise FleetError("this fleet uses a shared Redis; start it with redis='private'")
        self.private_redis.start()

    def describe(self) -> str:
        lines = [f"MCP endpoint (nginx, round-robin): {self.url}"]
        for replica in self.replicas.values():
            lines.append(f"  {replica.name}: {replica.url}  (log {replica.log_path})")
        lines.append(f"  store: {self.store_url}")
        if self.nginx is not None:
            lines.append(f"  nginx: {self.nginx.conf}  (access log {self.nginx.access_log})")
        lines.append(f"  side effects: {self.effects_dir}")
        lines.append(f"  keys: {self.keys_file}  (removed with the fleet)")
        journal = f"--store '{self.store_url}' --keys-file {self.keys_file}"
        lines.append("The fleet's calls, while it runs:")
        lines.append(f"  python -m engine calls {journal}")
        lines.append(f"  python -m engine show CALL_ID {journal}")
        return "\n".join(lines)


# --- command line ---------------------------------------------------------------------------------


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Let the teardown finish even if Ctrl-C is pressed again."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--port", type=int, default=8080, help="nginx's port (0: any free one)")
    parser.add_argument("--redis", choices=["auto", "shared", "private"], default="auto")
    parser.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help=f"FILE.py[:ATTR] every replica serves (default {DEFAULT_SERVER})",
    )
    parser.add_argument("--once", action="store_true", help="start, check /healthz, stop")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    fleet = Fleet(
        replicas_count=args.replicas, redis=args.redis, port=args.port, server=args.server
    )
    try:
        fleet.start()
        print(fleet.describe(), flush=True)
        status, details = fleet.health()
        print(f"/healthz through nginx: {status} {json.dumps(details)}", flush=True)
        if args.once:
            return 0 if status == 200 else 1
        print("Ctrl-C stops the fleet.", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping the fleet", flush=True)
        return 0
    except FleetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        with _no_interrupts():
            fleet.stop()


if __name__ == "__main__":
    sys.exit(main())
