"""history.jsonl: one line per turn, written and made durable before the next turn starts (group commit:
the concurrent workers of a process share one flush, memory_shared/groupsync.py).

Each line records exactly what was sent: the request's messages from index `sent_from` on
(the messages before it are identical to the previous request's), and what came back: `received`
is the assistant message as it goes into the next request; when it was read differently from the
text the model wrote (a tool call written in the text, an invented result cut off) the text as
received is kept in `received_raw` and `notes` says what was done.
"""
from __future__ import annotations

import json
import os
import time
import weakref
from pathlib import Path
from typing import TypedDict

from memory_shared import fsutil, groupsync
from memory_shared.jsontypes import JSONObject
from worker.model import ChatMessage, Reply

READ_CAP = 1 << 30  # bytes of a history file read back (a session's follow-up)


class ToolResultLine(TypedDict, total=False):
    """What a line keeps of one tool call's result (`tool_results`), or of a reply the loop discarded (`error`)."""

    id: str
    name: str
    ok: bool
    output: str
    error: str


class History:
    """The history file of one task. Its directory may be writable by the task's own code (`ga run` keeps its run
    directory in the working directory): the directory and the file are held open from the start, so whatever
    the task later puts at those paths (a symlink, a FIFO) is never written through."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.folder = fsutil.Folder(self.path.parent, create=True)
        self._file = self.folder.open(self.path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._closer = weakref.finalize(self, os.close, self._file)
        self._previous: list[ChatMessage] = []
        self._new = True  # no line appended by this History yet

    def resume(self, previous_request: list[ChatMessage]) -> None:
        """Continue a history whose last request was `previous_request` (a session's follow-up)."""
        self._previous = [m.copy() for m in previous_request]

    def record(self, turn: int, request: list[ChatMessage], reply: Reply, tool_results: list[ToolResultLine]) -> None:
        sent_from = _shared_prefix(self._previous, request)
        self._previous = [m.copy() for m in request]
        self.append({
            "turn": turn,
            "time": time.time(),
            "sent_from": sent_from,
            "sent": request[sent_from:],
            "received": reply.message,
            "usage": reply.usage.to_dict(),
            "latency": round(reply.latency, 4),
            "tool_results": tool_results,
            **({"received_raw": reply.raw} if reply.raw is not None else {}),
            **({"notes": reply.notes} if reply.notes else {}),
        })

    def append(self, record: dict[str, object]) -> None:
        fsutil.write_all(self._file, (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
        if self._new:  # the file's name in its folder is made durable with its first line, in the same batch
            groupsync.durable(self._file, self.folder.fd)
            self._new = False
        else:
            groupsync.durable(self._file)

    def write_beside(self, name: str, text: str) -> None:
        """Replace the file `name` next to the history (answer.md), never through a symlink."""
        self.folder.replace(name, text.encode("utf-8"))

    def close(self) -> None:
        """Let go of the file and its directory now (the task is over), not whenever the History is collected:
        a Worker sits in reference cycles, and a process running thousands of tasks would run out of
        descriptors before the collector came. Every append was durable before it returned: nothing is pending."""
        self._closer()
        self.folder.close()


def _shared_prefix(previous: list[ChatMessage], request: list[ChatMessage]) -> int:
    count = 0
    for old, new in zip(previous, request, strict=False):
        if old != new:
            break
        count += 1
    return count


def read_text(path: Path) -> str:
    """A history file as text, never through a symlink, at most READ_CAP bytes."""
    return fsutil.read_file(path, READ_CAP).decode("utf-8", errors="replace")


def replay(path: Path) -> list[list[JSONObject]]:
    """Rebuild every request the worker sent, in order, from a history file (as the file holds them: unchecked)."""
    requests: list[list[JSONObject]] = []
    previous: list[JSONObject] = []
    for line in read_text(path).splitlines():
        record = json.loads(line)
        if "sent" not in record:
            continue
        previous = previous[: record["sent_from"]] + record["sent"]
        requests.append(previous)
    return requests
