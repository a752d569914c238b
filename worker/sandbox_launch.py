"""The first process inside a sandbox with forwards: listen on loopback ports, relay each connection to a Unix
socket outside, and become the command.

    python -I -S sandbox_launch.py PORT=SOCKET [PORT=SOCKET ...] -- COMMAND...

Under `--unshare-net` the sandbox has its own loopback and nothing else: a port listened on here is the only
way out, and it leads to one socket ga serves (the model gateway, an egress proxy). The listeners are bound
before the command starts; a forked child relays, and this process execs the command, so the command's exit
status and signals are the sandbox's as without forwards. The relay ends when the command does: it watches
for its parent (the command, after the exec) to go, because bubblewrap's init waits for every child before it
ends the sandbox, so a relay left waiting on its listeners would keep a sandbox alive whose command a reaper
killed after ga itself died.
Only built-in modules, started with -I -S: one bare interpreter start-up is its whole cost.
"""
import _signal  # pyright: ignore[reportMissingImports]  # a built-in module typeshed has no stubs for
import _socket
import _thread
import os
import sys
import time

CHUNK = 65536
WATCH_SECONDS = 0.5  # how often the relay looks whether the command is still its parent


def main(argv: list) -> None:
    split = argv.index("--")
    forwards = []
    for spec in argv[:split]:
        port, _, path = spec.partition("=")
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(64)
        forwards.append((listener, path))
    command = os.getpid()
    if os.fork() == 0:
        _relay_while(forwards, command)
    for listener, _ in forwards:
        listener.close()
    for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these, and an ignored signal stays ignored across exec
        _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    os.execvp(argv[split + 1], argv[split + 1:])


def _relay_while(forwards: list, command: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the script's output file stays the script's
        os.dup2(null, fd)
    for listener, path in forwards:
        _thread.start_new_thread(_accept, (listener, path))
    while os.getppid() == command:  # once the command is gone this process is re-parented
        time.sleep(WATCH_SECONDS)
    os._exit(0)


def _accept(listener: _socket.socket, path: str) -> None:
    while True:
        # the C socket's accept, missing from typeshed: a file descriptor (socket.py is not imported)
        fd, _ = listener._accept()  # pyright: ignore[reportAttributeAccessIssue]
        client = _socket.socket(fileno=fd)
        # a reply relayed in two writes (head, body) must not wait for the client's delayed ACK (Nagle: ~40 ms)
        client.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        _thread.start_new_thread(_connect, (client, path))


def _connect(client: _socket.socket, path: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(_pipe, (upstream, client, done))
    _pipe(client, upstream, None)
    done.acquire()
    client.close()
    upstream.close()


def _pipe(source: _socket.socket, target: _socket.socket, done) -> None:
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    if done is not None:
        done.release()


if __name__ == "__main__":
    main(sys.argv[1:])
