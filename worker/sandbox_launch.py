"""The first process inside a sandbox with forwards: listen on loopback ports, relay each connection to a Unix
socket outside, then run the command and exit with its status.

    python -I -S sandbox_launch.py PORT=SOCKET [PORT=SOCKET ...] -- COMMAND...

Under `--unshare-net` the sandbox has its own loopback and nothing else: a port listened on here is the only
way out, and it leads to one socket ga serves (the model gateway, an egress proxy). Standard library only,
started with -I -S, so it costs one bare interpreter start-up.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def main(argv: list[str]) -> int:
    split = argv.index("--")
    for spec in argv[:split]:
        port, _, path = spec.partition("=")
        listener = socket.create_server(("127.0.0.1", int(port)), backlog=64)
        threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    child = subprocess.Popen(argv[split + 1:])  # listening already: the script can connect at once
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says it


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
