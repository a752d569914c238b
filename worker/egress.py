"""The egress proxy of `sandbox.network: [host, ...]`: a small HTTP(S) proxy ga runs outside the sandbox, on a
Unix socket the sandbox reaches through a loopback forward (worker/sandbox.py Policy.forwards).

It admits `CONNECT host:port` (HTTPS, and any TLS) and plain-HTTP requests in absolute form (`GET http://host/...`)
for hosts on the list, by name: it resolves names itself, so the sandbox needs no DNS (it has none: its network
is its own loopback). Everything else gets `403` and one line saying which host was refused and why.
"""
from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Optional
from urllib.parse import urlsplit

import structlog

from configs.logs import in_context

log = structlog.get_logger("worker.egress")
PORT = 3128  # the proxy's port inside every sandbox (each has its own loopback)
MAX_HEAD = 64 * 1024  # a request line and headers longer than this are refused
CONNECT_TIMEOUT = 30.0
CHUNK = 65536
DROPPED_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


class EgressProxy:
    """One allow-list served on one Unix socket by an event loop in a daemon thread."""

    def __init__(self, hosts: Iterable[str], socket_path: Path) -> None:
        self.hosts = frozenset(_normal(h) for h in hosts)
        self.socket_path = socket_path
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=in_context(self._serve), args=(ready,), name="ga-egress", daemon=True)
        self._thread.start()
        ready.wait()

    def allows(self, host: str) -> bool:
        """A listed name, or a name under a listed `*.domain` (the domain itself included)."""
        name = _normal(host)
        labels = name.split(".")
        return name in self.hosts or any("*." + ".".join(labels[i:]) in self.hosts for i in range(len(labels)))

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_unix_server(self._client, path=str(self.socket_path), limit=MAX_HEAD))
        self.socket_path.chmod(0o666)  # the sandbox may run as another uid inside its user namespace
        ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        try:
            await self._forward(head, reader, writer)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            pass
        finally:
            writer.close()

    async def _forward(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line, _, headers = head.partition(b"\r\n")
        parts = request_line.decode("latin-1").split(" ")
        if len(parts) != 3:
            return await _answer(writer, 400, "ga egress proxy: malformed request line")
        method, target, version = parts
        if method.upper() == "CONNECT":
            host, port = _host_port(target, default=443)
            first = b""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                return await _answer(writer, 400, f"ga egress proxy: expected CONNECT or an http:// URL, got "
                                                  f"{target[:100]!r} (HTTPS goes through CONNECT)")
            host, port = url.hostname, url.port or 80
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            kept = [line for line in headers.split(b"\r\n")
                    if line and line.split(b":", 1)[0].strip().lower() not in DROPPED_HEADERS]
            first = b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close",
                                  b"", b""])
        if host is None:
            return await _answer(writer, 400, f"ga egress proxy: no host in {target[:100]!r}")
        if not self.allows(host):
            log.warning("egress_refused", host=host[:253], port=port)
            return await _answer(writer, 403, f"ga egress proxy: {host[:253]} is not on the allow-list "
                                              "(sandbox.network); add it there to allow it")
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            return await _answer(writer, 502, f"ga egress proxy: cannot reach {host}:{port} ({exc})"[:300])
        if first:
            upstream_writer.write(first)
        else:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            upstream_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _answer(writer: asyncio.StreamWriter, status: int, line: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (line + "\n").encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + body)
    await writer.drain()


def _host_port(target: str, default: int) -> tuple[Optional[str], int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return (target or None), default
    return host.strip("[]") or None, int(port)


def _normal(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


_proxies: dict[frozenset[str], EgressProxy] = {}
_lock = threading.Lock()


def proxy_for(hosts: Iterable[str]) -> Path:
    """The socket of this process's proxy for this allow-list (started on first use, kept for the process's life)."""
    key = frozenset(_normal(h) for h in hosts)
    with _lock:
        if key not in _proxies:
            folder = Path(tempfile.mkdtemp(prefix="ga-egress-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _proxies[key] = EgressProxy(key, folder / "proxy.sock")
        return _proxies[key].socket_path


def sandbox_env() -> dict[str, str]:
    """The proxy variables for a script whose sandbox forwards PORT to the proxy; loopback stays direct (inside
    the sandbox it is the sandbox's own, where ga's other forwards listen)."""
    url = f"http://127.0.0.1:{PORT}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")
    direct = "127.0.0.1,localhost,::1"
    return {**{name: url for name in names}, "NO_PROXY": direct, "no_proxy": direct}
