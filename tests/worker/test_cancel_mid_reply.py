"""A task cancelled while its model request is in flight (a task timeout, a stop) ends at once: the request is
cut, not waited for up to request_timeout. Real scripted server over HTTP, a real Worker and LLMClient."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from configs import load_settings
from worker import Runtime, TaskSpec, Worker
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.record import Stop
from worker.scripted import ScriptedServer

REQUEST_TIMEOUT = 600  # what the cancel must not wait for


@pytest.mark.parametrize("fault", [{"kind": "hang", "seconds": 600},  # a server still reading the prompt
                                   {"kind": "slow_loris", "interval": 1.0}])  # a reply trickling in
def test_a_cancel_cuts_the_model_request_in_flight(tmp_path: Path, fault: dict) -> None:
    settings = load_settings({}, user_file=tmp_path / "none", project_file=tmp_path / "none")
    log = tmp_path / "requests.jsonl"
    script = {"tasks": [{"match": ".*", "turns": [{"content": "never seen"}], "faults": [{"turn": 0, **fault}]}]}
    with ScriptedServer(script, log_path=log) as server:
        config = resolve_model(f"scripted@{server.base_url}", settings).model_copy(
            update={"request_timeout": REQUEST_TIMEOUT, "max_retries": 3})
        worker = Worker(TaskSpec("do the task", task_id="t1", workdir=tmp_path / "work", settings=settings,
                                 history_path=tmp_path / "t1" / "history.jsonl"),
                        Runtime(model=LLMClient(config)))
        records = []
        runner = threading.Thread(target=lambda: records.append(worker.run()), daemon=True)
        runner.start()
        deadline = time.monotonic() + 60
        while not (log.is_file() and log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text(), "the request never reached the server"
        worker.cancel()
        runner.join(60)  # a tenth of request_timeout: before the cut, the run waited for all of it
        assert not runner.is_alive(), "the cancelled task is still waiting for its model's reply"
    [record] = records
    assert (record.status, record.reason, record.stop) == ("failed", "cancelled", Stop.cancelled)
    assert record.turns == 0
    assert len(log.read_text().splitlines()) == 1  # cut, not retried
