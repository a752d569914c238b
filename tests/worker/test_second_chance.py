"""The second chance: an answer right after a failed code_run, after a call that could not be read, or refused by
the task's check gets one note back before it is taken. The note names the fix, never invites the model to say
the same again, and never quotes the check. Real scripted server over HTTP, real code_run in bubblewrap."""
from __future__ import annotations

import json
from pathlib import Path

from configs import load_settings
from worker import Runtime, TaskSpec, Worker
from worker.history import replay
from worker.model import LLMClient
from worker.modelconfig import resolve_model
from worker.scripted import ScriptedServer
from worker.taskcheck import TaskCheck

BROKEN = {"name": "code_run", "arguments": {"script": "print(totl)", "type": "python"}}
FIXED = {"name": "code_run", "arguments": {"script": "total = 6 * 7\nprint(total)", "type": "python"}}


def run(tmp_path: Path, turns: list[dict], chances: int = 1, check: dict | None = None):
    settings = load_settings({"worker.second_chance": chances}, user_file=tmp_path / "none",
                             project_file=tmp_path / "none")
    log_path = tmp_path / "requests.jsonl"
    with ScriptedServer({"tasks": [{"match": ".*", "turns": turns}]}, log_path=log_path) as server:
        model = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        worker = Worker(TaskSpec("print six times seven", task_id="t1", workdir=tmp_path / "work", settings=settings,
                                 history_path=tmp_path / "t1" / "history.jsonl",
                                 check=TaskCheck.model_validate(check) if check else None), Runtime(model=model))
        result = worker.run()
    requests = [json.loads(line)["body"] for line in log_path.read_text().splitlines()]
    return result, requests


def test_a_model_told_its_script_failed_fixes_it_and_succeeds(tmp_path: Path) -> None:
    turns = [{"tool_calls": [BROKEN]}, {"content": "It printed 42."}, {"tool_calls": [FIXED]}, {"content": "42"}]
    result, requests = run(tmp_path, turns)
    assert result.status == "succeeded", result.reason
    assert result.answer == "42" and result.turns == 4
    assert result.reason == "after a second chance"
    note = requests[2]["messages"][-1]
    assert note["role"] == "user" and "last code_run failed: NameError: name 'totl' is not defined" in note["content"]
    assert "again" not in note["content"].split("Fix the script")[0]  # no "say so again": it names the fix only
    assert "new process, so define or import `totl` in the same script" in note["content"]  # the fix, named
    assert "say so" not in note["content"]
    # the note and the turn it cost are in the history, and the usage counts all four requests
    history = replay(Path(result.history_path))
    assert len(history) == 4 and history[2][-1] == note
    recorded = [json.loads(line)["usage"] for line in Path(result.history_path).read_text().splitlines()]
    assert len(recorded) == 4
    assert result.usage.total == sum(u["total"] for u in recorded)


def test_one_note_only_then_the_answer_stands_unverified(tmp_path: Path) -> None:
    turns = [{"tool_calls": [BROKEN]}, {"content": "It printed 42."}]  # the model insists
    result, requests = run(tmp_path, turns)
    assert len(requests) == 3
    assert result.status == "unverified"
    assert result.reason.startswith("last code_run failed: NameError") and result.reason.endswith("after a second chance")


def test_zero_takes_the_first_answer_as_before(tmp_path: Path) -> None:
    result, requests = run(tmp_path, [{"tool_calls": [BROKEN]}, {"content": "It printed 42."}], chances=0)
    assert len(requests) == 2 and result.status == "unverified" and "second chance" not in result.reason


def test_a_checked_answer_is_checked_before_any_note(tmp_path: Path) -> None:
    # a right answer with nothing run behind it: the check decides at once, no note is sent
    result, requests = run(tmp_path / "right", [{"content": "42"}], check={"pattern": r"\b42\b"})
    assert len(requests) == 1 and result.status == "succeeded" and result.check["passed"]
    # a right answer after a failed run: the check passes it, no note about the failed run
    result, requests = run(tmp_path / "after", [{"tool_calls": [BROKEN]}, {"content": "42"}], check={"pattern": r"\b42\b"})
    assert len(requests) == 2 and result.status == "succeeded"


def test_a_refused_answer_gets_a_note_that_never_quotes_the_check(tmp_path: Path) -> None:
    check = {"pattern": r"\b42\b", "script": 'test "$GA_ANSWER" = 42'}
    turns = [{"content": "41"}, {"tool_calls": [FIXED]}, {"content": "42"}]
    result, requests = run(tmp_path, turns, check=check)
    note = requests[1]["messages"][-1]["content"]
    assert note.startswith("[ga] This task is checked and the check did not accept that answer.")
    assert "Nothing you ran backs it" in note
    assert "42" not in note and "GA_ANSWER" not in note and "\\b" not in note  # nothing of the check is handed over
    assert result.status == "succeeded" and result.turns == 3


def test_an_answer_backed_by_a_good_run_is_taken_at_once(tmp_path: Path) -> None:
    result, requests = run(tmp_path, [{"tool_calls": [FIXED]}, {"content": "42"}])
    assert len(requests) == 2 and result.status == "succeeded" and result.reason == ""


# The live 1.5B fib task of this session: after the NameError it wrote the fixed script in a block, with prose and
# no call, twice; the note said "fix the script and run it again", and the second reply was taken unverified.
FIXED_IN_PROSE = ("The error message indicates that the `totl` variable is not defined. Here's the corrected script:\n\n"
                  "```python\ntotl = 6 * 7\nprint(totl)\n```\n\nAfter running this script, the output will be:\n\n"
                  "```\n42\n```")


def test_a_fix_written_in_a_block_and_run_nowhere_is_shown_as_the_whole_call(tmp_path: Path) -> None:
    call = '<tool_call>{"name": "code_run", "arguments": {"type": "python", "script": "totl = 6 * 7\\nprint(totl)"}}</tool_call>'
    turns = [{"tool_calls": [BROKEN]}, {"content": FIXED_IN_PROSE}, {"content": call}, {"content": "42"}]  # copied
    result, requests = run(tmp_path, turns)
    note = requests[2]["messages"][-1]["content"]
    assert "The script in your reply's code block ran nowhere. Send it exactly like this" in note
    assert call in note and "Fix the script" not in note
    assert result.status == "succeeded" and result.answer == "42", result.reason


def test_an_answer_whose_number_the_run_did_not_print_is_told_so_then_unverified(tmp_path: Path) -> None:
    # the live 1.5B held-out word count: `wc -w words.txt` printed 24, the model answered 25, labelled succeeded
    result, requests = run(tmp_path / "told", [{"tool_calls": [FIXED]}, {"content": "41"}, {"content": "42"}])
    note = requests[2]["messages"][-1]["content"]
    assert note.startswith("[ga] Your answer says 41, a number your last code_run did not print (its output: 42")
    assert result.status == "succeeded" and result.answer == "42"
    result, _ = run(tmp_path / "insists", [{"tool_calls": [FIXED]}, {"content": "41"}, {"content": "It is 41."}])
    assert result.status == "unverified"
    assert result.reason.startswith("the answer's 41 is not among the numbers the last code_run printed")


# The live 1.5B held-out CSV sum: a numbered plan with its script in a python block and no call, taken as the answer.
PLAN = ("To calculate it:\n\n1. Multiply.\n2. Print.\n\n```python\n# Step 1: multiply\ntotal = 6 * 7\n"
        "# Step 2: print it\nprint(total)\n```")


def test_a_plan_whose_script_ran_nowhere_is_shown_the_call_to_run_it(tmp_path: Path) -> None:
    call = ('<tool_call>{"name": "code_run", "arguments": {"type": "python", "script": '
            '"# Step 1: multiply\\ntotal = 6 * 7\\n# Step 2: print it\\nprint(total)"}}</tool_call>')
    result, requests = run(tmp_path, [{"content": PLAN}, {"content": call}, {"content": "42"}])
    note = requests[1]["messages"][-1]["content"]
    assert note.startswith("[ga] Nothing ran yet. The script in your reply's code block ran nowhere.") and call in note
    assert result.status == "succeeded" and result.answer == "42", result.reason
