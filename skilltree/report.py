"""`ga skills report`: gather once, write report.md and report.html side by side."""
from __future__ import annotations

from pathlib import Path

from memory_shared.fsutil import atomic_write_text
from skilltree.report_data import ReportData
from skilltree.report_html import render_html
from skilltree.report_md import render_markdown


def write_report(data: ReportData, out: Path | str) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, html = out / "report.md", out / "report.html"
    atomic_write_text(md, render_markdown(data))
    atomic_write_text(html, render_html(data))
    return md, html
