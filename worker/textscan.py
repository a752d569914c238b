"""A text file's lines read in bounded chunks: what file_read shows of a file of any size or line length.

Memory stays bounded by the chunk size and the head kept of each line, whatever the file holds (a 900 MB file
of one line included), and reading stops at a byte cap: a caller says so rather than reading on.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator, Optional

CHUNK = 1 << 20  # bytes read (and decoded) at a time


@dataclass(frozen=True)
class Line:
    number: int
    head: str  # the line's first `keep` characters, without its line break
    length: int  # characters in the whole line, without its line break
    hit: bool  # the keyword occurs in the line (any case)


class CappedText:
    """The text of a binary stream, decoded (UTF-8, bad bytes replaced) in chunks, up to `cap` bytes; `cut` says
    whether bytes were left unread at the cap."""

    def __init__(self, raw: BinaryIO, cap: int):
        self.raw, self.cap, self.read, self.cut = raw, cap, 0, False

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while self.read < self.cap:
            data = self.raw.read(min(CHUNK, self.cap - self.read))
            if not data:
                break
            self.read += len(data)
            yield decoder.decode(data)
        self.cut = self.read >= self.cap and bool(self.raw.read(1))
        yield decoder.decode(b"", final=True)


class LineScan:
    """Lines of `chunks` one at a time (`next_line`), then, when the caller has seen enough, how many are left
    (`count_rest`, without building them)."""

    def __init__(self, chunks: Iterable[str], keep: int, needle: Optional[str] = None):
        self._chunks = iter(chunks)
        self._text, self._pos = "", 0
        self.keep, self.needle = keep, needle.lower() if needle else None
        self.number = 0  # lines returned so far

    def lines(self) -> Iterator[Line]:
        while (line := self.next_line()) is not None:
            yield line

    def next_line(self) -> Optional[Line]:
        head, length, hit, tail, last, started = "", 0, False, "", "", False
        while True:
            if self._pos >= len(self._text):
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                self._text, self._pos = chunk, 0
                continue
            end = self._text.find("\n", self._pos)
            piece = self._text[self._pos:] if end < 0 else self._text[self._pos:end]
            self._pos = len(self._text) if end < 0 else end + 1
            started = True
            if len(head) < self.keep:
                head += piece[:self.keep - len(head)]
            length += len(piece)
            last = piece[-1:] or last
            if self.needle and not hit:
                window = tail + piece.lower()
                hit = self.needle in window
                tail = window[len(window) - len(self.needle) + 1:] if len(self.needle) > 1 else ""
            if end >= 0:
                break
        if not started:
            return None
        if last == "\r":  # a CRLF line break
            length -= 1
            head = head[:length]
        self.number += 1
        return Line(self.number, head, length, hit)

    def count_rest(self) -> int:
        """How many more lines there are (consumes them)."""
        count, open_line = 0, False
        for piece in [self._text[self._pos:], *self._chunks]:
            if piece:
                count += piece.count("\n")
                open_line = not piece.endswith("\n")
        self._text, self._pos = "", 0
        return count + open_line
