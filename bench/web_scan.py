"""web_scan on a real Chromium: how much smaller than the raw DOM, how much main text survives, how fast;
and what one shared browser with N worker contexts costs in memory against N separate browsers.

    python bench/web_scan.py                 # fixture pages + offline documentation found on this machine
    python bench/web_scan.py --repeat 9 --contexts 1,4,8

Per page: raw outerHTML chars, web_scan HTML chars (uncapped, and as the model sees it after the 35,000 cap),
text-mode chars, reduction (raw / HTML), recall of the words a person sees in the main content (ground truth:
innerText of the page's main element, minus the fixture's deliberately hidden elements), median scan latency
(end to end through the tool, and inside the page). Goals on navigation-heavy pages: >= 10x, >= 95 %, < 300 ms.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from configs import load_settings  # noqa: E402
from web_fixtures.server import ROOT as FIXTURES, js, scan, serve  # noqa: E402
from worker.tools.base import ToolContext  # noqa: E402
from worker.web.browser import process_tree_pids  # noqa: E402
from worker.web.scan import simplify  # noqa: E402

RUST = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
PYLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
FIXTURE_HIDDEN = "[style*='display:none'], [style*='visibility:hidden'], [style*='opacity:0'], [style*='left:-9999px'], [style*='width:0'], .sr-only, .offstage"


@dataclass
class Page:
    name: str
    root: Path
    path: str
    main: str  # selector of the main content (ground truth)
    exclude: Optional[str] = None  # elements inside main a person does not see


PAGES = [
    Page("fixture: article+menus", FIXTURES, "index.html", "main", FIXTURE_HIDDEN),
    Page("fixture: modal overlay", FIXTURES, "modal.html", "[role=dialog]"),
    Page("fixture: SPA", FIXTURES, "spa.html", "main"),
    Page("mdBook: book ch4.1", RUST, "book/ch04-01-what-is-ownership.html", "main"),
    Page("mdBook: book appendix", RUST, "book/appendix-00.html", "main"),
    Page("mdBook: book ch19", RUST, "book/ch19-00-patterns.html", "main"),
    Page("mdBook: reference exprs", RUST, "reference/expressions.html", "main"),
    Page("mdBook: cargo index", RUST, "cargo/index.html", "main"),
    Page("mdBook: cargo manifest", RUST, "cargo/reference/manifest.html", "main"),
    Page("mdBook: RBE std", RUST, "rust-by-example/std.html", "main"),
    Page("mdBook: edition guide", RUST, "edition-guide/index.html", "main"),
    Page("mdBook: unstable book", RUST, "unstable-book/index.html", "main"),
    Page("rustdoc: println!", RUST, "std/macro.println.html", "#main-content"),
    Page("rustdoc: std::string", RUST, "std/string/index.html", "#main-content"),
    Page("rustdoc: std::collections", RUST, "std/collections/index.html", "#main-content"),
    Page("rustdoc: Vec (940 KB)", RUST, "std/vec/struct.Vec.html", "#main-content"),
    Page("Sphinx: IDLE help", PYLIB / "idlelib", "help.html", "[role=main]"),
    Page("Sphinx: python policy", Path("/usr/share/doc/python3"), "python-policy.html", "[role=main]"),
]

GROUND_TRUTH_JS = """([main, exclude]) => {
  const el = document.querySelector(main);
  if (!el) return null;
  const hidden = exclude ? [...el.querySelectorAll(exclude)].map((e) => e.textContent).join(' ') : '';
  return {text: el.innerText, hidden, page: document.body.innerText.length};
}"""


def words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text.lower()))


def html_words(markup: str) -> Counter:
    return words(html.unescape(re.sub(r"<[^>]+>", " ", markup)))


def recall(truth: Counter, seen: Counter) -> float:
    total = sum(truth.values())
    return sum(min(n, seen[w]) for w, n in truth.items()) / total if total else 1.0


def make_ctx(settings, name: str) -> ToolContext:
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    return ToolContext(f"bench-{name}", workdir, settings, None, extra={"cleanup": []})


def finish(ctx: ToolContext) -> None:
    for cleanup in ctx.extra["cleanup"]:
        cleanup()


async def _ground_truth(session, page: Page):
    tab = await session.page()
    return await tab.evaluate(GROUND_TRUTH_JS, [page.main, page.exclude])


async def _uncapped(session, text_only: bool):
    return await simplify(await session.page(), text_only)


def measure_page(ctx: ToolContext, url: str, page: Page, repeat: int) -> dict:
    nav = js(ctx, f"location.href = {url!r}")
    if not nav.ok:
        raise RuntimeError(nav.output)
    session = ctx.extra["web"]
    _, truth = session.call(_ground_truth, page)
    if truth is None:
        raise RuntimeError(f"no element matches {page.main}")
    truth_words = words(truth["text"]) - words(truth["hidden"])
    latencies, inpage = [], []
    out = None
    for _ in range(repeat):
        started = time.perf_counter()
        out = scan(ctx)
        latencies.append((time.perf_counter() - started) * 1000)
        inpage.append(out.data["stats"]["ms"])
    text_out = scan(ctx, text_only=True)
    _, full = session.call(_uncapped, False)
    _, full_text = session.call(_uncapped, True)
    return {
        "raw": full["raw"],
        "html": len(full["content"]),
        "html_seen": len(out.output),
        "text": len(full_text["content"]),
        "text_seen": len(text_out.output),
        "recall": recall(truth_words, html_words(full["content"])),
        "recall_seen": recall(truth_words, html_words(out.output)),
        "recall_text": recall(truth_words, words(full_text["content"])),
        "truth_words": sum(truth_words.values()),
        "nav_share": 1 - len(truth["text"]) / max(truth["page"], 1),
        "ms": statistics.median(latencies),
        "ms_page": statistics.median(inpage),
        "ms_max": max(latencies),
    }


def bench_pages(repeat: int) -> list[tuple[Page, dict]]:
    servers: dict[Path, str] = {}
    settings = load_settings({"home": tempfile.mkdtemp(prefix="bench-web-home-")})
    ctx = make_ctx(settings, "pages")
    results = []
    try:
        for page in PAGES:
            if not (page.root / page.path).is_file():
                print(f"  skipped {page.name}: {page.root / page.path} not on this machine")
                continue
            if page.root not in servers:
                servers[page.root] = serve(page.root)[1]
            results.append((page, measure_page(ctx, f"{servers[page.root]}/{page.path}", page, repeat)))
    finally:
        finish(ctx)
    return results


def print_pages(results: list[tuple[Page, dict]]) -> None:
    head = (f"{'page':27} {'nav':>4} {'raw':>7} {'html':>7} {'seen':>6} {'text':>6} {'reduce':>7} {'recall':>7} {'seen':>5}"
            f" {'text':>5} {'ms':>6} {'page':>5} {'goal':>5}")
    print(head)
    print("-" * len(head))
    for page, r in results:
        reduction = r["raw"] / max(r["html"], 1)
        ok = reduction >= 10 and r["recall"] >= 0.95 and r["ms"] < 300
        goal = ("PASS" if ok else "miss") if nav_heavy(r) else "-"
        print(f"{page.name:27} {r['nav_share']:>4.0%} {r['raw']:>7} {r['html']:>7} {r['html_seen']:>6} {r['text']:>6} {reduction:>6.1f}x"
              f" {r['recall']:>6.1%} {r['recall_seen']:>5.0%} {r['recall_text']:>5.0%} {r['ms']:>6.0f} {r['ms_page']:>5.0f} {goal:>5}")
    nav = [r for p, r in results if nav_heavy(r)]
    if nav:
        print(f"\nnavigation-heavy pages ({len(nav)}): median reduction {statistics.median(r['raw'] / r['html'] for r in nav):.1f}x,"
              f" min recall {min(r['recall'] for r in nav):.1%}, median scan {statistics.median(r['ms'] for r in nav):.0f} ms,"
              f" max scan {max(r['ms_max'] for r in nav):.0f} ms")
    print("columns: nav = share of the page's visible text outside the main content (navigation-heavy: >= 50%);"
          " html = simplified HTML (uncapped), seen = the tool's output after the cap; recall of main-content words on"
          " the uncapped HTML, on what the model sees, and on text mode; ms = median end-to-end tool call, page = in-page part")
    contentful = [r for p, r in results if not nav_heavy(r) and r["raw"] > 20000]
    if contentful:
        print(f"content-heavy pages ({len(contentful)}): median reduction {statistics.median(r['raw'] / r['html'] for r in contentful):.1f}x"
              f" (bounded by raw / main text: {statistics.median(r['raw'] / max(r['text'], 1) for r in contentful):.1f}x),"
              f" min recall {min(r['recall'] for r in contentful):.1%}")


def nav_heavy(r: dict) -> bool:
    return r["nav_share"] >= 0.5


# ---- memory: one shared browser with N contexts vs N browsers with one context each
def tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes of a browser's whole process group."""
    rss = pss = 0
    for member in process_tree_pids(pid):
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


def open_workers(homes: list[str], url: str) -> list[ToolContext]:
    ctxs = []
    for i, home in enumerate(homes):
        ctx = make_ctx(load_settings({"home": home}), f"mem{i}")
        nav = js(ctx, f"location.href = {url!r}")
        if not nav.ok:
            raise RuntimeError(nav.output)
        ctxs.append(ctx)
    return ctxs


def browsers_memory(ctxs: list[ToolContext]) -> tuple[int, int, int]:
    time.sleep(1.0)  # let renderers finish starting
    pids = {ctx.extra["web"].info.pid for ctx in ctxs}
    totals = [tree_memory(pid) for pid in pids]
    return len(pids), sum(t[0] for t in totals), sum(t[1] for t in totals)


def bench_memory(counts: list[int]) -> None:
    server, base = serve(RUST if (RUST / "book").is_dir() else FIXTURES)
    url = f"{base}/book/ch04-01-what-is-ownership.html" if (RUST / "book").is_dir() else f"{base}/index.html"
    print(f"\nmemory of the browser process trees, each worker with one tab on {url.split('/', 3)[-1]}")
    print(f"{'workers':>7} {'shared: RSS':>12} {'PSS':>8} {'separate: RSS':>14} {'PSS':>8} {'browsers':>9} {'PSS ratio':>10}")
    for n in counts:
        shared_home = tempfile.mkdtemp(prefix="bench-shared-")
        shared = open_workers([shared_home] * n, url)
        _, s_rss, s_pss = browsers_memory(shared)
        for ctx in shared:
            finish(ctx)
        separate = open_workers([tempfile.mkdtemp(prefix=f"bench-sep{i}-") for i in range(n)], url)
        count, p_rss, p_pss = browsers_memory(separate)
        for ctx in separate:
            finish(ctx)
        mb = 1024 * 1024
        print(f"{n:>7} {s_rss / mb:>10.0f}MB {s_pss / mb:>6.0f}MB {p_rss / mb:>12.0f}MB {p_pss / mb:>6.0f}MB {count:>9}"
              f" {p_pss / max(s_pss, 1):>9.1f}x")
    server.shutdown()
    print("RSS counts shared pages once per process; PSS splits them, so PSS sums are the fair total."
          " Each worker process also runs one Playwright driver (node) in both designs; not counted.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="scans per page (median latency)")
    parser.add_argument("--contexts", default="1,4,8", help="worker counts for the memory comparison")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    print(f"web_scan benchmark: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start\n")
    print_pages(bench_pages(args.repeat))
    if not args.skip_memory:
        bench_memory([int(n) for n in args.contexts.split(",")])
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
