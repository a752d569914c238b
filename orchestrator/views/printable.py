"""What reaches the terminal is shown, never obeyed: the control characters in text a model or its code wrote
(an answer, a tool's output, a note, a memory file) go before a console or a stream writes it.

An escape sequence in an answer would otherwise act on the person's terminal when `ga runs show` prints it:
clear the screen, rewrite what earlier lines said, retitle the window or (OSC 52) set the clipboard. Rich
writes text as it is (its markup escape is about [brackets], not bytes), so every console ga prints with
carries `guard()`: a render hook that filters the text of each segment Rich lays out and leaves the segments
Rich itself makes for styles and cursor moves alone. There a control character is dropped: Rich laid the line
out counting it as zero cells, so anything wider would push the line past its border; what follows an ESC
(`[2J`, `]52;c;...`) stays as plain text, so a reader still sees that something was there. Where nothing is
laid out (a memory file or a diff written to a terminal, the model's streamed text) `printable()` draws each
as its Unicode control picture (ESC is ␛; C1 characters are �). Newlines and tabs stay.
"""
from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.segment import Segment

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but \t and \n, DEL, C1
PICTURES = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)} | {0x7F: "\u2421"} \
    | {code: "\ufffd" for code in range(0x80, 0xA0)}


def printable(text: str) -> str:
    """`text` with the control characters a terminal would obey drawn as symbols."""
    return text.translate(PICTURES) if CONTROLS.search(text) else text


class Shown:
    """A renderable whose text loses its control characters once Rich has laid it out."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control or not CONTROLS.search(segment.text):
                yield segment  # Rich's own cursor moves, and clean text: as they are (no new segment per line)
            else:
                yield Segment(CONTROLS.sub("", segment.text), segment.style)


class _Guard(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [Shown(renderable) for renderable in renderables]


def guard(console: Console) -> Console:
    """`console`, printing every text without its control characters (the module's doc)."""
    console.push_render_hook(_Guard())
    return console
