"""Steering requests to a run on the in-process executor, as files in its run directory.

`ga runs tell/stop` (another process) writes `steer/<id>.json`; the driver's Mailbox thread answers each
with `steer/<id>.reply` and removes the request; the asker reads the reply and removes it. Files, not a
socket: they work wherever the run directory is shared (a nested run's driver in a code_run sandbox with
its own network namespace included) and need no cleanup beyond the run directory.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from memory_shared.fsutil import atomic_write_text

POLL = 0.1  # seconds between looks at the mailbox (the driver) and for the reply (the asker)
REPLY_WAIT = 10.0  # an asker gives up after this long without a reply (the driver is stuck or gone)


def _folder(run_path: Path) -> Path:
    return Path(run_path) / "steer"


class Mailbox:
    """The driver's side: a thread answering requests with `handle(request) -> reply`."""

    def __init__(self, run_path: Path, handle: Callable[[dict[str, Any]], dict[str, Any]]):
        self.folder, self.handle = _folder(run_path), handle
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, daemon=True, name="ga-steer-mailbox")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * POLL + 1)

    def _serve(self) -> None:
        while not self._stop.wait(POLL):
            if not self.folder.is_dir():
                continue
            for path in sorted(self.folder.glob("*.json")):
                try:
                    request = json.loads(path.read_text(encoding="utf-8"))
                    reply = self.handle(request) if isinstance(request, dict) else {"ok": False, "error": "bad request"}
                except (OSError, ValueError) as exc:
                    reply = {"ok": False, "error": f"unreadable request: {exc}"}
                except Exception as exc:  # noqa: BLE001  (one odd request must not end steering for the run)
                    reply = {"ok": False, "error": f"bad request: {type(exc).__name__}"}
                atomic_write_text(path.with_suffix(".reply"), json.dumps(reply))
                path.unlink(missing_ok=True)


def ask(run_path: Path, request: dict[str, Any], wait: float = REPLY_WAIT) -> Optional[dict[str, Any]]:
    """Send one request to the run's driver; its reply, or None when none came within `wait` seconds."""
    folder = _folder(run_path)
    folder.mkdir(exist_ok=True)
    name = uuid.uuid4().hex
    atomic_write_text(folder / f"{name}.json", json.dumps(request))
    reply_path = folder / f"{name}.reply"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if reply_path.is_file():
            try:
                return json.loads(reply_path.read_text(encoding="utf-8"))
            finally:
                reply_path.unlink(missing_ok=True)
        time.sleep(POLL / 2)
    (folder / f"{name}.json").unlink(missing_ok=True)  # not answered: do not leave it for later
    return None
