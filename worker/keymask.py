"""The key masked in what the model gateway relays back to a sandbox, in every form an endpoint might reflect it in.

An endpoint that echoes its request (a 401 page, a debugging proxy, a hostile server) may send the key back as
it was sent, JSON-escaped (`\\/`, or every character as `\\uXXXX`), base64 (standard or URL-safe alphabet, at
any of the three byte alignments a longer encoded text may put it at), hex, or URL-encoded. `KeyMask` replaces
each with MASK:
- `text()` in a decoded string;
- `body()` in a whole reply: a JSON reply's strings are decoded, masked and the reply encoded again (only when
  something was masked: an innocent reply passes byte for byte), then the encoded forms in the raw bytes;
- `Stream` in a server-sent event stream, event by event: the strings of consecutive events are read as one
  text (a client joins the deltas), and an event whose strings end with what could begin a form is held back
  until the next event shows whether it does.
A base64 form leaves out the encoded characters that also depend on the neighbouring bytes: at most two bytes
at each end of the key stay unmasked there, never enough to use it.
"""
from __future__ import annotations

import base64
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Iterator

MASK = "[redacted]"
MIN_FORM = 8  # shorter forms would mask innocent text; no real key is that short
PERCENT = re.compile(r"%[0-9A-F]{2}")


class KeyMask:
    def __init__(self, key: str):
        self.key = key
        encoded = _decoded_forms(key) if len(key) >= MIN_FORM else []  # a short key is masked as it is only
        self.forms = sorted({key, *encoded}, key=len, reverse=True) if key else []
        escaped = [f for f in _escaped_forms(key) if len(f) >= MIN_FORM] if encoded else []
        self.raw_forms = [f.encode() for f in sorted({*self.forms, *escaped}, key=len, reverse=True)]

    def __bool__(self) -> bool:
        return bool(self.forms)

    def text(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def raw(self, data: bytes) -> bytes:
        for form in self.raw_forms:
            if form in data:
                data = data.replace(form, MASK.encode())
        return data

    def body(self, data: bytes) -> bytes:
        if not self:
            return data
        stripped = data.strip()
        if stripped[:1] in (b"{", b"["):
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = None
            if parsed is not None:
                masked, changed = self._json(parsed)
                if changed:
                    data = json.dumps(masked).encode()
        return self.raw(data)

    def _json(self, value: object) -> tuple[object, bool]:
        if isinstance(value, str):
            masked = self.text(value)
            return masked, masked != value
        if isinstance(value, list):
            items = [self._json(v) for v in value]
            return [v for v, _ in items], any(c for _, c in items)
        if isinstance(value, dict):
            pairs = [(self._json(k), self._json(v)) for k, v in value.items()]
            return {k: v for (k, _), (v, _) in pairs}, any(ck or cv for (_, ck), (_, cv) in pairs)
        return value, False

    def longest_start(self, text: str) -> int:
        """The length of the longest end of `text` that is the start of a form (0: none)."""
        best = 0
        for form in self.forms:
            window = text[-(len(form) - 1):] if len(form) > 1 else ""
            at = window.find(form[0])
            while at != -1:
                if form.startswith(window[at:]):
                    best = max(best, len(window) - at)
                    break
                at = window.find(form[0], at + 1)
        return best


@dataclass
class _Event:
    raw: bytes  # the event as received, its blank line included
    parsed: object = None  # the JSON of its one data line, when it has one
    strings: list[str] = field(default_factory=list)  # the strings in it, in order (its share of the text)


class Stream:
    """Masks a server-sent event stream fed in chunks as they arrive; `feed` and `end` return what may go out."""

    def __init__(self, mask: KeyMask):
        self.mask = mask
        self.partial = b""
        self.held: list[_Event] = []

    def feed(self, chunk: bytes) -> bytes:
        if not self.mask:
            return chunk
        self.partial += chunk
        out = []
        while True:
            cut = _event_end(self.partial)
            if cut < 0:
                break
            raw, self.partial = self.partial[:cut], self.partial[cut:]
            out.append(self._event(raw))
        return b"".join(out)

    def end(self) -> bytes:
        """What is left when the stream ends: the held events, then any unterminated rest."""
        if not self.mask:
            return b""
        return self._release(len(self.held)) + self.mask.raw(self.partial)

    def _event(self, raw: bytes) -> bytes:
        event = _parse(raw)
        if event.parsed is None:  # not one JSON data line ([DONE], a comment): it ends what was held
            return self._release(len(self.held)) + self.mask.raw(raw)
        self.held.append(event)
        self._mask_held()
        text = "".join(s for e in self.held for s in e.strings)
        keep = self.mask.longest_start(text)
        releasable, seen = 0, 0
        for index, held in enumerate(self.held):
            seen += sum(len(s) for s in held.strings)
            if seen <= len(text) - keep:
                releasable = index + 1
        return self._release(releasable)

    def _mask_held(self) -> None:
        """Mask the forms in the held events' joined text: a form's characters are dropped from every string it
        spans and MASK is put where it started."""
        pieces = [(i, j, s) for i, e in enumerate(self.held) for j, s in enumerate(e.strings)]
        text = "".join(s for _, _, s in pieces)
        spans = sorted(_occurrences(text, self.mask.forms))
        if not spans:
            return
        dropped = bytearray(len(text))
        starts = set()
        for start, end in spans:
            starts.add(start)
            dropped[start:end] = b"\x01" * (end - start)
        offset = 0
        for i, j, s in pieces:
            kept = []
            for k, char in enumerate(s):
                if offset + k in starts:
                    kept.append(MASK)
                if not dropped[offset + k]:
                    kept.append(char)
            offset += len(s)
            self.held[i].strings[j] = "".join(kept)
        for event in self.held:
            event.parsed = _replace_strings(event.parsed, iter(event.strings))
            event.raw = b"data: " + json.dumps(event.parsed).encode() + b"\n\n"

    def _release(self, count: int) -> bytes:
        out, self.held = self.held[:count], self.held[count:]
        return b"".join(self.mask.raw(e.raw) for e in out)


def _decoded_forms(key: str) -> list[str]:
    data = key.encode()
    forms = {key, data.hex(), data.hex().upper(), urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key)}
    forms |= {PERCENT.sub(lambda m: m.group().lower(), f) for f in list(forms)}  # %2f as well as %2F
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        start = 4 if shift else 0  # the first group also encodes the neighbouring bytes
        end = len(encoded) - (4 if (shift + len(data)) % 3 else 0)  # ... and so does a last, partial one
        core = encoded[start:end]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted((f for f in forms if len(f) >= MIN_FORM), key=len, reverse=True)


def _escaped_forms(key: str) -> set[str]:
    """The key as it may stand inside a JSON text: escaped as json.dumps does, with `/` escaped, every character
    as \\uXXXX."""
    return {json.dumps(key)[1:-1], json.dumps(key)[1:-1].replace("/", "\\/"),
            "".join(f"\\u{ord(c):04x}" for c in key), "".join(f"\\u{ord(c):04X}" for c in key)}


def _occurrences(text: str, forms: list[str]) -> Iterator[tuple[int, int]]:
    for form in forms:
        at = text.find(form)
        while at != -1:
            yield at, at + len(form)
            at = text.find(form, at + 1)


def _event_end(buffer: bytes) -> int:
    """Where the first whole event in `buffer` ends (after its blank line), or -1."""
    ends = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n") if (i := buffer.find(sep)) != -1]
    return min(ends) if ends else -1


def _parse(raw: bytes) -> _Event:
    lines = [line for line in raw.splitlines() if line.strip()]
    if len(lines) != 1 or not lines[0].startswith(b"data:"):
        return _Event(raw)
    try:
        parsed = json.loads(lines[0][5:])
    except (ValueError, UnicodeDecodeError):
        return _Event(raw)
    if not isinstance(parsed, (dict, list)):
        return _Event(raw)
    return _Event(raw, parsed, list(_strings(parsed)))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _replace_strings(value: object, new: Iterator[str]) -> object:
    if isinstance(value, str):
        return next(new)
    if isinstance(value, list):
        return [_replace_strings(item, new) for item in value]
    if isinstance(value, dict):
        return {k: _replace_strings(v, new) for k, v in value.items()}
    return value

