"""Run a command with a reachable Redis server, starting a private one when none answers.

Usage: ``python tests/redis_server.py -- COMMAND ...``. Exports ``ENGINE_TEST_REDIS_URL`` to the
command. Redis tests use their own key prefix, so sharing the machine's server is safe.
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
    if "ENGINE_TEST_REDIS_URL" not in env:
        if _answers("127.0.0.1", 6379):
            env["ENGINE_TEST_REDIS_URL"] = "redis://127.0.0.1:6379/0"
        elif shutil.which("redis-server"):
            port = _free_port()
            workdir = tempfile.mkdtemp(prefix="engine-redis-")
            print(f"no Redis on 127.0.0.1:6379; starting redis-server on port {port}", flush=True)
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
            print("no Redis reachable and no redis-server installed", file=sys.stderr)
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
