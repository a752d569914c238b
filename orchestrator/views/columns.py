"""Tables that fit the terminal without breaking a word or an id (80 columns is the width they are made for).

Each row is one line. Columns that are `whole` (ids a later command needs, numbers, statuses) are never cut; the
others give way, widest first, each cut with `…` down to its `least` width. When the whole columns alone do not
fit, every row's id moves to a line of its own and the rest of the row follows it on the next line, indented.
The width is the console's at the moment the table is drawn (`__rich_console__`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence, Union

from rich.console import Console, ConsoleOptions
from rich.text import Text

Cell = Union[str, Text]
GAP = 2  # spaces between two columns
INDENT = 2  # the rest of a row under its id, when the id has a line of its own


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # numbers: aligned on the right
    whole: bool = False  # never cut (ids, numbers, statuses)
    least: int = 8  # a column that gives way is never cut narrower than this (nor than its header)


def one_line(cell: Cell) -> Text:
    """A cell as one line of text, its whitespace (newlines included) folded to single spaces."""
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    plain = text.plain
    folded = " ".join(plain.split())
    return text if folded == plain else Text(folded, style=text.style)


class Rows:
    """The rows under their header; the first column is the row's id."""

    def __init__(self, columns: Sequence[Column], rows: Iterable[Sequence[Cell]], title: str = ""):
        self.columns, self.title = list(columns), title
        self.rows = [[one_line(cell) for cell in row] for row in rows]

    def lines(self, width: int) -> list[Text]:
        natural = widths(self.columns, self.rows)
        gap, fitted = fit(self.columns, natural, width)
        if fitted is not None:
            return [*self._title(width), *self._table(self.columns, self.rows, fitted, gap)]
        rest = self.columns[1:]
        gap, fitted = fit(rest, natural[1:], width - INDENT)
        fitted = fitted or [max(1, len(c.header)) for c in rest]
        lines = [*self._title(width), Text(self.columns[0].header, style="bold"),
                 *self._table(rest, [], fitted, gap, " " * INDENT)]
        for row in self.rows:
            lines.append(row[0])  # whole, on its own line: only a terminal narrower than the id folds it
            lines += self._table(rest, [row[1:]], fitted, gap, " " * INDENT, header=False)
        return lines

    def _title(self, width: int) -> list[Text]:
        return [Text(line) for line in wrapped(self.title.split("\n"), width)] if self.title else []

    @staticmethod
    def _table(columns: Sequence[Column], rows: list[list[Text]], fitted: list[int], gap: int, indent: str = "",
               header: bool = True) -> Iterator[Text]:
        if header:
            yield Text(indent) + join([Text(c.header, style="bold") for c in columns], columns, fitted, gap)
            yield Text(indent + "─" * (sum(fitted) + gap * (len(fitted) - 1)), style="dim")
        for row in rows:
            yield Text(indent) + join(row, columns, fitted, gap)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        for line in self.lines(options.max_width):
            line.no_wrap, line.overflow = True, "ignore"
            yield line


def widths(columns: Sequence[Column], rows: list[list[Text]]) -> list[int]:
    return [max([len(column.header), *(len(row[index].plain) for row in rows)]) for index, column in enumerate(columns)]


def fit(columns: Sequence[Column], natural: list[int], width: int) -> tuple[int, list[int] | None]:
    """The gap and the columns' widths within `width`: two spaces between columns, or one when two do not fit."""
    for gap in (GAP, 1):
        fitted = give_way(columns, natural, width, gap)
        if fitted is not None:
            return gap, fitted
    return 1, None


def give_way(columns: Sequence[Column], natural: list[int], width: int, gap: int = GAP) -> list[int] | None:
    """The columns' widths within `width`: the widest column that may give way is cut first; None when the whole
    columns and the least widths of the others do not fit."""
    fitted = list(natural)
    excess = sum(fitted) + gap * (len(fitted) - 1) - width
    floor = [natural[i] if c.whole else min(natural[i], max(c.least, len(c.header))) for i, c in enumerate(columns)]
    while excess > 0:
        shrinkable = [i for i in range(len(fitted)) if fitted[i] > floor[i]]
        if not shrinkable:
            return None
        widest = max(shrinkable, key=lambda i: fitted[i])
        cut = min(excess, fitted[widest] - floor[widest],
                  max(1, fitted[widest] - max((fitted[i] for i in shrinkable if i != widest), default=0)))
        fitted[widest] -= cut
        excess -= cut
    return fitted


def join(cells: Sequence[Text], columns: Sequence[Column], fitted: list[int], gap: int = GAP) -> Text:
    line = Text()
    for index, (cell, column, width) in enumerate(zip(cells, columns, fitted)):
        cell = cell.copy()
        if len(cell.plain) > width:
            cell.truncate(width, overflow="ellipsis")
        last = index == len(fitted) - 1
        pad = " " * (width - len(cell.plain))
        line += Text(pad) + cell if column.right else (cell if last else cell + Text(pad))
        if not last:
            line += Text(" " * gap)
    return line


def wrapped(paragraphs: Iterable[str], width: int, separator: str = " · ") -> list[str]:
    """Each paragraph as lines of at most `width` (see `line_spans`)."""
    return [paragraph[start:end] for paragraph in paragraphs for start, end in line_spans(paragraph, width, separator)]


def line_spans(text: str, width: int, separator: str = " · ") -> list[tuple[int, int]]:
    """Where one paragraph's lines start and end when it is broken at `width`: between its `separator`-joined parts
    where one fits, else between words; a word longer than `width` (a long path) stays whole on a line of its own."""
    spans, start = [], 0
    while len(text) - start > width:
        limit = start + width
        cut = text.rfind(separator, start + 1, limit + 1)
        skip = len(separator)
        if cut < 0:
            cut, skip = text.rfind(" ", start + 1, limit + 1), 1
        if cut < 0:  # one word longer than the line: whole, up to the next space
            cut = text.find(" ", limit)
            if cut < 0:
                break
        spans.append((start, cut))
        start = cut + skip
    spans.append((start, len(text)))
    return spans


class Paragraph:
    """Text drawn at the console's width, broken between its ` · ` parts, then between words: a summary line or
    a hint whose ids and commands stay whole (a str is plain text, never markup)."""

    def __init__(self, text: str | Text, style: str = "", separator: str = " · "):
        self.text = Text(text, style=style) if isinstance(text, str) else text
        self.separator = separator

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        for paragraph in self.text.split("\n", allow_blank=True):
            for start, end in line_spans(paragraph.plain, options.max_width, self.separator):
                line = paragraph[start:end]
                line.no_wrap, line.overflow = True, "ignore"
                yield line
