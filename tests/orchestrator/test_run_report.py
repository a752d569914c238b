"""Run inspection: `ga runs show RUN TASK` and `ga runs report` on a real fan-out (real Ray, the scripted
server over HTTP) with a retried and a failed task; the page checked in a real Chromium."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from orchestrator import fanout
from orchestrator.ledger import RunDir
from orchestrator.views.runview import load_run_view
from tests.fanout_support import answer_task, read_jsonl, requests_for, start_server
from tests.ga_support import invoke_ga
from tests.orchestrator.test_fanout_faults import _kill_when_running, _sleeper

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """Two tasks that succeed, one whose worker process is killed -9 once (retried, then it succeeds), one
    that fails (401). One slot, so the attempts are deterministic."""
    root = tmp_path_factory.mktemp("report")
    script = {"tasks": [
        _sleeper("flaky", 2),
        {**answer_task("broken"), "faults": [{"kind": "unauthorized"}]},
        answer_task("steady"),
        {"match": "Merge", "turns": [{"content": "merged"}]},
    ]}
    server = start_server(script, root / "requests.jsonl")
    stop = threading.Event()
    killer = threading.Thread(target=_kill_when_running, args=(root / "runs", {"flaky": 1}, stop), daemon=True)
    killer.start()
    try:
        run = fanout({"name": "inspect", "retries": 1, "concurrency": 1,
                      "defaults": {"model": f"scripted@{server.base_url}", "max_turns": 4},
                      "tasks": [{"id": "steady-1", "prompt": "steady one"}, {"id": "steady-2", "prompt": "steady two"},
                                {"id": "flaky", "prompt": "flaky task"}, {"id": "broken", "prompt": "broken task"}],
                      "reduce": {"prompt": "Merge what they found."}},
                     out=root / "runs", display="quiet")
    finally:
        stop.set()
        server.stop()
    return root / "runs", run.run_id, root / "requests.jsonl"


def test_runs_show_task_prints_the_conversation_with_attempts(finished_run) -> None:
    runs, run_id, _ = finished_run
    done = invoke_ga("runs", "show", run_id, "flaky", "--out", str(runs))
    code, out = done.exit_code, done.output
    assert code == 0, out
    assert "attempt 1 on slot" in out and "retried" in out and "attempt 2 on slot" in out
    assert "flaky task" in out  # the task as the worker received it
    assert "code_run" in out and "time.sleep(2)" in out  # the call with its arguments
    assert "← ok, " in out and "slept" in out  # its result, with its size
    assert "turn 2" in out and " out · " in out  # per-turn tokens and seconds
    done = invoke_ga("runs", "show", run_id, "nope", "--out", str(runs))
    code, out = done.exit_code, done.output
    assert code == 2 and "has no task 'nope'" in out and "steady-1" in out


def test_runs_show_task_json_replays_exactly_what_the_server_received(finished_run) -> None:
    runs, run_id, log_path = finished_run
    done = invoke_ga("runs", "show", run_id, "steady-2", "--out", str(runs), "--json")
    code, out = done.exit_code, done.output
    assert code == 0, out
    replayed = json.loads(out)
    served = [r["body"]["messages"] for r in requests_for(read_jsonl(log_path), "steady two")]
    assert replayed == served and len(replayed) == 2


def test_run_view_reads_attempts_usage_and_failures(finished_run) -> None:
    runs, run_id, _ = finished_run
    view = load_run_view(runs, run_id)
    by_id = {t.task_id: t for t in view.tasks}
    assert [t.task_id for t in view.tasks] == ["steady-1", "steady-2", "flaky", "broken", "reduce"]
    assert [a.status for a in by_id["flaky"].attempts] == ["retried", "succeeded"]
    assert [a.status for a in by_id["broken"].attempts] == ["failed"]
    assert "died" in by_id["flaky"].attempts[0].reason or "lost" in by_id["flaky"].attempts[0].reason
    assert all(a.end is not None and a.end >= a.start and a.slot is not None for t in view.tasks for a in t.attempts)
    failures = view.failures_by_reason()
    assert sum(failures.values(), []) == ["broken"]
    total = sum(t.usage.get("total", 0) for t in view.tasks)
    assert total == sum(u["prompt"] + u["completion"] for u in view.usage_by_model().values()) > 0


def test_report_page_in_chromium(finished_run, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from worker.web.chromium import CLOSED_NETWORK_FLAGS, find_chromium

    runs, run_id, _ = finished_run
    done = invoke_ga("runs", "report", run_id, "--runs-dir", str(runs), "--out", str(tmp_path))
    code, out = done.exit_code, done.output
    assert code == 0, out
    page_path, md = tmp_path / "report.html", (tmp_path / "report.md").read_text()
    assert "| broken | failed | 1 |" in md and "| flaky | succeeded | 2 |" in md and "## Failures by reason" in md
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(find_chromium(None)),
                                    args=["--no-sandbox", "--disable-gpu", *CLOSED_NETWORK_FLAGS])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(120_000)  # Playwright's 30 s is too short for a click on a machine under load
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert page.locator("#tasks tr.task").count() == 5
        assert "1 failed" in page.inner_text("#facts") and "broken" in page.inner_text("#failures")
        page.click("#tasks tr.task[data-id='flaky']")
        page.wait_for_selector("#conv .turn")
        panel = page.inner_text("#conv")
        assert "attempt 1" in panel and "retried" in panel and "attempt 2" in panel and "slept" in panel
        page.screenshot(path=str(tmp_path / "conversation.png"))
        page.keyboard.press("Escape")
        page.locator("#timeline").scroll_into_view_if_needed()
        box = page.locator("#timeline").bounding_box()
        bars = page.evaluate("bars.map(b => [b.x + b.w / 2, b.y + b.h / 2, b.t.id])")
        assert len(bars) == sum(len(t.attempts) for t in load_run_view(runs, run_id).tasks) == 6
        x, y, task_id = bars[0]
        page.mouse.move(box["x"] + x, box["y"] + y)
        # hover tells the task (waited for: the mousemove handler runs when a busy renderer gets to it)
        page.wait_for_function(f"document.querySelector('#tip').textContent.includes({json.dumps(task_id)})")
        page.mouse.click(box["x"] + x, box["y"] + y)
        page.wait_for_function(f"document.querySelector('#conv h2')?.textContent.startsWith({json.dumps(task_id)})")
        browser.close()
    assert errors == []
    assert requests == [page_path.as_uri()]  # no network, nothing else loaded


def test_report_of_a_run_still_in_progress(finished_run, tmp_path: Path) -> None:
    runs, run_id, _ = finished_run
    copy = tmp_path / "runs" / run_id
    shutil.copytree(runs / run_id, copy)
    (copy / "summary.json").unlink()
    (copy / "reduce" / "result.json").unlink()
    lines = (copy / "ledger.jsonl").read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if '"succeeded"' in line)  # before anything finished
    (copy / "ledger.jsonl").write_text("\n".join(lines[:cut]) + "\n")
    (copy / "results.jsonl").write_text("")
    driver = RunDir(copy)
    assert driver.lock()  # as its driver holds it while the run goes on
    view = load_run_view(tmp_path / "runs", run_id)
    assert view.status == "running" and view.finished is None
    assert {t.status for t in view.tasks} <= {"running", "queued"} and any(t.status == "running" for t in view.tasks)
    done = invoke_ga("runs", "report", str(copy))
    code, out = done.exit_code, done.output
    assert code == 0, out
    assert "running" in (copy / "report.md").read_text()
    driver.close()  # its driver gone (killed): nothing runs any more, and the view says so
    view = load_run_view(tmp_path / "runs", run_id)
    assert view.status == "stopped" and {t.status for t in view.tasks} <= {"stopped", "not started"}
