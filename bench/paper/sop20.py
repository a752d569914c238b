"""SOP-20: the SOP-Bench dangerous-goods subset of the GenericAgent technical report (§4.1), graded against its
reference labels. Data: bench/paper/data/sop_bench/ (source and licence in bench/paper/README.md).

Each task is the report's own prompt (README.md.old there): follow sop.txt with the tools in tools.py, read
test_set_with_outputs.csv (its answer column emptied), go to data row N, decide, and write the decision into
that row's last column without changing anything else. A task passes when that cell holds the reference label
and every other cell is as given (the paper's Task Success Rate).

    python bench/paper/sop20.py --base-url http://127.0.0.1:8080/v1 --model NAME [--tasks 1-5] [--lang en]
"""
from __future__ import annotations

import csv
import io
import shutil
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paper.agents import Outcome  # noqa: E402
from bench.paper.suite import Task, main, parser  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "sop_bench"
CSV_NAME = "test_set_with_outputs.csv"
PROMPTS = {  # README.md.old's template, and the same in English
    "zh": ("根据sop.txt的指令，使用tools.py里面的工具，读取test_set_with_outputs.csv(无答案版)，定位到第{row}行数据（跳过表头），"
           "执行订单履约决策，把答案填到该行的最后一列，不要修改CSV的其他内容。"),
    "en": ("Following the instructions in sop.txt and using the tools in tools.py, read test_set_with_outputs.csv "
           "(the version without answers), go to data row {row} (not counting the header), make the order "
           "fulfillment decision, and write the answer into the last column of that row. Do not change anything "
           "else in the CSV."),
}


def rows() -> tuple[list[str], list[list[str]]]:
    with open(DATA / CSV_NAME, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    return table[0], table[1:]


def blank_csv() -> str:
    header, body = rows()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([*row[:-1], ""] for row in body)
    return buffer.getvalue()


def prepare(workspace: Path) -> None:
    for name in ("sop.txt", "tools.py", "toolspecs.json"):
        shutil.copy(DATA / name, workspace / name)
    (workspace / CSV_NAME).write_text(blank_csv(), encoding="utf-8")


def grade(index: int, label: str, outcome: Outcome) -> tuple[bool, str]:
    path = (outcome.workspace or Path("/nonexistent")) / CSV_NAME
    if not path.is_file():
        return False, "the CSV is gone"
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            table = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return False, f"unreadable CSV ({exc})"
    header, body = rows()
    given = [header, *([*row[:-1], ""] for row in body)]
    if len(table) != len(given) or index + 1 >= len(table):
        return False, f"the CSV has {len(table)} lines, not {len(given)}"
    cell = table[index + 1][-1].strip() if table[index + 1] else ""
    others_kept = all(table[i][:-1] == given[i][:-1] and (i == index + 1 or table[i][-1:] in ([""], []))
                      for i in range(1, len(given))) and table[0] == header
    passed = cell == label and others_kept
    return passed, f"cell {cell!r} (label {label}){'' if others_kept else '; other cells changed'}"


def tasks(lang: str) -> list[Task]:
    _, body = rows()
    return [Task(f"sop-{i + 1:02d}", PROMPTS[lang].format(row=i + 1), prepare, partial(grade, i, row[-1]))
            for i, row in enumerate(body)]


if __name__ == "__main__":
    p = parser((__doc__ or "").split("\n\n")[0])
    p.add_argument("--lang", choices=sorted(PROMPTS), default="zh", help="the report's prompt (zh) or its English")
    args = p.parse_args()
    main(f"SOP-20 (SOP-Bench dangerous goods, prompt {args.lang})", tasks(args.lang), args)
