"""The longitudinal protocol: one task family for R rounds, memory kept between rounds against memory wiped,
for ga and the reference on the same endpoint (the report's 9-round study measured tokens, time and model
calls falling round by round as experience turned into SOPs and scripts).

The family is offline: SOP-Bench rows (bench/paper/sop20.py), row r in round r, or the same row every round
with `--same`. Memory on: ga's rounds share one memory store, the reference's rounds one checkout (its
memory/ folder). Memory off: a fresh store or checkout every round. ga's memory tier changes with issue 35's
self-evolution item; run this again after it lands.

    python bench/paper/longitudinal.py --base-url http://127.0.0.1:8080/v1 --model NAME --rounds 3 [--same]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paper import sop20  # noqa: E402
from bench.paper.agents import env_note  # noqa: E402
from bench.paper.proxy import CountingProxy  # noqa: E402
from bench.paper.suite import Row, add, parser, print_table, record, run_one  # noqa: E402


def main() -> None:
    p = parser((__doc__ or "").split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--same", action="store_true", help="the same task every round (default: the next row)")
    p.add_argument("--lang", choices=sorted(sop20.PROMPTS), default="en")
    p.add_argument("--memory", default="on,off", help="on, off, or both (on,off)")
    args = p.parse_args()
    out = args.out or Path(f"/tmp/paper-longitudinal-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    family = sop20.tasks(args.lang)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    settings = [m.strip() for m in args.memory.split(",") if m.strip()]
    print(f"longitudinal · {args.rounds} rounds of SOP-Bench {'row 1' if args.same else 'rows 1..R'} · memory "
          f"{'/'.join(settings)} · model {args.model} · out {out}", flush=True)
    rows: dict[tuple[str, str, int], Row] = {}
    with CountingProxy(args.base_url) as proxy:
        for memory in settings:
            for agent in agents:
                shared = out / f"{agent}-memory-{memory}"
                for round_no in range(1, args.rounds + 1):
                    task = family[0 if args.same else (round_no - 1) % len(family)]
                    where = out / f"{memory}-r{round_no}"
                    outcome = run_one(agent, task, args, proxy, where,
                                      memory_root=shared / "store" if memory == "on" else None,
                                      checkout=shared / "checkout" if memory == "on" else None)
                    passed, seen = task.grade(outcome)
                    record(out, outcome, passed, seen, memory=memory, round=round_no)
                    add(rows.setdefault((agent, memory, round_no), Row(f"{agent} {memory} r{round_no}")), outcome, passed)
    print_table("longitudinal, per round", list(rows.values()))
    for agent in agents:
        for memory in settings:
            first, last = rows.get((agent, memory, 1)), rows.get((agent, memory, args.rounds))
            if first and last and args.rounds > 1:
                t1, tr = first.tally.input + first.tally.output, last.tally.input + last.tally.output
                print(f"{agent} memory {memory}: round {args.rounds} / round 1 tokens {tr / max(1, t1):.2f}x, "
                      f"requests {last.tally.requests / max(1, first.tally.requests):.2f}x, "
                      f"wall {last.wall / max(1e-9, first.wall):.2f}x, success {first.passed}->{last.passed}")
    print(env_note())


if __name__ == "__main__":
    main()
