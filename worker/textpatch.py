"""Exactly-once text replacement that keeps a file's newline style (file_patch and staged memory patches)."""
from __future__ import annotations


class PatchError(ValueError):
    """old_content did not match exactly once; str() says how many times it matched."""


def _occurrences(text: str, needle: str, stop_after: int = 2) -> list[int]:
    found, at = [], text.find(needle)
    while at != -1 and len(found) < stop_after:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def count_occurrences(text: str, needle: str) -> int:
    """Overlapping occurrences count: 'aa' occurs twice in 'aaa' (so it is not a unique anchor)."""
    return len(_occurrences(text, needle, stop_after=len(text) + 1))


def newline_style(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def to_style(text: str, newline: str) -> str:
    plain = text.replace("\r\n", "\n")
    return plain if newline == "\n" else plain.replace("\n", newline)


def replace_once(text: str, old: str, new: str) -> str:
    """Replace the single occurrence of old; old/new are written in the text's newline style."""
    return patch_exact(text, old, new)[0]


def patch_exact(text: str, old: str, new: str) -> tuple[str, str, str]:
    """(new text, old as it appears in text, new as written): the exact pair a replay needs."""
    if not old:
        raise PatchError("old_content is empty; copy the exact lines to replace from file_read")
    style = newline_style(text)
    old_s, new_s = to_style(old, style), to_style(new, style)
    hits = _occurrences(text, old_s)
    if not hits and old_s != old:  # a mixed-style file: try the text exactly as given
        old_s, new_s = old, new
        hits = _occurrences(text, old_s)
    if len(hits) == 1:
        at = hits[0]
        return text[:at] + new_s + text[at + len(old_s):], old_s, new_s
    if not hits:
        raise PatchError("old_content matched 0 times; file_read the file and copy the exact text"
                         " (whitespace and indentation included)")
    raise PatchError(f"old_content matched {count_occurrences(text, old_s)} times; include more"
                     " surrounding lines so it matches exactly once")
