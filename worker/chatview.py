"""What a person sees of sessions outside a turn: the sessions table (`ga sessions list`, chat's /resume) and the
model's text as it streams. It loads no agent loop: `ga sessions list` and `ga run`'s set-up use it cheaply.
"""
from __future__ import annotations

import time
from typing import Callable

from rich.table import Table
from rich.text import Text

from worker.sessionfiles import Session


class TextStream:
    """Writes the model's text as it arrives; `close()` ends the line (True if anything was written)."""

    def __init__(self, write: Callable[[str], object], flush: Callable[[], object]):
        self.write, self.flush = write, flush
        self.wrote = self.open = False

    def __call__(self, piece: str) -> None:
        self.write(piece)
        self.flush()
        self.wrote, self.open = True, not piece.endswith("\n")

    def close(self) -> bool:
        if self.open:
            self.write("\n")
            self.flush()
        wrote, self.wrote, self.open = self.wrote, False, False
        return wrote


def sessions_table(rows: list[Session]) -> Table:
    """Fits 80 columns: ids whole (a later command needs them); the first task gives way first."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("session", no_wrap=True)
    table.add_column("first task", min_width=10)  # wraps in the layout's eyes; its text stays one cut line
    for column in ("turns", "tokens", "cost"):
        table.add_column(column, no_wrap=True, justify="right")
    table.add_column("last used", no_wrap=True)
    for s in rows:
        usage = s.usage or {}
        table.add_row(s.id, Text(" ".join(s.first_task.split()), no_wrap=True, overflow="ellipsis"), str(s.turns),
                      f"{usage.get('total', 0):,}", f"${usage.get('cost', 0):.4f}", _when(s.updated))
    return table


def _when(moment: float) -> str:
    """As `ls -l` shows a time: `Dec  1 15:27` this year, `Dec  1  2025` before."""
    shown = time.localtime(moment)
    return time.strftime("%b %e %H:%M" if shown.tm_year == time.localtime().tm_year else "%b %e  %Y", shown)
