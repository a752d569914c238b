"""Exploration reports: Markdown files with YAML front matter, one per explored task.

Location: `reports/` at the root of a memory generation (written in the same atomic commit that
adds the skill, or alone when the result was not verified); `ga skills report --reports DIR`
reads another directory. Format:

    ---
    title: Scrape paginated tables
    category: web
    skill: scrape-tables            # the skill id it created or deepened
    score_vector: {breadth: 10.0, depth: 0.0, utility: 8, innovation: 6}
    predicted: 7.4                  # the planner's score (optional)
    verified: true
    artifacts: [L3/web/scrape-tables.md, L3/web/scrape_tables.py]
    tokens: 48210
    created: 2026-03-01T12:00:00Z   # optional; the file's mtime otherwise
    ---
    # What was tried, what worked, how it was verified ...
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import structlog
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_shared.jsontypes import JSONObject
from memory_shared.paths import tree_files
from memory_shared.usererrors import validation_line
from memory_shared.yamlsource import load_text
from skilltree.tree import utc
from skilltree.vectors import ScoreVector

log = structlog.get_logger("skilltree.reports")
REPORTS_DIR = "reports"  # inside a memory generation


class ExplorationReport(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    title: str = Field(min_length=1)
    category: str = ""
    skill: str = ""
    score_vector: Optional[ScoreVector] = Field(default=None, alias="score_vector")
    predicted: Optional[float] = None
    verified: bool = False
    artifacts: list[str] = []
    tokens: int = 0
    created: Optional[datetime] = None
    path: Optional[str] = None
    body: str = ""

    @field_validator("created", mode="after")
    @classmethod
    def _utc(cls, value: Optional[datetime]) -> Optional[datetime]:
        return utc(value) if value else value


def split_front_matter(text: str) -> tuple[JSONObject, str]:
    """(front matter as written, unchecked; body); ValueError when the file does not start with a `---` block."""
    if not text.startswith("---"):
        raise ValueError("no YAML front matter: the file must start with a line '---'")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise ValueError("front matter is not closed by a line '---'")
    data = load_text(parts[0][3:], "front matter")[0] or {}  # the one bounded loader: reports come from models
    if not isinstance(data, dict):
        raise ValueError("front matter must be a mapping of keys")
    return data, parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""


def render(report: ExplorationReport, body: str = "") -> str:
    """The Markdown text of a report (what an exploration task writes)."""
    front = report.model_dump(mode="json", exclude={"path", "body"}, exclude_none=True)
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + (body or report.body)


def read_report(path: Path) -> ExplorationReport:
    data, body = split_front_matter(path.read_text(encoding="utf-8"))
    for alias in ("scores", "score vector", "vector"):
        if alias in data and "score_vector" not in data:
            data["score_vector"] = data.pop(alias)
    if "created" not in data:
        data["created"] = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    return ExplorationReport.model_validate({**data, "path": str(path), "body": body})


def load_reports(directory: Path | str, limit: Optional[int] = None) -> list[ExplorationReport]:
    """Every readable report in `directory` (recursively), newest first; a broken file is
    skipped with a log line naming it and the fix."""
    directory = Path(directory)
    reports = []
    found = [p for p in tree_files(directory) if p.suffix == ".md"]  # none when it is not a folder
    for path in sorted(found):
        try:
            reports.append(read_report(path))
        except (ValueError, ValidationError, yaml.YAMLError, OSError) as exc:
            first = validation_line(exc) if isinstance(exc, ValidationError) else (
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            log.warning("report.skipped", file=str(path), problem=first,
                        fix="give it front matter with title, category, skill, score_vector, verified")
    reports.sort(key=lambda r: (r.created or datetime.min.replace(tzinfo=timezone.utc), r.title), reverse=True)
    return reports[:limit] if limit else reports
