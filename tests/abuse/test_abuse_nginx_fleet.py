"""A thousand clients at once through the fleet's nginx all get their answer: nginx (rendered from
``deploy/nginx.conf.template`` by ``deploy/fleet.py``) in front of two ``python -m engine serve``
replicas and a private Redis, all local loopback processes.

Every client opens its connection first and keeps it open; then each sends one tool call that
holds its round for a moment, so nginx carries a thousand client connections and up to a
thousand upstream ones at the same time. None may be reset or answered 502.
"""

import json
import resource
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
import pytest

from deploy.fleet import Fleet
from tests.http_helpers import call, headers_for

pytestmark = pytest.mark.anyio

CLIENTS = 1000
HOLD_SECONDS = 0.5

SERVER = """
import anyio

from engine import MCPServer

mcp = MCPServer("Crowd")


@mcp.tool()
async def hold(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "held"
"""


@pytest.fixture
def descriptors() -> Iterator[None]:
    """Room in this process for a thousand client sockets (the soft limit may be 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * CLIENTS if hard == resource.RLIM_INFINITY else min(hard, 4 * CLIENTS)
    if wanted < CLIENTS + 200:
        pytest.fail(f"the open file limit ({hard}) is too low for {CLIENTS} clients: ulimit -n")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def fleet(tmp_path: Path, descriptors: None) -> Iterator[Fleet]:
    app = tmp_path / "crowd_app.py"
    app.write_text(textwrap.dedent(SERVER))
    with Fleet(
        replicas_count=2, redis="private", server=str(app), workdir=tmp_path, install_nginx=False
    ) as started:
        yield started


def raw_request(port: int) -> bytes:
    body = call("hold", {"seconds": HOLD_SECONDS})
    content = json.dumps(body).encode()
    headers = {**headers_for(body), "Host": f"127.0.0.1:{port}", "Content-Length": len(content)}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + content


async def read_response(stream: anyio.abc.ByteStream) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length: its status and body."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += await stream.receive()
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    length = int(fields["content-length"])
    while len(body) < length:
        body += await stream.receive()
    return int(lines[0].split()[1]), body


async def test_a_thousand_concurrent_clients_through_nginx_all_get_their_answer(
    fleet: Fleet,
) -> None:
    assert fleet.nginx is not None
    port = fleet.nginx.port
    message = raw_request(port)
    outcomes: Counter[str] = Counter()
    connected = anyio.Event()
    tried = 0

    def tried_to_connect() -> None:
        nonlocal tried
        tried += 1
        if tried == CLIENTS:
            connected.set()

    async def client() -> None:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError as exc:
            outcomes[f"connect: {exc!r}"] += 1
            tried_to_connect()
            return
        async with stream:
            tried_to_connect()
            await connected.wait()  # every connection is open before any request is sent
            try:
                await stream.send(message)
                status, body = await read_response(stream)
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
                outcomes[f"{type(exc).__name__}"] += 1
                return
            if status != 200:
                outcomes[f"HTTP {status}"] += 1
                return
            result = json.loads(body)["result"]
            outcomes["held" if result["content"][0]["text"] == "held" else repr(result)] += 1

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for _ in range(CLIENTS):
                tg.start_soon(client)
    errors = fleet.nginx.error_log.read_text(errors="replace")
    assert outcomes == Counter({"held": CLIENTS}), (outcomes, errors[-2000:])
    assert "worker_connections are not enough" not in errors
