"""`ga --version`: the installed distribution's version, or pyproject.toml's when ga runs from a checkout."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "ga"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def ga_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _pyproject_version() or "unknown"


def _pyproject_version() -> str | None:
    try:
        text = PYPROJECT.read_text(encoding="utf-8")
    except OSError:
        return None
    project = re.search(r"^\[project\]$(.*?)(?=^\[|\Z)", text, re.M | re.S)  # tomllib is 3.11+; ga runs on 3.10
    found = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M) if project else None
    return found.group(1) if found else None
