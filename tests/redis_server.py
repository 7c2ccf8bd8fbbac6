"""Run a command with a Redis server of its own: a private ``redis-server`` on a free port.

Usage: ``python tests/redis_server.py -- COMMAND ...``. Exports ``ENGINE_TEST_REDIS_URL`` to the
command. The tests never write to a Redis that is already running (a developer's or a shared
one) unless told to with ``ENGINE_TEST_REDIS=redis://host:port/db``; without that and without
a ``redis-server`` binary, the Redis tests fail under ``ENGINE_REQUIRE_REDIS=1`` (CI) and are
skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    env = dict(os.environ)
    server: subprocess.Popen[bytes] | None = None
    workdir = None
    told = env.get("ENGINE_TEST_REDIS")
    if told:
        env["ENGINE_TEST_REDIS_URL"] = told
    elif "ENGINE_TEST_REDIS_URL" in env:
        pass  # an outer run already started one
    elif shutil.which("redis-server"):
        port = _free_port()
        workdir = tempfile.mkdtemp(prefix="engine-redis-")
        server = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not _answers("127.0.0.1", port):
            if time.monotonic() > deadline or server.poll() is not None:
                print("redis-server did not start", file=sys.stderr)
                return 2
            time.sleep(0.05)
        env["ENGINE_TEST_REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    else:
        print(
            "no redis-server installed: the Redis tests cannot run (install redis-server, or "
            "set ENGINE_TEST_REDIS=redis://host:port/db to use a server you choose)",
            file=sys.stderr,
        )
    try:
        return subprocess.call(command, env=env)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
