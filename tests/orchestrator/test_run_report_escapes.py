"""`ga runs report` renders what a task wrote (its answer, its reason, its conversation): hostile text, which must
show as text and load nothing. A real `ga fanout` whose scripted model answers with markup, the real report, its
report.md rendered by a real CommonMark parser (markdown-it, GFM tables on) and its page in a real Chromium
whose every request is watched, with a loopback listener as the beacon's target.
"""
from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from markdown_it import MarkdownIt

from tests.ga_support import run_ga

# report.md keeps an answer's first 120 characters: the markup that matters most comes first
MARKUP = ("BEGIN ![p](BEACON/m.png) <img src=BEACON/h.png> | cell | **b** `c` [link](BEACON/l) "
          "<script>document.title='owned'</script> END")


class _Beacon(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        _Beacon.seen.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def beacon() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Beacon)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Beacon.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_task_written_markup_renders_as_text_in_both_reports(tmp_path: Path, beacon: str) -> None:
    hostile = MARKUP.replace("BEACON", beacon)
    script = tmp_path / "model.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [{"content": hostile}]}]}))
    work = tmp_path / "work"
    work.mkdir()
    (work / "tasks.yaml").write_text(json.dumps({"tasks": [{"id": "say", "prompt": "say it",
                                                             "check": {"pattern": "^BEGIN"}}],
                                                 "defaults": {"model": f"scripted:{script}"}}))
    done = run_ga("fanout", "tasks.yaml", "--json", "--no-preflight", cwd=work, timeout=300,
                  env={"GA_FANOUT__EXECUTOR": "local"})
    assert done.stdout.strip(), done.stderr[-2000:]
    (run_dir,) = (work / "runs").iterdir()
    out = tmp_path / "report"
    shown = run_ga("runs", "report", run_dir.name, "--runs-dir", str(work / "runs"), "--out", str(out), timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]

    markdown = (out / "report.md").read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "BEGIN" in rendered, markdown  # the answer is there
    for made in ("<img", "<a ", "<script"):
        assert made not in rendered, (made, rendered)
    row = next(row for row in rendered.split("<tr>") if "BEGIN" in row)
    assert "| cell |" in row and row.count("<td>") == 8, row  # the task's | closed no cell

    from playwright.sync_api import sync_playwright

    from worker.web.chromium import CLOSED_NETWORK_FLAGS, find_chromium

    page_path = out / "report.html"
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(find_chromium(None)),
                                    args=["--no-sandbox", "--disable-gpu", *CLOSED_NETWORK_FLAGS])
        try:
            page = browser.new_page()
            page.set_default_timeout(120_000)
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-ready='1']")
            page.click("#tasks tr.task")
            page.wait_for_selector("#conv .turn")
            panel = page.inner_text("#conv")
            made = page.evaluate("document.querySelectorAll('#conv img, #conv a, #conv script, #conv strong').length")
            title = page.title()
        finally:
            browser.close()
    assert f"<img src={beacon}/h.png>" in panel and "<script>" in panel and "END" in panel, panel  # shown as written
    assert made == 0 and title != "owned", (made, title)
    assert requests == [page_path.as_uri()] and _Beacon.seen == [], (requests, _Beacon.seen)
    assert json.loads(done.stdout)["results"][0]["answer"].startswith("BEGIN")
