"""The run directory's batched appends (RunDir.batched, one durability point per pass of the map loop) under kill -9:
a result whose add_result returned is in results.jsonl whole, with its ledger line, even when the pass's
durability point (RunDir.sync) had not come yet, and a resume would not send it again.

A real process appends results in passes of 7 (a sync after each pass, as the map loop does) and prints
"acked ID" the moment add_result returns; the test kills it with SIGKILL after a few hundred acknowledgements.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.ledger import RunDir
from orchestrator.records import TaskRecord

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import sys, time
from pathlib import Path
from orchestrator.ledger import RunDir
from orchestrator.records import TaskRecord

run = RunDir.create(Path(sys.argv[1]), "run", {"name": "kill", "tasks": []})
run.batched = True
for i in range(1000000):
    run.add_result(TaskRecord(task_id=f"t{i}", status="succeeded", attempt=1, answer="x" * 200, finished=time.time()))
    sys.stdout.write(f"acked t{i}\\n")
    sys.stdout.flush()
    if i % 7 == 6:
        run.sync()
"""


def test_batched_results_survive_kill_9(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    acked = []
    assert proc.stdout is not None
    for line in proc.stdout:
        acked.append(line.split()[1])
        if len(acked) >= 300:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    acked += [line.split()[1] for line in proc.stdout.read().splitlines() if line.startswith("acked ")]
    run = RunDir.existing(tmp_path, "run")
    finished = run.results()
    assert set(acked) <= set(finished), f"acknowledged but lost: {sorted(set(acked) - set(finished))[:5]}"
    final_lines = {e.task_id for e in run.ledger_records() if e.event == "succeeded"}
    assert set(acked) <= final_lines
    assert all(record.answer == "x" * 200 for record in finished.values())  # no torn line survived the reopen
    reopened = RunDir(run.path).open_files()  # what a resume does: cut the torn tail, read results
    assert set(acked) <= set(reopened.results())
    reopened.close()


def test_no_result_is_written_before_the_spec_that_a_resume_needs(tmp_path: Path) -> None:
    """spec.jsonl may be written by a thread while the run starts (RunDir.create given a function): a result line
    waits until it is in place, and a spec that cannot be written fails the first result (nothing is half-done)."""
    release = threading.Event()

    def slow_spec() -> dict:
        release.wait(60)
        return {"name": "slow", "tasks": [{"id": "t0", "prompt": "p"}]}

    run = RunDir.create(tmp_path, "run", slow_spec)
    added = threading.Event()
    adder = threading.Thread(target=lambda: (run.add_result(TaskRecord(task_id="t0", status="succeeded", attempt=1,
                                                                       finished=time.time())), added.set()))
    adder.start()
    assert not added.wait(0.5), "a result was written before the run's spec.jsonl"
    assert not (run.path / "spec.jsonl").exists() and not (run.path / "results.jsonl").read_text()
    release.set()
    assert added.wait(60)
    adder.join()
    assert run.spec()["name"] == "slow" and set(run.results()) == {"t0"}
    run.close()

    def broken_spec() -> dict:
        raise OSError(28, "No space left on device")

    broken = RunDir.create(tmp_path, "broken", broken_spec)
    with pytest.raises(OSError, match="No space left"):
        broken.add_result(TaskRecord(task_id="t0", status="succeeded", attempt=1, finished=time.time()))
    assert not (broken.path / "results.jsonl").read_text()
    broken.close()
