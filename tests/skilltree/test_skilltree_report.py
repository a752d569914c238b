"""`ga skills report` end to end: a real store and access log, the real CLI, the HTML in a real Chromium
(empty tree, the offline exploration cycle's tree, a synthetic 1,000-skill tree), with the page's
text checked for overlap and cut labels through element bounding boxes, and screenshots taken."""
import os
import random
import struct
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory_shared import MemoryStore
from memory_shared.stats import AccessLog
from skilltree.commit import commit_tree
from skilltree.operations import run_feedback
from skilltree.reports import ExplorationReport, render
from skilltree.synthetic import synthetic_tree
from tests.ga_support import invoke_ga, run_ga

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SHOTS = os.environ.get("GA_REPORT_SHOTS")  # also keep the screenshots here (to look at them)

LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
  for (const svg of document.querySelectorAll('svg')) {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].map(t => [t, t.getBoundingClientRect()]);
    for (const [t, b] of texts) if (!inside(b, frame)) problems.push(`${svg.className.baseVal}: "${t.textContent}" leaves the chart`);
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++)
        if (hit(texts[i][1], texts[j][1]))
          problems.push(`${svg.className.baseVal}: "${texts[i][0].textContent}" overlaps "${texts[j][0].textContent}"`);
  }
  for (const label of document.querySelectorAll('svg.coverage text.cat-label')) {
    const box = document.querySelector(`svg.coverage g[data-category="${CSS.escape(label.dataset.category)}"] rect.cat-box`);
    if (!inside(label.getBoundingClientRect(), box.getBoundingClientRect())) problems.push(`category label "${label.textContent}" is cut`);
  }
  for (const label of document.querySelectorAll('svg.coverage text.skill-label')) {
    const cell = document.querySelector(`svg.coverage rect.skill[data-skill="${CSS.escape(label.dataset.skill)}"]`);
    if (!inside(label.getBoundingClientRect(), cell.getBoundingClientRect())) problems.push(`skill label "${label.textContent}" is cut`);
  }
  for (const el of document.querySelectorAll('body *')) {
    const style = getComputedStyle(el);
    if (['hidden', 'clip'].includes(style.overflowX) && el.textContent.trim() && el.scrollWidth > el.clientWidth + 1
        && !el.closest('.scroll'))
      problems.push(`text cut in <${el.tagName.toLowerCase()} class="${el.className}">`);
  }
  for (const el of document.querySelectorAll('.nowrap, th, .kpi span, td.num, #skill-table td:nth-child(7)')) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const rects = [];
    while (walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(walker.currentNode);
      rects.push(...[...range.getClientRects()].filter(r => r.width > 0));
    }
    const lines = new Set(rects.map(r => Math.round(r.bottom)));
    if (lines.size > 1) problems.push(`wrapped: "${el.textContent}"`);
  }
  for (const th of document.querySelectorAll('th')) {
    const text = th.textContent.trim();
    if (/^(brea|dept|util|inno)$/.test(text)) problems.push(`abbreviated dimension "${text}"`);
  }
  return problems;
}"""


def populate(root: Path, skills: int) -> tuple[int, int]:
    """A store with a synthetic tree, 8 exploration reports in it, 60 days of reads, two feedback runs."""
    store = MemoryStore(root, create=True)
    tree = synthetic_tree(skills, now=NOW, seed=3)
    newest = sorted(tree.skills.values(), key=lambda s: (s.created, s.id))[-8:]

    def reports(txn):
        for n, s in enumerate(newest):
            report = ExplorationReport(title=f"Learn <{s.name}>", category=s.category, skill=s.id,
                                       score_vector=s.score_vector, predicted=s.predicted, verified=s.verified,
                                       artifacts=[s.sop], tokens=20000 + n, created=s.created,
                                       problems=[] if s.verified else [f"re-ran {s.id}.py: exit 1"])
            txn.write(f"reports/{s.created:%Y-%m-%d}-{s.id}.md", render(report, "# Notes\nverified by a run.\n"))
        txn.write(newest[-1].sop, "---\nname: x\n---\n# Steps <marquee>1</marquee>\n")

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
    return len(tree.skills), sum(not s.verified for s in newest)


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


def open_page(browser, html: Path, shot: Path, width: int = 1280):
    """The page loaded in Chromium, its console errors and requests, and a full-page screenshot."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(120_000)  # Playwright's 30 s is too short for a click on a machine under load
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.as_uri())
    page.wait_for_selector("html[data-ready='1']")
    page.screenshot(path=str(shot), full_page=True)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SHOTS) / shot.name).write_bytes(shot.read_bytes())
    return page, errors, requests


def facts(page) -> dict:
    return page.evaluate("""() => ({
        skills: document.querySelectorAll('svg.coverage rect.skill').length,
        categories: document.querySelectorAll('svg.coverage rect.cat-box').length,
        failed: document.querySelectorAll('svg.coverage rect.failed').length,
        attempts: document.querySelectorAll('#attempts .attempt').length,
        planRows: document.querySelectorAll('#plan tbody tr').length,
        selected: document.querySelectorAll('#plan tbody tr.sel').length,
        funnelRows: document.querySelectorAll('#funnel tbody tr').length,
        points: document.querySelectorAll('svg.scatter circle.pt').length,
        thresholds: document.querySelectorAll('svg.scatter line.threshold').length,
        weightLines: document.querySelectorAll('svg.weights path.wline').length,
        panels: Object.fromEntries([...document.querySelectorAll('section.panel')]
                                   .map(p => [p.id, Math.round(p.getBoundingClientRect().height)])),
    })""")


def colours_have_one_meaning(html: str) -> None:
    from skilltree import charts

    dims = set(charts.DIMENSION_COLORS.values())
    meanings = [set(charts.USE_SCALE), dims, {charts.FAILED}, {charts.DEMAND}, {charts.OK}]
    for n, group in enumerate(meanings):
        for other in meanings[n + 1:]:
            assert not group & other
    assert len(dims) == 4


@pytest.mark.timeout(300)
def test_a_1000_skill_tree_renders_without_overlap_or_cut_labels(tmp_path, ga_home, browser):
    n_skills, n_unverified = populate(ga_home / "memory", 1000)
    out = tmp_path / "report"
    result = run_ga("skills", "report", "--out", str(out), "--now", NOW.isoformat(), "--runs", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out / 'report.html'}" in result.stdout

    md = (out / "report.md").read_text()
    for heading in ("## Coverage", "## Funnel per category", "## Predicted score against uses in the first 30 days",
                    "## The last plan", "## Explorations that did not become a verified skill", "## Skills",
                    "## Uses per week", "## Weight history"):
        assert heading in md
    assert f"{n_skills} skills" in md and "| initial | 0.300 | 0.200 | 0.300 | 0.200 | initial |" in md
    assert md.count("re-ran ") == n_unverified > 0  # every unverified exploration with its reason

    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html and "<script src" not in html
    assert "Learn &lt;" in html and "Learn <" not in html  # names are escaped
    assert "<marquee>" not in html  # embedded file text is data, not markup
    colours_have_one_meaning(html)

    page, errors, requests = open_page(browser, out / "report.html", tmp_path / "report-1000.png")
    try:
        seen = facts(page)
        problems = page.evaluate(LAYOUT_PROBLEMS)
        # the one SOP stored in this generation opens, embedded, in the viewer (the others are not links)
        page.locator("#skill-table a.file", has_text="SOP").first.click()
        viewer = page.inner_text("#viewer-text")
        page.click("#viewer-close")
        header = page.locator("#skill-table th", has_text="uses, 30 days")
        header.click()
        header.click()  # second click: ascending
        sorted_uses = page.evaluate("""() => [...document.querySelectorAll('#skill-table tbody tr')]
            .map(r => parseFloat(r.cells[2].dataset.value))""")
        # the layout check itself sees a cut label, an overlap and a wrapped date
        page.evaluate("""() => {
            const label = document.querySelector('svg.coverage text.cat-label');
            label.textContent = label.textContent + ' and a much longer name than its box can hold';
            const tick = document.querySelector('svg.scatter text.tick');
            tick.parentNode.appendChild(tick.cloneNode(true));
            const date = document.querySelector('#skill-table td .nowrap');
            date.style.whiteSpace = 'normal'; date.style.display = 'inline-block'; date.style.width = '3em';
        }""")
        planted = page.evaluate(LAYOUT_PROBLEMS)
    finally:
        page.close()
    assert errors == [] and all(url.startswith("file://") for url in requests)
    assert problems == []
    assert any("is cut" in p for p in planted) and any("overlaps" in p for p in planted)
    assert any(p.startswith("wrapped:") for p in planted)
    assert seen["skills"] == n_skills and seen["categories"] == 32 and seen["failed"] == n_unverified
    assert seen["funnelRows"] == 32 and seen["points"] == n_skills and seen["thresholds"] == 4
    assert seen["weightLines"] == 4 and seen["planRows"] == 0 and seen["attempts"] == n_unverified
    assert "# Steps <marquee>1</marquee>" in viewer
    assert sorted_uses == sorted(sorted_uses) and sorted_uses[0] < sorted_uses[-1]
    width, height = png_size((tmp_path / "report-1000.png").read_bytes())
    assert width == 1280 and height > 2000


@pytest.mark.timeout(180)
def test_an_empty_store_renders_with_panels_that_shrink(tmp_path, ga_home, browser):
    MemoryStore(ga_home / "memory", create=True)
    out = tmp_path / "empty"
    assert run_ga("skills", "report", "--out", str(out), "--runs", str(tmp_path)).returncode == 0
    md = (out / "report.md").read_text()
    assert "No skills yet." in md and "No plan yet." in md and "None yet." in md
    page, errors, _ = open_page(browser, out / "report.html", tmp_path / "report-empty.png")
    try:
        text = page.inner_text("body")
        seen = facts(page)
        problems = page.evaluate(LAYOUT_PROBLEMS)
    finally:
        page.close()
    assert errors == [] and problems == []
    assert "No skills yet" in text and "No plan yet" in text and "None: no exploration ended" in text
    assert all(height < 160 for name, height in seen["panels"].items() if name != "weights"), seen["panels"]
    assert png_size((tmp_path / "report-empty.png").read_bytes())[1] < 1400


@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(600)
def test_the_exploration_cycles_tree_shows_its_plan_failures_and_files(tmp_path, ga_home, browser):
    runs = tmp_path / "runs"
    script = REPO / "configs" / "examples" / "scripts" / "explore.yaml"
    cycle = invoke_ga("explore", "--once", "--model", f"scripted:{script}", "--batch", "5",
                      "--out", str(runs), "--json")
    assert cycle.exit_code == 0, cycle.output
    out = tmp_path / "report"
    result = run_ga("skills", "report", "--out", str(out), "--runs", str(runs))
    assert result.returncode == 0, result.stderr

    md = (out / "report.md").read_text()
    assert "re-ran locale_check.py: exit 1 (LC_ALL is not set)" in md  # unverified, with the re-run's message
    assert "no YAML front matter" in md                                  # failed: only in the run directory
    assert "| text | 2 | 1 | 1 | 0 | 0 |" in md                          # funnel: proposed, selected, verified, used
    assert md.count("selected: best of") == 4 and "not selected: rank 6" in md

    page, errors, requests = open_page(browser, out / "report.html", tmp_path / "report-cycle.png")
    try:
        seen = facts(page)
        problems = page.evaluate(LAYOUT_PROBLEMS)
        reasons = page.inner_text("#attempts")
        page.locator("#skills a.file", has_text="count_words.py").click()
        script_text = page.inner_text("#viewer-text")
        page.click("#viewer-close")
        page.locator("#skills a.file", has_text="SOP").first.click()
        sop_text = page.inner_text("#viewer-text")
    finally:
        page.close()
    assert errors == [] and problems == [] and all(url.startswith("file://") for url in requests)
    assert seen["skills"] == 3 and seen["failed"] == 2 and seen["attempts"] == 2
    assert seen["planRows"] == 6 and seen["selected"] == 5 and seen["points"] == 3
    assert "LC_ALL is not set" in reasons and "no YAML front matter" in reasons
    assert "def " in script_text or "import" in script_text
    assert "evidence" in sop_text
    assert seen["panels"]["coverage"] < 400  # 3 skills do not take a screen


def test_report_errors_are_one_line(tmp_path, ga_home):
    result = run_ga("skills", "report", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "no memory store at" in result.stderr and "ga memory init" in result.stderr
    MemoryStore(ga_home / "memory", create=True)
    result = run_ga("skills", "report", "--reports", str(tmp_path / "missing"))
    assert result.returncode == 2 and "--reports" in result.stderr and "no such directory" in result.stderr
    result = run_ga("skills", "report", "--runs", str(tmp_path / "missing"))
    assert result.returncode == 2 and "--runs" in result.stderr and "no such directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    broken = tmp_path / "runs" / "r1"
    broken.mkdir(parents=True)
    (broken / "explore.json").write_text("{not json")
    result = run_ga("skills", "report", "--out", str(tmp_path / "y"), "--runs", str(tmp_path / "runs"))
    assert result.returncode == 0 and (tmp_path / "y" / "report.html").is_file()  # a broken run is skipped
    assert "report.run_skipped" in result.stderr and str(broken / "explore.json") in result.stderr
