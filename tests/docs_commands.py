"""The shell commands the README and the user guide (docs/*.md) show, read from their fenced `bash` blocks.

The convention the pages follow (docs/index.md says it to the reader):
- Every line of a ```bash block is a command (a line ending in `\\` goes on), run in the order of the page
  in one shell, as a person types them in a scratch checkout; comments are the shell's.
- A block whose lines start with `$ ` is a session: `$ ` lines are commands, the lines under one are what
  it prints (stdout and stderr as a terminal shows them), `...` standing for what changes from run to run.
- An exit code other than 0 is shown as the shell shows it: `$ ga replay RUN; echo "exit $?"`.
- `<!-- not run: WHY -->` on the line before a block leaves it out (a daemon, a command another test
  runs); sparingly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

NOT_RUN = re.compile(r"<!--\s*not run:(?P<why>.*?)-->", re.S)
PROMPT = "$ "


@dataclass(frozen=True)
class Command:
    text: str
    output: str | None  # None: the page does not show what it prints
    line: int  # 1-based, in its page


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the fence's first line, 1-based
    commands: tuple[Command, ...]
    not_run: str | None  # why, when the page says the block is not run


def bash_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The ```bash blocks of the page at `path` (or of `text`, a part of it), in order."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8") if text is None else text)
    blocks = []
    for index, token in enumerate(tokens):
        if token.type != "fence" or token.info.split()[:1] != ["bash"] or token.map is None:
            continue
        before = tokens[index - 1] if index else None
        marker = NOT_RUN.search(before.content) if before is not None and before.type == "html_block" else None
        first = token.map[0] + 2  # the fence line is map[0] (0-based); its first content line follows
        blocks.append(Block(path, token.map[0] + 1, tuple(_commands(token.content, first)),
                            marker.group("why").strip() if marker else None))
    return blocks


def _commands(content: str, first: int) -> list[Command]:
    lines = content.rstrip("\n").split("\n")
    session = any(line.startswith(PROMPT) for line in lines)
    commands: list[Command] = []
    text: list[str] = []
    output: list[str] = []
    start = first

    def close() -> None:
        if text:
            shown = "\n".join(output).rstrip() if session and output else None
            commands.append(Command("\n".join(text), shown, start))

    continued = False
    for number, line in enumerate(lines, first):
        if continued:
            text.append(line)
        elif not session or line.startswith(PROMPT):
            close()
            text, output, start = [line[len(PROMPT):] if session else line], [], number
        else:
            output.append(line)
        continued = line.endswith("\\")
    close()
    return [c for c in commands if c.text.strip() and not c.text.lstrip().startswith("#")]
