"""events.jsonl: what recovery, repair, gc and upgrades did to the store, one JSON line each (append, fsync)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .jsontypes import JSONObject

NAME = "events.jsonl"


def append(root: Path, event: str, **fields: object) -> None:
    line = json.dumps({"time": time.time(), "event": event, **fields}, ensure_ascii=False, separators=(",", ":"))
    fd = os.open(root / NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read(root: Path) -> list[JSONObject]:
    """Every readable event in order, as written (by this ga or an older one) (a torn last line is skipped: its writer died before it counted)."""
    try:
        data = (root / NAME).read_bytes()
    except FileNotFoundError:
        return []
    found = []
    for line in data.split(b"\n"):
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return [e for e in found if isinstance(e, dict)]
