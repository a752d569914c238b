"""`ga skills report`: gather once, write report.md and report.html side by side."""
from __future__ import annotations

import os
from pathlib import Path

from skilltree.report_data import ReportData
from skilltree.report_html import render_html
from skilltree.report_md import render_markdown


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(data: ReportData, out: Path | str) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, html = out / "report.md", out / "report.html"
    _write(md, render_markdown(data))
    _write(html, render_html(data))
    return md, html
