"""`ga skills report` end to end: a real store and access log, the real CLI, the HTML in a real Chromium."""
import os
import random
import struct
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory_shared import MemoryStore
from memory_shared.stats import AccessLog
from skilltree.commands import run_feedback
from skilltree.commit import commit_tree
from skilltree.reports import ExplorationReport, render
from skilltree.synthetic import synthetic_tree

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def ga(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO, capture_output=True, text=True,
                          env=os.environ.copy(), timeout=120)


def populate(root: Path, skills: int) -> tuple[int, int]:
    """A store with a synthetic tree, 8 exploration reports in it, 60 days of reads, two feedback runs."""
    store = MemoryStore(root, create=True)
    tree = synthetic_tree(skills, now=NOW, seed=3)
    newest = sorted(tree.skills.values(), key=lambda s: (s.created, s.id))[-8:]

    def reports(txn):
        for n, s in enumerate(newest):
            report = ExplorationReport(title=f"Learn <{s.name}>", category=s.category, skill=s.id,
                                       score_vector=s.score_vector, predicted=s.predicted, verified=s.verified,
                                       artifacts=[s.sop], tokens=20000 + n, created=s.created)
            txn.write(f"reports/{s.created:%Y-%m-%d}-{s.id}.md", render(report, "# Notes\nverified by a run.\n"))

    commit_tree(store, lambda _: tree, message="synthetic skills", author="test", extra=reports)
    log, rng = AccessLog(root), random.Random(1)
    ordered = sorted(tree.skills.values(), key=lambda s: s.id)
    for k in range(skills * 5):
        skill = rng.choice(ordered[: max(3, skills // 3)])
        when = skill.created + timedelta(days=rng.uniform(0, 60))
        if when < NOW:
            log.record(skill.sop, f"task-{k}", when)
    run_feedback(root, NOW - timedelta(days=40))
    run_feedback(root, NOW)
    return len(tree.skills), len(newest)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def open_in_chromium(browser, html: Path, shot: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(html.as_uri())
        page.wait_for_selector("html[data-ready='1']")
        facts = page.evaluate("""() => ({
            title: document.title,
            skills: document.querySelectorAll('svg.tree circle.skill').length,
            categories: document.querySelectorAll('svg.tree circle.category').length,
            weightLines: document.querySelectorAll('svg.weights path').length,
            cards: document.querySelectorAll('#reports .card').length,
            weekBars: document.querySelectorAll('svg.timeline rect.bar').length,
            treeHeight: document.querySelector('svg.tree').getBoundingClientRect().height,
        })""")
        page.screenshot(path=str(shot), full_page=True)
        chip = page.locator(".chip").first
        chip.click()
        focused = chip.get_attribute("data-category")
        dimmed = page.evaluate("""(c) => [...document.querySelectorAll('svg.tree circle.skill')]
            .filter(e => e.classList.contains('dim')).every(e => e.dataset.category !== c)
            && document.querySelectorAll('svg.tree circle.skill.dim').length > 0""", focused)
        header = page.locator("#top th", has_text="uses")
        header.click()
        header.click()  # second click: ascending
        sorted_uses = page.evaluate("""() => [...document.querySelectorAll('#top tbody tr')]
            .map(r => parseFloat(r.cells[2].dataset.value))""")
        return facts, dimmed, sorted_uses, errors, requests
    finally:
        page.close()


@pytest.mark.timeout(180)
def test_report_renders_in_chromium_without_errors(tmp_path, ga_home, browser):
    n_skills, n_reports = populate(ga_home / "memory", 40)
    out = tmp_path / "report"
    result = ga("skills", "report", "--out", str(out), "--now", NOW.isoformat())
    assert result.returncode == 0, result.stderr
    assert f"wrote {out / 'report.html'}" in result.stdout

    md = (out / "report.md").read_text()
    for heading in ("## Skills per category", "## Top skills", "## Usage per week", "## Weight history",
                    "## Recent exploration reports"):
        assert heading in md
    assert f"{n_skills} skills" in md and "| initial | 0.300 | 0.200 | 0.300 | 0.200 | initial |" in md
    assert md.count("Learn <") == n_reports

    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html and "<script src" not in html
    assert "Learn &lt;" in html and "Learn <" not in html  # names are escaped

    facts, dimmed, sorted_uses, errors, requests = open_in_chromium(browser, out / "report.html", tmp_path / "report.png")
    assert errors == []
    assert all(url.startswith("file://") for url in requests)
    assert facts["skills"] == n_skills and facts["categories"] == 6
    assert facts["weightLines"] == 4 and facts["cards"] == n_reports
    assert facts["weekBars"] > 0 and facts["treeHeight"] > 300
    assert dimmed  # clicking a category chip focuses it
    assert sorted_uses == sorted(sorted_uses) and sorted_uses[0] < sorted_uses[-1]  # the table sorts
    shot = (tmp_path / "report.png").read_bytes()
    width, height = png_size(shot)
    assert width == 1280 and height > 1500 and len(shot) > 50_000


@pytest.mark.timeout(120)
def test_report_of_an_empty_store_renders_too(tmp_path, ga_home, browser):
    MemoryStore(ga_home / "memory", create=True)
    out = tmp_path / "empty"
    assert ga("skills", "report", "--out", str(out)).returncode == 0
    assert "None yet." in (out / "report.md").read_text()
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((out / "report.html").as_uri())
    page.wait_for_selector("html[data-ready='1']")
    text = page.inner_text("body")
    page.screenshot(path=str(tmp_path / "empty.png"))
    page.close()
    assert errors == []
    assert "No skills yet" in text and "No exploration reports yet." in text
    assert png_size((tmp_path / "empty.png").read_bytes())[0] > 0


def test_report_errors_are_one_line(tmp_path, ga_home):
    result = ga("skills", "report", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "no memory store at" in result.stderr and "ga memory init" in result.stderr
    MemoryStore(ga_home / "memory", create=True)
    result = ga("skills", "report", "--reports", str(tmp_path / "missing"))
    assert result.returncode == 2 and "--reports" in result.stderr and "no such directory" in result.stderr
