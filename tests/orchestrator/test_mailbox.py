"""The in-process run's steering mailbox (orchestrator/local.py): real files, a real serving thread."""
from __future__ import annotations

import time
from pathlib import Path

from orchestrator.local import Mailbox, ask


def test_an_odd_request_gets_an_error_reply_and_the_mailbox_keeps_serving(tmp_path: Path) -> None:
    running = {"a"}
    mailbox = Mailbox(tmp_path, lambda request: {"ok": request["task_id"] in running})
    mailbox.start()
    try:
        assert ask(tmp_path, {"task_id": ["not", "hashable"]}, wait=60) == {"ok": False, "error": "bad request: TypeError"}
        assert ask(tmp_path, {"op": "tell"}, wait=60) == {"ok": False, "error": "bad request: KeyError"}
        torn = tmp_path / "steer" / "torn.json"
        torn.write_text('{"task_id": ', encoding="utf-8")
        assert ask(tmp_path, {"task_id": "a"}, wait=60) == {"ok": True}
        deadline = time.monotonic() + 60  # requests are served in name order: the torn one may come later
        while not torn.with_suffix(".reply").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "unreadable request" in torn.with_suffix(".reply").read_text(encoding="utf-8")
    finally:
        mailbox.stop()
    assert not list((tmp_path / "steer").glob("*.json"))
