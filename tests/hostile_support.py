"""Helpers for the hostile-input tests: bad input files, and the check that `ga`'s answer is one line with exit 2."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"


def one_line_error(output: str) -> str:
    """The single `error:` line of a user-caused failure; fails the test on anything else (a traceback)."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert "Traceback" not in output, output
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


def tasks_file(folder: Path, text: str, name: str = "tasks.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def alias_bomb(levels: int, width: int = 9) -> str:
    names = "abcdefghijklmnop"
    lines = [f"{names[0]}: &{names[0]} [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"{names[level]}: &{names[level]} [" + ", ".join([f"*{names[level - 1]}"] * width) + "]")
    return "\n".join(lines) + "\n"
