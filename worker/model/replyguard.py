"""Replies the loop must not take at face value: a model stuck repeating itself, a reply cut at
max_tokens, and a server saying the request does not fit its context window."""
from __future__ import annotations

import re
import zlib
from typing import Optional

REPEATED_LINE = 10  # the same non-blank line this many times in a row
REPEATED_BLOCK = 5  # the same block of 2..MAX_BLOCK_LINES lines this many times in a row
MAX_BLOCK_LINES = 20
MIN_REPEATED_CHARS = 200  # shorter repetitions (a rule of dashes, a small table) are left alone
REPEATED_RUN = re.compile(r"(.{4,80}?)\1{9,}", re.S)  # a short unit 10+ times without line breaks

BAD_REQUEST = re.compile(r"\b(?:HTTP )?(?:400|413)\b")
CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|size|window)|maximum context|exceeds? (?:the )?(?:available )?context|too many tokens"
    r"|prompt is too long|input is too long|reduce the length of the (?:messages|prompt)", re.I)


def repetition(text: str) -> Optional[str]:
    """A short description of a runaway repetition in `text`, or None."""
    if len(text) < MIN_REPEATED_CHARS:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    run = 1
    for previous, line in zip(lines, lines[1:], strict=False):
        run = run + 1 if line == previous else 1
        if run >= REPEATED_LINE and run * len(line) >= MIN_REPEATED_CHARS // 2:
            return f"the line {_quote(line)} repeated {run}+ times"
    for size in range(2, MAX_BLOCK_LINES + 1):
        for start in range(0, max(0, len(lines) - size * REPEATED_BLOCK) + 1):
            block = lines[start:start + size]
            if len(set(block)) == 1:
                continue  # a repeated line, handled above
            times = 1
            while lines[start + times * size:start + (times + 1) * size] == block:
                times += 1
            if times >= REPEATED_BLOCK and times * sum(map(len, block)) >= MIN_REPEATED_CHARS:
                return f"a block of {size} lines starting {_quote(block[0])} repeated {times} times"
    for line in text.splitlines():
        # the regex is slow on long text; a line zlib cannot shrink to a third holds no long run
        if len(line) < MIN_REPEATED_CHARS or len(zlib.compress(line.encode(), 1)) > len(line) // 3:
            continue
        for match in REPEATED_RUN.finditer(line):
            # a run of one or two characters (a rule, padding, "xxxx") is output, not a model stuck in a loop
            if len(match.group(0)) >= MIN_REPEATED_CHARS and len(set(match.group(1).strip())) >= 3:
                return f"{_quote(match.group(1))} repeated {len(match.group(0)) // len(match.group(1))} times"
    return None


def is_context_overflow(message: str) -> bool:
    """Whether an endpoint's error (a 400 or 413, not a rate limit) says the request is larger than the
    model's context window."""
    return bool(BAD_REQUEST.search(message or "") and CONTEXT_OVERFLOW.search(message or ""))


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")
