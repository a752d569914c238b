"""A reduce's answer keeps ga's status heads true: the model may not promote an input it was shown as unverified.
Everything real: the in-process executor, the scripted model over HTTP, bubblewrap for code_run."""
from __future__ import annotations

from pathlib import Path

from configs import load_settings
from orchestrator import fanout
from tests.fanout_support import answer_task, start_server

# the shape of the live 1.5B reduce of bench/paper/fanout3: its input headed "### fib (unverified)", its answer
# "### fib (succeeded)", and the file the user reads said so
MISSTATED = "### compute (succeeded)\n42\n\n### guess (succeeded)\nThe script ran successfully. The number is 55."


def test_a_reduce_that_calls_an_unverified_input_succeeded_gets_the_real_status_back(tmp_path: Path) -> None:
    script = {"tasks": [{"match": "List each task", "turns": [{"content": MISSTATED}]},
                        answer_task("Compute", "42"),
                        {"match": "Guess", "turns": [{"content": "The script ran successfully. The number is 55."}]}]}
    server = start_server(script, tmp_path / "requests.jsonl")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"""
version: 1
name: heads
defaults: {{model: "scripted@{server.base_url}", max_turns: 4}}
tasks:
  - {{id: compute, prompt: "Compute 6*7 with a script."}}
  - {{id: guess, prompt: "Guess the 10th Fibonacci number."}}
reduce: {{prompt: "List each task's number.", output: numbers.md}}
""")
    try:
        run = fanout(tasks, out=tmp_path / "runs", display="quiet", settings=load_settings({"fanout.executor": "local"}))
    finally:
        server.stop()
    assert {r.task_id: r.status for r in run.results} == {"compute": "succeeded", "guess": "unverified"}
    written = (run.run_dir / "reduce" / "numbers.md").read_text()
    assert "### guess (unverified)\n" in written and "### guess (succeeded)" not in written
    assert "### compute (succeeded)\n42" in written  # a true head and the model's text stay as they were
    reduce = run.reduce
    assert reduce is not None and reduce.answer == written.rstrip("\n")
    assert reduce.status == "unverified"
    assert reduce.reason.startswith("ga restored the status its answer misstated: guess unverified (it said "
                                        "succeeded)")
