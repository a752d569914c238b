"""history.jsonl's group commit (memory_shared/groupsync.py) under kill -9: a turn whose append returned is in its
file whole, whatever batch the kill cut through.

A real process runs 64 threads, each appending turns to its own history through worker.history.History (so
the threads' flushes are shared batches) and printing "acked THREAD TURN" the moment an append returns. The
test kills it with SIGKILL after a few hundred acknowledgements, while batches are in flight, and reads every file.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import sys, threading
from pathlib import Path
from worker.history import History

folder = Path(sys.argv[1])
lock = threading.Lock()

def one(i):
    history = History(folder / f"h{i}" / "history.jsonl")
    for turn in range(1, 100000):
        history.append({"turn": turn, "thread": i, "text": "x" * (100 + turn % 50)})
        with lock:
            sys.stdout.write(f"acked {i} {turn}\\n")
            sys.stdout.flush()

threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def test_a_kill_during_a_batch_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    acked: dict[int, int] = {}
    try:
        for count, line in enumerate(proc.stdout, 1):  # type: ignore[union-attr]
            _, thread, turn = line.split()
            acked[int(thread)] = max(acked.get(int(thread), 0), int(turn))
            if count >= 400:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert len(acked) > 1, acked  # several threads wrote: their flushes were shared
    for thread, last in acked.items():
        lines = (tmp_path / f"h{thread}" / "history.jsonl").read_bytes().split(b"\n")
        whole = [json.loads(line) for line in lines[:-1]]  # every line but a torn last one is whole JSON
        turns = [record["turn"] for record in whole]
        assert turns == list(range(1, len(turns) + 1)), f"thread {thread}: turns out of order or missing: {turns}"
        assert len(turns) >= last, f"thread {thread}: turn {last} was acknowledged, the file ends at {len(turns)}"
