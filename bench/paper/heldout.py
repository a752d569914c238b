"""Eight small held-out tasks, kept apart from everything ga is tuned on (the real-model fixtures, the 3-task
fan-out, the paper's suites): measured, never tuned to. Rebuilt from issue 35's description of the set it
measured: arithmetic, a word count over a file, a CSV sum, a JSON filter, a regex, a bug fix, a write-then-read,
and one that needs no code. Graded on the answer (and the file, where the task writes one) after the run;
`--checks` also hands ga each task's check, as a tasks file would.

    python bench/paper/heldout.py --base-url http://127.0.0.1:8080/v1 --model NAME [--checks]
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paper.agents import Outcome  # noqa: E402
from bench.paper.suite import Task, main, parser  # noqa: E402

FILES = {
    "words.txt": "It was the best of times, it was the worst of times,\nit was the age of wisdom, it was the age of foolishness\n",
    "sales.csv": "region,units,price\nnorth,12,3.5\nsouth,7,4.0\neast,20,2.25\nwest,3,10.0\n",
    "people.json": json.dumps([{"name": "Ada", "age": 36}, {"name": "Linus", "age": 28}, {"name": "Grace", "age": 45},
                               {"name": "Ken", "age": 31}, {"name": "Barbara", "age": 52}]),
    "log.txt": "user=ada id=17 ok\nuser=ken id=4 fail\nuser=grace id=230 ok\nuser=linus id=9 ok\n",
    "average.py": "def average(values):\n    return sum(values) / len(values) + 1\n\nprint(average([2, 4, 6, 8]))\n",
}


def prepare(workspace: Path) -> None:
    for name, text in FILES.items():
        (workspace / name).write_text(text, encoding="utf-8")


def says(pattern: str) -> Callable[[Outcome], tuple[bool, str]]:
    def grade(outcome: Outcome) -> tuple[bool, str]:
        found = re.search(pattern, outcome.answer or "")
        return bool(found), f"answer {'matches' if found else 'does not match'} /{pattern}/"
    return grade


def fixed_average(outcome: Outcome) -> tuple[bool, str]:
    text = ((outcome.workspace or Path("/nonexistent")) / "average.py").read_text(encoding="utf-8", errors="replace")
    ok = "+ 1" not in text and re.search(r"\b5(\.0)?\b", outcome.answer or "") is not None
    return ok, "average.py fixed and 5 answered" if ok else "average.py still adds 1, or 5 not answered"


def written_then_read(outcome: Outcome) -> tuple[bool, str]:
    path = (outcome.workspace or Path("/nonexistent")) / "greeting.txt"
    ok = path.is_file() and path.read_text(errors="replace").strip() == "hello from the agent" \
        and "hello from the agent" in (outcome.answer or "")
    return ok, "greeting.txt written and read back" if ok else "greeting.txt missing, wrong, or not reported"


TASKS = [
    Task("h1-arithmetic", "What is 37 * 12 + 999? Compute it with a script and answer with the number.",
         prepare, says(r"\b1443\b"), {"pattern": r"\b1443\b"}),
    Task("h2-wordcount", "How many words are in words.txt? Count them with a script and answer with the number.",
         prepare, says(r"\b24\b"), {"pattern": r"\b24\b"}),
    Task("h3-csv-sum", "sales.csv has columns region, units, price. What is the total revenue (units * price summed "
         "over all rows)? Answer with the number.", prepare, says(r"\b145(\.0+)?\b"), {"pattern": r"\b145(\.0+)?\b"}),
    Task("h4-json-filter", "people.json is a list of people with name and age. List the names of everyone older than "
         "35, in file order, comma-separated.", prepare, says(r"Ada.*Grace.*Barbara"), {"pattern": "Ada.*Grace.*Barbara"}),
    Task("h5-regex", "log.txt has lines like 'user=NAME id=NUMBER STATUS'. What is the sum of the ids of the lines "
         "whose status is ok? Answer with the number.", prepare, says(r"\b256\b"), {"pattern": r"\b256\b"}),
    Task("h6-bugfix", "average.py should print the average of [2, 4, 6, 8] but prints the wrong value. Fix the bug in "
         "the file, run it, and answer with what it prints.", prepare, fixed_average, {"pattern": r"\b5(\.0)?\b"}),
    Task("h7-write-read", "Write the text 'hello from the agent' to greeting.txt, then read the file back and answer "
         "with its content.", prepare, written_then_read, {"pattern": "hello from the agent"}),
    Task("h8-no-code", "What is the capital of France? Answer with one word.", prepare, says(r"(?i)\bparis\b"),
         {"pattern": r"(?i)\bparis\b"}),
]


if __name__ == "__main__":
    p = parser((__doc__ or "").split("\n\n")[0])
    p.add_argument("--checks", action="store_true", help="give ga each task's check, as a tasks file would")
    args = p.parse_args()
    tasks = TASKS if args.checks else [Task(t.id, t.prompt, t.prepare, t.grade) for t in TASKS]
    main(f"held-out 8 ({'ga with checks' if args.checks else 'no checks'})", tasks, args)
