"""A transparent stdio hop that records the JSON-RPC lines passing through it.

``python stdio_tap.py LOG -- COMMAND ARGS...`` runs COMMAND with its stdin and stdout piped
through this process, byte for byte, and appends every line to LOG as ``> line`` (client to
server) or ``< line`` (server to client). Its stderr is COMMAND's. It exits with COMMAND's exit
status, forwards SIGTERM/SIGINT, and closes COMMAND's stdin when its own stdin ends.

It lets a test see what a client received when the client's own output leaves it out (the
Inspector CLI prints a JSON-RPC error's message but not its code).
"""

import contextlib
import signal
import subprocess
import sys
import threading


def main() -> int:
    log_path, sep, *command = sys.argv[1:]
    assert sep == "--" and command, __doc__
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the process
    lock = threading.Lock()
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def record(mark: bytes, line: bytes) -> None:
        with lock:
            log.write(mark + line if line.endswith(b"\n") else mark + line + b"\n")

    def pump(source, sink, mark: bytes) -> None:  # type: ignore[no-untyped-def]
        try:
            for line in iter(source.readline, b""):
                record(mark, line)
                sink.write(line)
                sink.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.close()

    def forward(signum: int, frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    inbound = threading.Thread(
        target=pump, args=(sys.stdin.buffer, child.stdin, b"> "), daemon=True
    )
    outbound = threading.Thread(
        target=pump, args=(child.stdout, sys.stdout.buffer, b"< "), daemon=True
    )
    inbound.start()
    outbound.start()
    code = child.wait()
    outbound.join(5)
    return code


if __name__ == "__main__":
    sys.exit(main())
