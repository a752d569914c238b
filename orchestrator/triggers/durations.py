"""Durations written by people: "90s", "30m", "1h30m", "2d", or a bare number of seconds."""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Union

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
HINT = "write e.g. 90s, 30m, 1h30m, 2d or a number of seconds"


def parse_duration(value: Union[str, int, float, timedelta]) -> timedelta:
    """Parse a duration; ValueError (one line, with the accepted forms) if it is not one."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; {HINT}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is negative; {HINT}")
        return timedelta(seconds=value)
    text = str(value).strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return timedelta(seconds=float(text))
    if not text or PART.sub("", text):
        raise ValueError(f"{value!r} is not a duration; {HINT}")
    return timedelta(seconds=sum(float(n) * UNITS[unit] for n, unit in PART.findall(text)))


def format_duration(delta: timedelta) -> str:
    """The short form parse_duration reads back: 1h30m, 45s, 0s."""
    seconds = int(round(delta.total_seconds()))
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return sign + ("".join(parts) or "0s")
