"""Replies of real small models (tests/real_model/), replayed through the scripted server over real
HTTP, in native and text tool mode: what ga does with them now."""
from __future__ import annotations

import json
import re

import pytest

from configs import load_settings
from tests.real_model_support import ALPHA_WORDS, names, records, replay_run
from worker.history import replay

NAME_ERROR = "last code_run failed: NameError: name 'fibonacci' is not defined"
# recorded case -> (status, reason (prefix), code_run scripts run, text the answer contains)
EXPECTED = {
    # a lone code block is not an answer: corrected each time (the scripted server repeats the recorded reply)
    "qwen0.5b-text-fib": ("failed", "3 replies in a row were not answers; last: ```python def fibonacci", 0, ""),
    "qwen1.5b-native-fanout-fib": ("unverified", NAME_ERROR, 1, "55"),
    "qwen1.5b-native-fanout-squares": ("succeeded", "", 1, "2870"),
    # `python -c '...'` with no type: plainly shell, so it runs as bash (it was a SyntaxError as python)
    "qwen1.5b-native-fanout-words": ("succeeded", "", 1, "7"),
    "qwen1.5b-native-fenced-json-rewritten-by-proxy": ("unverified", NAME_ERROR, 1, "55"),
    "qwen1.5b-native-fib": ("unverified", NAME_ERROR, 1, "55"),
    "qwen1.5b-text-fanout-fib": ("unverified", NAME_ERROR, 1, "55"),
    "qwen1.5b-text-fanout-reduce": ("unverified", "no tool ran", 0, "1\n2\n3"),
    "qwen1.5b-text-fanout-words": ("succeeded", "", 1, "7"),
    "qwen1.5b-text-fib": ("unverified", NAME_ERROR, 1, "55"),
}
MODES = {"native": ("native", True), "text": ("text", True), "text-without-stop": ("text", False)}


@pytest.fixture
def settings(tmp_path):
    # the recordings were made without the second chance: a note would ask for a reply nobody recorded
    return load_settings({"worker.max_turns": 6, "worker.second_chance": 0}, user_file=tmp_path / "none", project_file=tmp_path / "none")


def tool_results(request: dict, mode: str) -> list[str]:
    """The tool results a request carries, in order, in either tool mode."""
    if mode == "native":
        return [m["content"] for m in request["messages"] if m["role"] == "tool"]
    texts = [m["content"] for m in request["messages"] if m["role"] == "user" and isinstance(m.get("content"), str)]
    return [found for text in texts for found in re.findall(r"<tool_result[^>]*>\n(.*?)\n</tool_result>", text, re.S)]


def assistant_texts(request: dict) -> list[str]:
    return [m.get("content") or "" for m in request["messages"] if m["role"] == "assistant"]


def test_every_recorded_case_has_an_expectation():
    assert sorted(EXPECTED) == names()


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_replies_replayed(tmp_path, settings, name, mode):
    tool_mode, stop = MODES[mode]
    status, reason, runs, says = EXPECTED[name]
    result, requests, history = replay_run(tmp_path, settings, name, tool_mode, stop=stop)
    assert (result.status, result.reason[:len(reason)]) == (status, reason), result.reason
    assert says in result.answer
    assert len(list((tmp_path / "work" / ".ga").glob("code_*.out"))) == runs  # the calls really ran
    for request in requests:  # an invented tool result never reaches the model again
        assert not any("<tool_result" in text for text in assistant_texts(request))
        assert request["max_tokens"] == 1536
        assert request.get("stop") == (["<tool_result"] if tool_mode == "text" and stop else None)
    if tool_mode == "native":
        # whatever form the call came in, it went back as a native call and its result
        if runs:
            calls = [m for m in requests[1]["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
            assert calls and calls[-1]["tool_calls"][0]["function"]["name"] == "code_run"
            assert any(m["role"] == "tool" and m["tool_call_id"] == calls[-1]["tool_calls"][0]["id"]
                       for m in requests[1]["messages"])
        assert [r["messages"] for r in requests] == replay(history)  # the history replays exactly


def test_fenced_json_call_runs_code_run_and_is_recorded_as_a_call(tmp_path, settings):
    result, requests, history = replay_run(tmp_path, settings, "qwen1.5b-native-fib", "native")
    first = json.loads(history.read_text().splitlines()[0])
    call = first["received"]["tool_calls"][0]["function"]
    assert call["name"] == "code_run" and json.loads(call["arguments"])["script"] == "print(fibonacci(10))"
    assert first["received"]["content"] is None  # the fenced block became the call
    assert first["received_raw"].startswith("```json")
    assert "NameError" in first["tool_results"][0]["output"]
    tool_result = [m for m in requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert tool_result.startswith("exit code 1") and "NameError" in tool_result
    assert result.status == "unverified" and "NameError" in result.reason


@pytest.mark.parametrize("stop", [True, False])
def test_invented_result_is_cut_and_the_real_one_is_believed(tmp_path, settings, stop):
    invented = records("qwen1.5b-text-fanout-words")[0]["received"]["content"]
    assert '"output": "10"' in invented  # the recording: the model invented 10 words
    result, requests, history = replay_run(tmp_path, settings, "qwen1.5b-text-fanout-words", "text", stop=stop)
    assert result.status == "succeeded" and result.answer == "7"
    second = json.dumps(requests[1]["messages"])
    assert '\\"output\\": \\"10\\"' not in second and "exit code 0\\n7" in second
    first = json.loads(history.read_text().splitlines()[0])
    assert "<tool_result" not in first["received"]["content"]
    if not stop:  # the server sent the invention: ga cut it and kept the original aside
        assert "<tool_result>" in first["received_raw"] and "cut" in first["notes"][0]


def test_the_fib_task_whose_only_script_failed_is_unverified_in_both_modes(tmp_path, settings):
    for mode in ("native", "text"):
        result, _, _ = replay_run(tmp_path / mode, settings, "qwen1.5b-text-fib", mode)
        assert result.status == "unverified"
        assert result.reason == NAME_ERROR
        assert "The 10th Fibonacci number is 55" not in result.answer  # the invented claim was cut


def test_a_failing_check_fails_the_task_and_a_passing_one_makes_it_succeed(tmp_path, settings):
    check = {"script": 'test "$(python3 fib.py)" = 55'}  # the model never wrote fib.py
    result, _, _ = replay_run(tmp_path / "a", settings, "qwen1.5b-native-fib", "native", check=check)
    assert result.status == "failed"
    assert result.reason.startswith("check failed: the check script failed: exit code 1")
    assert result.check == {"passed": False, "detail": result.reason[len("check failed: "):]}

    result, _, _ = replay_run(tmp_path / "b", settings, "qwen1.5b-text-fanout-reduce", "text", check={"pattern": r"\b55\b"})
    assert result.status == "failed" and result.reason == r"check failed: the answer does not match /\b55\b/"

    # the reduce's "1 2 3" is not backed by a tool run; a check that passes makes it succeed
    result, _, _ = replay_run(tmp_path / "c", settings, "qwen1.5b-text-fanout-reduce", "text",
                              check={"pattern": "^1$", "script": 'test "$GA_ANSWER" = "$(printf "1\\n2\\n3")"'})
    assert result.status == "succeeded" and result.check["passed"], result.reason


def test_tool_call_tags_and_fences_in_any_mode(tmp_path, settings):
    turns = [
        {"content": 'Running it.\n<tool_call>\n{"name": "code_run", "arguments": {"script": "print(6*7)"}}\n</tool_call>'},
        {"content": '```json\n{"name": "code_run", "arguments": {"script": "print(6*8)"\n```'},  # braces missing: repaired
        {"content": '```json\n{"name": "code_run", "arguments": {"script": "print(6*9)\n```'},  # cut inside the script
        {"content": 'Here is the config:\n```json\n{"name": "my_service", "arguments": {"port": 8080}}\n```'},
    ]
    for mode in ("native", "text"):
        result, requests, _ = replay_run(tmp_path / mode, settings, "", mode, turns=turns)
        assert "exit code 0\\n42" in json.dumps(requests[1]["messages"])
        assert "exit code 0\\n48" in json.dumps(requests[2]["messages"])  # the missing braces were closed
        error = tool_results(requests[3], mode)[-1]
        # a script cut off inside its string never runs half; the model is shown its own script in the right shape
        assert error.startswith("error: the code_run call in your reply is not valid JSON (Unterminated string")
        assert "Send it exactly like this" in error and '"script": "print(6*9)"' in error
        assert not any("exit code" in r for r in tool_results(requests[3], mode)[2:])
        # a JSON block naming no known tool is an answer, not a call; the last run (print(6*8)) backs nothing of it
        assert result.answer.startswith("Here is the config:") and "my_service" in result.answer
        assert (result.status, result.reason) == (
            "unverified", "the answer's 8080 is not among the numbers the last code_run printed")


def test_repeated_output_goes_back_as_an_error_and_three_in_a_row_fail(tmp_path, settings):
    loop = "I will now print the number.\n" * 40
    turns = [{"content": loop},
             {"content": "ok", "tool_calls": [{"name": "code_run", "arguments": {"script": "print(6*7)"}}]},
             {"content": "42"}]
    result, requests, _ = replay_run(tmp_path / "once", settings, "", "native", turns=turns)
    assert result.status == "succeeded" and result.answer == "42"
    error = requests[1]["messages"][-1]["content"]
    assert error.startswith("error: your reply was discarded: the line 'I will now print the number.' repeated")
    assert len(requests[1]["messages"][-2]["content"]) < 600  # the runaway text is not sent back whole

    block = "def f():\n    return 1\n" * 30
    result, requests, _ = replay_run(tmp_path / "thrice", settings, "", "text",
                                     turns=[{"content": block}, {"content": block}, {"content": block}])
    assert result.status == "failed" and "3 malformed replies in a row" in result.reason
    assert "a block of 2 lines" in result.reason and len(requests) == 3


def test_an_answer_cut_at_max_tokens_is_not_taken(tmp_path, settings):
    turns = [{"content": "The result is", "finish_reason": "length"}, {"content": "The result is 42."}]
    result, requests, _ = replay_run(tmp_path, settings, "", "native", turns=turns)
    assert result.answer == "The result is 42."
    assert "cut at the max_tokens limit" in requests[1]["messages"][-1]["content"]


def big_output_turns(count: int, settings=None) -> list[dict]:
    if settings is not None:
        settings.worker.max_turns = count + 2
    script = "print(' '.join(str(n) for n in range(1400)))"  # ~6,000 chars of output, no repetition
    return [{"content": f"step {i}", "tool_calls": [{"name": "code_run", "arguments": {"script": script}}]}
            for i in range(count)] + [{"content": "Done:", "echo_last_tool_result": True}]


def test_budget_follows_a_known_window_smaller_than_the_default(tmp_path, settings):
    assert settings.context.context_tokens == 24000
    window = 6000  # tokens; the scripted server refuses any prompt over it, as llama.cpp does
    result, requests, _ = replay_run(tmp_path, settings, "", "native", turns=big_output_turns(8, settings),
                                     model={"context_window": window}, script={"context_window": window})
    assert result.status == "succeeded", result.reason
    records = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert all(r["status"] == 200 for r in records)  # never refused: trimmed before sending
    sizes = [len(json.dumps(r["tools"], sort_keys=True) + "".join(json.dumps(m, sort_keys=True) for m in r["messages"])) // 4
             for r in requests]
    assert max(sizes) <= window - 1536 and max(sizes) > window // 3


def test_an_unknown_smaller_window_is_met_by_trimming_harder_once(tmp_path, settings):
    window = 6000
    result, requests, _ = replay_run(tmp_path, settings, "", "native", turns=big_output_turns(8, settings),
                                     script={"context_window": window})
    records = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    statuses = [r["status"] for r in records]
    assert 400 in statuses  # the default budget (24,000 tokens) did not fit: refused once...
    assert all(b == 200 for a, b in zip(statuses, statuses[1:], strict=False) if a == 400)  # ...then trimmed to fit
    assert result.status == "succeeded", result.reason


def test_a_window_too_small_for_anything_fails_with_one_line(tmp_path, settings):
    result, _, _ = replay_run(tmp_path, settings, "", "native", turns=big_output_turns(1), script={"context_window": 200})
    assert result.status == "failed"
    assert "does not fit the model's context window even trimmed to" in result.reason
    assert "context_window" in result.reason and "\n" not in result.reason
    records = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == [400, 400]  # trimmed harder once, then gave up


def test_a_server_that_refuses_stop_gets_requests_without_it(tmp_path, settings):
    result, requests, _ = replay_run(tmp_path, settings, "qwen1.5b-text-fanout-words", "text",
                                     script={"stop_supported": False})
    records = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(r["status"], "stop" in r["body"]) for r in records] == [(400, True), (200, False), (200, False)]
    assert result.status == "succeeded" and result.answer == "7"  # the invented "10" was cut all the same


def test_context_budget_comes_from_the_model_window(tmp_path, settings):
    from worker.modelconfig import resolve_model

    local = resolve_model("llama-server", settings)  # configs/models.yaml: a 16k llama.cpp slot
    assert (local.context_window, local.max_tokens) == (16384, 1536)
    assert local.context_tokens(24000, overhead=1000) == 16384 - 1536 - 1000
    assert resolve_model("openai", settings).context_tokens(24000, overhead=1000) == 24000  # the window is larger
    assert local.model_copy(update={"context_window": None}).context_tokens(24000, 1000) == 24000  # unknown window


def test_without_tools_offered_a_json_reply_is_just_text(settings):
    from worker.model import LLMClient
    from worker.modelconfig import resolve_model
    from worker.scripted import ScriptedServer

    reply_text = '{"name": "code_run", "arguments": {"script": "print(1)"}}'
    with ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": reply_text}]}]}) as server:
        client = LLMClient(resolve_model(f"scripted@{server.base_url}", settings))
        reply = client.chat([{"role": "user", "content": "plan"}], [])  # the planner asks like this
    assert reply.tool_calls == [] and reply.content == reply_text


# The shapes issue 35 read in the held-out run of the real 1.5B model (native mode, no native tool_calls): a
# Python triple-quoted script inside the JSON call, a fenced script beside a call whose script is empty, and the
# same unreadable call sent again.
TRIPLE = ('```json\n{\n  "name": "code_run",\n  "arguments": {\n    "script": """\nwith open("alpha.txt") as f:\n'
          '    print(len(f.read().split()))\n""",\n    "timeout": 60\n  }\n}\n```')
EMPTY_ARGUMENT = ("```python\nprint(len(open('alpha.txt').read().split()))\n```\n\n"
                  '```json\n{"name": "code_run", "arguments": {"script": "", "type": "python"}}\n```')
# the live 1.5B held-out JSON filter: the triple-quoted script indented as Python source would be (IndentationError)
INDENTED = ('```json\n{\n  "name": "code_run",\n  "arguments": {\n    "script": """\n      with open("alpha.txt") as f:\n'
            '        print(len(f.read().split()))\n    """,\n    "type": "python",\n    "timeout": 60,\n    "cwd": ""\n  }\n}\n```')
UNREADABLE = ('```json\n{"name": "code_run", "arguments": {"script": `import csv\nrows = list(csv.reader(open("alpha.txt")))'
              '\nprint(len(rows))`, "timeout": 60}}\n```')  # a script in backquotes: no reader takes it


@pytest.mark.parametrize("mode", ["native", "text"])
@pytest.mark.parametrize("reply", [TRIPLE, EMPTY_ARGUMENT, INDENTED], ids=["triple-quoted", "empty-argument", "indented"])
def test_a_call_as_small_models_write_it_runs(tmp_path, settings, mode, reply):
    result, requests, history = replay_run(tmp_path, settings, "", mode,
                                           turns=[{"content": reply}, {"echo_last_tool_result": True}])
    assert tool_results(requests[1], mode) == ["exit code 0\n7\n"]  # the word count of alpha.txt, really run
    assert result.status == "succeeded" and "7" in result.answer
    first = json.loads(history.read_text().splitlines()[0])
    assert not first["tool_results"][0]["output"].startswith("error")
    shown = json.dumps(requests[1]["messages"])
    assert '\\"\\"\\"' not in shown  # the triple-quoted form is not put back for the model to copy


@pytest.mark.parametrize("mode", ["native", "text"])
def test_the_same_unreadable_call_twice_gets_the_code_block_form_and_then_runs(tmp_path, settings, mode):
    fixed = "```python\nimport csv\nrows = list(csv.reader(open('alpha.txt')))\nprint(len(rows))\n```\n" \
            '```json\n{"name": "code_run", "arguments": {"type": "python"}}\n```'
    turns = [{"content": UNREADABLE}, {"content": UNREADABLE}, {"content": fixed}, {"echo_last_tool_result": True}]
    result, requests, _ = replay_run(tmp_path, settings, "", mode, turns=turns)
    first, second = tool_results(requests[1], mode)[-1], tool_results(requests[2], mode)[-1]
    assert first.startswith("error: the code_run call in your reply is not valid JSON")
    assert "Send it exactly like this" in first and "rows = list(csv.reader(open(" in first  # its own script, shaped
    assert second != first and "Write the script in a fenced code block" in second  # simpler, not the same again
    assert "```python\nimport csv" in second
    assert tool_results(requests[3], mode)[-1] == "exit code 0\n1\n"
    assert result.status == "succeeded"
    # the unreadable text was not put back into the history for the model to copy
    assert not any('csv.reader(open("alpha.txt"))' in text for r in requests[1:] for text in assistant_texts(r))


def test_a_window_too_small_for_the_first_request_is_one_line_and_sends_nothing(tmp_path, settings):
    result, requests, _ = replay_run(tmp_path, settings, "", "native", turns=[{"content": "never asked"}],
                                     model={"context_window": 2048})
    assert result.status == "failed" and "\n" not in result.reason
    assert result.reason.startswith("context_window 2,048 of model 'scripted@")
    assert "cannot hold the first request" in result.reason and "max_tokens" in result.reason
    assert requests == []  # nothing was sent: before, the context trim sent an empty user message


# Replies of the live 1.5B fan-out of this session (words task): `python -c` sent with "type": "python", then a
# tool call written as a function call in the text.
TYPED_SHELL = ('```json\n{\n  "name": "code_run",\n  "arguments": {\n    "script": "python -c \'with open(\\"alpha.txt\\", '
               '\\"r\\", encoding=\\"utf-8\\") as f: print(len(f.read().split()))\'",\n    "type": "python",\n'
               '    "timeout": 60,\n    "cwd": ""\n  }\n}\n```')


@pytest.mark.parametrize("mode", ["native", "text"])
def test_a_shell_line_typed_python_runs_as_bash_and_a_call_in_function_syntax_is_a_call(tmp_path, settings, mode):
    ask = {"content": 'ask_user("What should I do next?")'}
    result, requests, _ = replay_run(tmp_path, settings, "", mode, turns=[{"content": TYPED_SHELL}, ask, ask])
    assert tool_results(requests[1], mode) == ["exit code 0\n7\n"]  # it was a SyntaxError as python
    assert tool_results(requests[2], mode)[-1].startswith("nobody is watching this task")  # told once, then:
    assert result.status == "needs_input" and result.question == "What should I do next?"


# A reply of the live 1.5B model on SOP-20 row 2 (cut short): a plan whose first step is a tool call written in
# function syntax inside a python block, and a made-up "Final Answer". It was taken as the answer.
PLANNED = ("To determine the answer, I will follow these steps:\n\n### Step 1: Read the file\nI will use the `file_read` "
           "tool to read the `alpha.txt` file.\n\n```python\nfile_read(path='alpha.txt', start=1, count=1, keyword=\"\")\n"
           "```\n\n### Step 2: Decide\n```python\n# Example decision logic\ndef decide(price):\n    return \"Yes\"\n```\n\n"
           "### Step 3: Write the answer\n```python\nfile_patch(path='alpha.txt', old_content=\"x\", new_content=answer)\n"
           "```\n\n### Final Answer\nThe answer is **Yes**.")


@pytest.mark.parametrize("mode", ["native", "text"])
def test_a_tool_call_in_function_syntax_inside_a_python_block_is_a_call(tmp_path, settings, mode):
    result, requests, _ = replay_run(tmp_path, settings, "", mode, turns=[{"content": PLANNED}, {"content": "7"}])
    [read] = tool_results(requests[1], mode)  # the block that computes `answer` is no literal call: not run
    assert read.startswith("[alpha.txt: ") and ALPHA_WORDS.strip() in read
    assert result.answer == "7"


@pytest.mark.parametrize("mode", ["native", "text"])
@pytest.mark.parametrize("copied", ["[an unreadable ask_user call was here: see the error in its result]",
                                    "[ga] Your reply was empty. Reply with the final answer itself, or call a tool.",
                                    "The script in your reply's code block ran nowhere."],
                         ids=["unreadable-mark", "ga-note", "note-sentence"])
def test_a_reply_that_copies_a_mark_of_ga_is_corrected_not_taken(tmp_path, settings, mode, copied):
    # seen live on SOP-20 (1.5B): after an unreadable call, the model's next reply was ga's own marker, verbatim;
    # on row 14 its answer was the first sentence of ga's plan note, without the note's "[ga]"
    result, requests, _ = replay_run(tmp_path, settings, "", mode, turns=[{"content": copied}, {"content": "7"}])
    corrections = [m["content"] for m in requests[1]["messages"] if m["role"] == "user"]
    assert "repeats a note ga wrote, and is not an answer" in corrections[-1]
    assert result.answer == "7"


# replies of the live 0.5B model on the held-out set: its whole answer a call to a tool it made up (h5, h6)
INVENTED = ['{"name": "sum_of_ids", "arguments": {"status": "ok"}}',
            '```json\n{"name": "average", "arguments": {"numbers": [2, 4, 6, 8]}}\n```']


@pytest.mark.parametrize("mode", ["native", "text"])
@pytest.mark.parametrize("invented", INVENTED, ids=["bare", "fenced"])
def test_a_reply_that_calls_a_tool_that_does_not_exist_is_corrected_not_taken(tmp_path, settings, mode, invented):
    result, requests, _ = replay_run(tmp_path, settings, "", mode, turns=[{"content": invented}, {"content": "7"}])
    correction = [m["content"] for m in requests[1]["messages"] if m["role"] == "user"][-1]
    assert correction.startswith("[ga] You have no tool named ") and "nothing ran" in correction
    assert result.answer == "7"


@pytest.mark.parametrize("mode", ["native", "text"])
def test_an_answer_that_is_json_data_stays_an_answer(tmp_path, settings, mode):
    data = '{"name": "Ada", "born": 1815}'
    result, _, _ = replay_run(tmp_path, settings, "", mode, turns=[{"content": data}])
    assert result.answer == data
