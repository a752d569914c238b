"""The longitudinal protocol: one task family for R rounds, memory kept between rounds against memory wiped,
for ga and the reference on the same endpoint (the report's 9-round study measured tokens, time and model
calls falling round by round as experience turned into SOPs and scripts).

Families, all offline:
- `primes` (the default): "How many prime numbers are there below N?", N = 10000 every round with `--same`,
  else 10000, 20000, ... A self-contained computation, so ga's own distillation (worker/distill.py,
  `memory.distill`) can verify the script it keeps by re-running it.
- `fib`: issue 35's fan-out task, "Write a Python script that prints the Nth Fibonacci number, run it, and
  tell me the number", N = 10 every round with `--same`, else 10, 20, ...; `squares`: its other task, the sum
  of the squares of 1 to N (20, 40, ...).
- `sop`: SOP-Bench rows (bench/paper/sop20.py), row r in round r, or row 1 every round with `--same`. Its
  scripts read the task's CSV, so ga's re-run (without the task's files) cannot verify them: nothing is kept.

Memory on: ga's rounds share one memory store (ga distils a round that succeeded with a computing run behind its
answer; the model need not call start_long_term_update), the reference's rounds one checkout (its memory/
folder). Memory off: a fresh store or checkout every round. `--scripted FILE` runs against the scripted model
(worker/scripted/) instead of an endpoint: deterministic, no server needed.

    python bench/paper/longitudinal.py --base-url http://127.0.0.1:8080/v1 --model NAME --rounds 3 [--same]
    python bench/paper/longitudinal.py --scripted configs/examples/scripts/distill_reuse.yaml --agents ga --same
"""
from __future__ import annotations

import re
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paper import sop20  # noqa: E402
from bench.paper.agents import Outcome, env_note  # noqa: E402
from bench.paper.proxy import CountingProxy  # noqa: E402
from bench.paper.suite import Row, Task, add, parser, print_table, record, run_one  # noqa: E402
from worker.scripted.server import ScriptedServer  # noqa: E402

PRIMES = "How many prime numbers are there below {n}? Compute it with a Python script and answer with the number."
FIB = "Write a Python script that prints the {n}th Fibonacci number, run it, and tell me the number."
SQUARES = "Write a Python script that prints the sum of the squares of the integers 1 to {n}, run it, and tell me the result."


def primes_below(n: int) -> int:
    sieve = bytearray([1]) * n
    sieve[0:2] = b"\x00\x00"
    for k in range(2, int(n ** 0.5) + 1):
        if sieve[k]:
            sieve[k * k::k] = bytearray(len(range(k * k, n, k)))
    return sum(sieve)


def _says(number: int, outcome: Outcome) -> tuple[bool, str]:
    found = re.search(rf"(?<![\d,.]){number}(?![\d,.]\d)", outcome.answer or "")
    return bool(found), f"answer {'holds' if found else 'lacks'} {number}"


def primes_family(rounds: int) -> list[Task]:
    sizes = [10000 * r for r in range(1, rounds + 1)]
    return [Task(f"primes-{n}", PRIMES.format(n=n), lambda workspace: None, partial(_says, primes_below(n)))
            for n in sizes]


def fibonacci(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def fib_family(rounds: int) -> list[Task]:
    """Issue 35's fan-out task (the 10th Fibonacci number), then the 20th, 30th, ..."""
    return [Task(f"fib-{n}", FIB.format(n=n), lambda workspace: None, partial(_says, fibonacci(n)))
            for n in [10 * r for r in range(1, rounds + 1)]]


def squares_family(rounds: int) -> list[Task]:
    """Issue 35's other fan-out task (1 to 20), then 1 to 40, ..."""
    return [Task(f"squares-{n}", SQUARES.format(n=n), lambda workspace: None,
                 partial(_says, sum(k * k for k in range(1, n + 1)))) for n in [20 * r for r in range(1, rounds + 1)]]


def family(name: str, rounds: int, lang: str) -> list[Task]:
    if name == "sop":
        return sop20.tasks(lang)
    return {"primes": primes_family, "fib": fib_family, "squares": squares_family}[name](rounds)


def print_rounds(rows: dict[tuple[str, str, int], Row], rounds: int) -> None:
    print("\nper round: success, tokens (input + output), turns, requests")
    print(f"{'agent':10s} {'memory':6s} " + " ".join(f"{f'round {r}':>26s}" for r in range(1, rounds + 1)))
    for agent, memory in sorted({(a, m) for a, m, _ in rows}, key=lambda k: (k[0], k[1] != "on")):
        cells = []
        for r in range(1, rounds + 1):
            row = rows.get((agent, memory, r))
            cells.append(f"{row.passed}/{row.tasks} {row.tally.input + row.tally.output:>7,} tok {row.turns:>2} t "
                         f"{row.tally.requests:>2} req" if row else "-")
        print(f"{agent:10s} {memory:6s} " + " ".join(f"{c:>26s}" for c in cells))


def main() -> None:
    p = parser((__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--family", choices=["primes", "fib", "squares", "sop"], default="primes")
    p.add_argument("--same", action="store_true", help="the same task every round (default: the next one)")
    p.add_argument("--lang", choices=sorted(sop20.PROMPTS), default="en")
    p.add_argument("--memory", default="on,off", help="on, off, or both (on,off)")
    p.add_argument("--scripted", type=Path, default=None, help="a scripted model's script, served here on loopback")
    args = p.parse_args()
    out = args.out or Path(f"/tmp/paper-longitudinal-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    tasks = family(args.family, args.rounds, args.lang)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    settings = [m.strip() for m in args.memory.split(",") if m.strip()]
    server = ScriptedServer(args.scripted) if args.scripted else None
    if server is not None:
        args.base_url, args.model = server.start(), "scripted"
    print(f"longitudinal · {args.rounds} rounds of {args.family} {'(the same task)' if args.same else '(the next task)'}"
          f" · memory {'/'.join(settings)} · model {args.model} at {args.base_url} · out {out}", flush=True)
    rows: dict[tuple[str, str, int], Row] = {}
    try:
        with CountingProxy(args.base_url) as proxy:
            for memory in settings:
                for agent in agents:
                    shared = out / f"{agent}-memory-{memory}"
                    for round_no in range(1, args.rounds + 1):
                        task = tasks[0 if args.same else (round_no - 1) % len(tasks)]
                        where = out / f"{memory}-r{round_no}"
                        outcome = run_one(agent, task, args, proxy, where,
                                          memory_root=shared / "store" if memory == "on" else None,
                                          checkout=shared / "checkout" if memory == "on" else None)
                        passed, seen = task.grade(outcome)
                        record(out, outcome, passed, seen, memory=memory, round=round_no)
                        add(rows.setdefault((agent, memory, round_no), Row(f"{agent} {memory} r{round_no}")),
                            outcome, passed)
    finally:
        if server is not None:
            server.stop()
    print_table("longitudinal, per round", list(rows.values()))
    print_rounds(rows, args.rounds)
    for agent in agents:
        for memory in settings:
            first, last = rows.get((agent, memory, 1)), rows.get((agent, memory, args.rounds))
            if first and last and args.rounds > 1:
                t1, tr = first.tally.input + first.tally.output, last.tally.input + last.tally.output
                print(f"{agent} memory {memory}: round {args.rounds} / round 1 tokens {tr / max(1, t1):.2f}x, "
                      f"turns {last.turns / max(1, first.turns):.2f}x, "
                      f"requests {last.tally.requests / max(1, first.tally.requests):.2f}x, "
                      f"wall {last.wall / max(1e-9, first.wall):.2f}x, success {first.passed}->{last.passed}")
    print(env_note())


if __name__ == "__main__":
    main()
