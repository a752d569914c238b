"""`ga skills report`'s report.md shows what exploration tasks wrote (a report's title, category, problems) as
text: before, a title's `![](URL)` or `<img src=URL>` rendered in any Markdown viewer, a request to wherever the
task chose. A real store, the real CLI, report.md rendered by a real CommonMark parser (markdown-it, GFM tables).
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from markdown_it import MarkdownIt

from memory_shared import MemoryStore
from skilltree.commit import commit_tree
from skilltree.reports import ExplorationReport, render
from skilltree.synthetic import synthetic_tree
from tests.ga_support import run_ga

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
TITLE = "Learn ![p](http://127.0.0.1:9/t.png) <img src=http://127.0.0.1:9/h.png> | cell"
PROBLEM = "re-ran x.py: exit 1 ([l](http://127.0.0.1:9/l)) <script>alert(1)</script>"


def test_exploration_markup_renders_as_text_in_report_md(tmp_path: Path, ga_home: Path) -> None:
    store = MemoryStore(ga_home / "memory", create=True)
    tree = synthetic_tree(6, now=NOW, seed=3)
    skill = sorted(tree.skills.values(), key=lambda s: s.id)[0]

    def reports(txn) -> None:
        report = ExplorationReport.model_validate({"title": TITLE, "category": skill.category, "skill": skill.id,
                                                   "verified": False, "artifacts": [skill.sop], "created": skill.created,
                                                   "problems": [PROBLEM]})
        txn.write(f"reports/{skill.created:%Y-%m-%d}-{skill.id}.md", render(report, "# Notes\n"))

    commit_tree(store, lambda _: tree, message="synthetic skills", author="test", extra=reports)
    out = tmp_path / "report"
    done = run_ga("skills", "report", "--out", str(out), "--now", NOW.isoformat(), "--runs", str(tmp_path))
    assert done.returncode == 0, done.stderr
    markdown = (out / "report.md").read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "Learn" in rendered and "re-ran x.py" in rendered, markdown  # the exploration is listed, its reason too
    for made in ("<img", "<a ", "<script"):
        assert made not in rendered, (made, rendered)
