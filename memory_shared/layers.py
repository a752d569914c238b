"""Conventions of the layers inside a generation: shipped defaults, the L1 bound, L0/L1 rendering, SOP files."""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Mapping

import yaml

from .errors import L1TooLarge
from .jsontypes import JSONObject
from .yamlsource import YamlError, load_text

L0_DIR = "L0"
L1_INDEX = "L1/index.md"
L2_FACTS = "L2/facts.md"
L3_DIR = "L3"
SKILLTREE = "skilltree.json"
SOP_FIELDS = ("name", "category", "description", "created", "evidence")

_DEFAULTS = Path(__file__).parent / "defaults"
_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.S)


def default_files() -> dict[str, str]:
    """The tree of generation 0: every shipped file by its relative path."""
    files = {
        p.relative_to(_DEFAULTS).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(_DEFAULTS.rglob("*"))
        if p.is_file()
    }
    skilltree = {
        "version": 1,
        "categories": {},
        "skills": {},
        "weights": {"breadth": 0.3, "depth": 0.2, "utility": 0.3, "innovation": 0.2},
    }
    files[SKILLTREE] = json.dumps(skilltree, indent=2) + "\n"
    return files


def check_l1(text: str, max_lines: int, max_chars: int) -> None:
    """Refuse an L1 index past its bound, saying by how much and what to do."""
    lines = len(text.splitlines())
    chars = len(text)
    if lines > max_lines or chars > max_chars:
        raise L1TooLarge(
            f"{L1_INDEX} would have {lines} lines and {chars} chars (limit {max_lines} lines, {max_chars} chars): "
            f"move details to {L2_FACTS} or an L3 SOP and keep one pointer line in L1"
        )


def render_l1(snapshot_path: Path | str, max_lines: int = 30, max_chars: int = 2000) -> str:
    """The L1 text a prompt carries: trailing spaces and runs of blank lines removed, bounded."""
    try:  # an open and reads, not a stat and a file object: every worker renders it as it starts
        fd = os.open(Path(snapshot_path) / L1_INDEX, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return ""
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except IsADirectoryError:
        return ""
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    lines: list[str] = []
    for line in raw.decode("utf-8").splitlines():
        line = line.rstrip()
        if not line and (not lines or not lines[-1]):
            continue
        lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    text = "\n".join(lines[:max_lines])
    return text[:max_chars]


def read_l0(snapshot_path: Path | str) -> str:
    """The meta rules: every L0/*.md file, rules.md first, joined by a blank line."""
    folder = Path(snapshot_path) / L0_DIR
    if not folder.is_dir():
        return ""
    files = sorted(folder.glob("*.md"), key=lambda p: (p.name != "rules.md", p.name))
    return "\n\n".join(p.read_text(encoding="utf-8").strip() for p in files)


def parse_sop(text: str, where: str = "SOP") -> tuple[JSONObject, str]:
    """Split an L3 SOP into its YAML front matter and Markdown body; refuse a missing or incomplete header. A model
    writes it: it is read by the one bounded loader (size, depth, aliases, duplicate keys), errors as `where`:line."""
    match = _FRONT.match(text)
    if not match:
        raise ValueError("SOP has no YAML front matter: start it with a '---' line, the fields "
                         f"{', '.join(SOP_FIELDS)}, and a closing '---' line")
    try:  # a blank line for the opening '---': the loader's lines are the file's
        front = load_text("\n" + (match.group(1) or ""), where)[0] or {}
    except YamlError as exc:
        raise ValueError(f"SOP front matter is not valid YAML: {exc}") from None
    if not isinstance(front, dict):
        raise ValueError("SOP front matter must be a YAML mapping of " + ", ".join(SOP_FIELDS))
    missing = [key for key in SOP_FIELDS if key not in front]
    if missing:
        raise ValueError(f"SOP front matter lacks {', '.join(missing)}; add them between the '---' lines")
    front = {k: v.isoformat() if isinstance(v, (_dt.date, _dt.datetime)) else v for k, v in front.items()}
    return front, text[match.end():]


def format_sop(front_matter: Mapping[str, object], body: str) -> str:
    """The SOP file text: front matter (known fields first) and the body."""
    missing = [key for key in SOP_FIELDS if key not in front_matter]
    if missing:
        raise ValueError(f"SOP front matter lacks {', '.join(missing)}")
    ordered = {k: front_matter[k] for k in SOP_FIELDS}
    ordered.update({k: v for k, v in front_matter.items() if k not in ordered})
    header = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{header}---\n{body}"
