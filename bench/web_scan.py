"""web_scan on a real Chromium, on a corpus of real documentation pages: reduction, main-text recall over all
pages of a paged scan, furniture share of the output, scan time; and what N tasks' browsers (each task has its
own, in its sandbox) cost in memory.

    python bench/web_scan.py --install-corpus   # once: apt-get installs the Debian -doc packages below
    python bench/web_scan.py                    # the corpus, served on 127.0.0.1, plus the fixture pages
    python bench/web_scan.py --repeat 9 --only doxygen --skip-memory

The corpus is read where the packages put it (/usr/share/doc/...); nothing of it is in the repository.
Ground truth is the text of each generator's own main container, taken from the HTML file by lxml (not by
the scan). Per page: raw outerHTML chars, the chars of all scan pages together, reduction (raw / the first
page's content, without the tool's tab list and summary lines), recall of main-text words over all scan pages, furniture (share of the output's words that are not
main text: links, sidebars, sel/href values), scan time through the tool (p50/p95 of --repeat runs) and
in the page. Goals: recall >= 98 % everywhere; on navigation-heavy pages (>= 50 % of the visible text outside
the main content) >= 8x and furniture <= 25 %; p95 <= 300 ms up to 1 MB of HTML.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from configs import load_settings  # noqa: E402
from web_fixtures.server import ROOT as FIXTURES  # noqa: E402
from web_fixtures.server import SITE_NETWORK, js, scan, serve  # noqa: E402
from web_fixtures.server import session as browser_session  # noqa: E402
from worker.context import cut_head_tail  # noqa: E402
from worker.tools.base import ToolContext  # noqa: E402

DOC = Path("/usr/share/doc")
# Debian bookworm packages that install no Python and upgrade nothing (checked with apt-get install -s).
PACKAGES = ["cmake-doc", "debian-policy", "developers-reference", "libeigen3-doc", "libsdl2-doc", "libjsoncpp-doc",
            "junit4-doc", "mkdocs-doc", "octave-doc", "libmpfr-doc", "git-doc", "debian-reference-en", "maint-guide",
            "apache2-doc", "sqlite3-doc"]
DOXYGEN_MAIN, TEXINFO_MAIN = "div.header, div.contents", "body > div"
DOXYGEN_HIDDEN = "span.icona, tr.inherit, .memSeparator, div.ttc"  # kind icons; folded inherited members; tooltips
BLOCKS = ["p", "div", "li", "td", "th", "tr", "dt", "dd", "br", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "table",
          "section", "article", "blockquote", "ul", "ol", "dl", "caption", "figcaption", "hr", "img", "button", "option"]


@dataclass
class Page:
    kind: str  # the generator or site kind
    root: Path  # served as the site root
    path: str
    main: str  # CSS selector of the generator's main container(s)
    exclude: Optional[str] = None  # inside main, not main text (navigation a generator puts there; hidden parts)


CORPUS = [
    Page("sphinx", DOC / "cmake-data/html", "manual/cmake.1.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "command/else.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "index.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "manual/cmake-commands.7.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "variable/LINUX.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "variable/WIN32.html", "div.body"),
    Page("sphinx", DOC / "cmake-data/html", "manual/cmake-generator-expressions.7.html", "div.body"),
    Page("sphinx", DOC / "debian-policy/policy.html", "ch-archive.html", "div.body"),
    Page("sphinx", DOC / "debian-policy/policy.html", "ap-pkg-diversions.html", "div.body"),
    Page("sphinx", Path("/usr/share/developers-reference"), "index.html", "div.body"),
    Page("doxygen", DOC / "libeigen3-dev/html", "group__QuickRefPage.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libeigen3-dev/html", "classEigen_1_1Matrix.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libeigen3-dev/html", "index.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libsdl2-doc/html", "annotated.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libsdl2-doc/html", "files.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libjsoncpp-doc", "class_json_1_1_value.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libjsoncpp-doc", "index.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libjsoncpp-doc", "roadmap_8dox.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("doxygen", DOC / "libeigen3-dev/html", "TopicVectorization.html", DOXYGEN_MAIN, DOXYGEN_HIDDEN),
    Page("javadoc", DOC / "junit4/api", "org/junit/Assert.html", "main"),
    Page("javadoc", DOC / "junit4/api", "org/junit/package-summary.html", "main"),
    Page("javadoc", DOC / "junit4/api", "allclasses-index.html", "main"),
    Page("javadoc", DOC / "junit4/api", "org/junit/rules/TestRule.html", "main"),
    Page("javadoc", DOC / "junit4/api", "org/junit/package-use.html", "main"),
    Page("mkdocs", DOC / "mkdocs/html", "index.html", "div[role=main]"),
    Page("mkdocs", DOC / "mkdocs/html", "user-guide/configuration.html", "div[role=main]"),
    Page("mkdocs", DOC / "mkdocs/html", "user-guide/installation.html", "div[role=main]"),
    Page("mkdocs", DOC / "mkdocs/html", "about/release-notes.html", "div[role=main]"),
    Page("mkdocs", DOC / "mkdocs/html", "about/license.html", "div[role=main]"),
    Page("mkdocs", DOC / "mkdocs/html", "user-guide/index.html", "div[role=main]"),
    Page("texinfo", DOC / "octave/octave.html", "Basic-Vectorization.html", TEXINFO_MAIN, "div.header"),
    Page("texinfo", DOC / "octave/octave.html", "index.html", TEXINFO_MAIN, "div.header"),
    Page("texinfo", DOC / "libmpfr-doc/mpfr.html", "Rounding.html", TEXINFO_MAIN, "div.header"),
    Page("texinfo", DOC / "libmpfr-doc/mpfr.html", "Arithmetic-Functions.html", TEXINFO_MAIN, "div.header"),
    Page("asciidoc", DOC / "git-doc", "git-config.html", "#header h1, #content"),
    Page("asciidoc", DOC / "git-doc", "git-commit.html", "#header h1, #content"),
    Page("asciidoc", DOC / "git-doc", "gittutorial.html", "#header h1, #content"),
    Page("docbook", Path("/usr/share/debian-reference"), "ch01.en.html", "div.chapter"),
    Page("docbook", DOC / "maint-guide/html", "build.en.html", "div.chapter"),
    Page("docbook", DOC / "maint-guide/html", "index.en.html", "div.book"),
    Page("apache", DOC / "apache2-doc/manual/en", "mod/core.html", "#page-content", "#quickview, .toplang, .top"),
    Page("apache", DOC / "apache2-doc/manual/en", "mod/mod_alias.html", "#page-content", "#quickview, .toplang, .top"),
    Page("apache", DOC / "apache2-doc/manual/en", "howto/htaccess.html", "#page-content", "#quickview, .toplang, .top"),
    Page("apache", DOC / "apache2-doc/manual/en", "index.html", "#page-content", "#quickview, .toplang, .top"),
    Page("apache", DOC / "apache2-doc/manual/en", "mod/mod_socache_dbm.html", "#page-content", "#quickview, .toplang, .top"),
    Page("sqlite", DOC / "sqlite3", "datatype3.html", "div.fancy", "div.fancy_toc, .imgcontainer"),
    Page("sqlite", DOC / "sqlite3", "lang_createtable.html", "div.fancy", "div.fancy_toc, .imgcontainer"),
    Page("sqlite", DOC / "sqlite3", "lang_select.html", "div.fancy", "div.fancy_toc, .imgcontainer"),
]
FIXTURE_HIDDEN = ("[style*='display:none'], [style*='visibility:hidden'], [style*='opacity:0'], [style*='left:-9999px'],"
                  " [style*='width:0'], .sr-only, .offstage, [hidden]")
FIXTURES_PAGES = [
    Page("fixture", FIXTURES, "index.html", "main", FIXTURE_HIDDEN),
    Page("fixture", FIXTURES, "longtable.html", "main"),
    Page("fixture", FIXTURES, "navheavy.html", "[role=main]"),
]


def install_corpus() -> int:
    """apt-get installs the corpus packages that are missing (root, Debian or Ubuntu); exit code."""
    if not shutil.which("apt-get"):
        print("bench/web_scan.py: --install-corpus needs apt-get (Debian or Ubuntu); install the -doc packages"
              f" {' '.join(PACKAGES)} by other means", file=sys.stderr)
        return 2
    missing = [p for p in PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        print("corpus: all packages installed")
        return 0
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env).returncode


# ---- ground truth, by lxml from the HTML file (independent of the scan)
def main_text(file: Path, main: str, exclude: Optional[str]) -> str:
    import lxml.html  # the bench's own dependency (pyproject's dev extra), not the worker's

    root = lxml.html.parse(str(file)).getroot()
    hidden = "script, style, noscript, template, [style*='display:none'], [style*='display: none'], [hidden]"
    for bad in root.cssselect(hidden + ", details:not([open]) > :not(summary)"):  # a closed <details> shows its summary
        bad.drop_tree()
    for el in root.iter(*BLOCKS):  # blocks and cells are separate words, as they are on screen
        el.text, el.tail = " " + (el.text or ""), " " + (el.tail or "")
    chosen = root.cssselect(main)
    chosen = [el for el in chosen if not any(other is not el and el in other.iterdescendants() for other in chosen)]
    if exclude:
        for el in chosen:
            for bad in el.cssselect(exclude):
                bad.drop_tree()
    return " ".join(el.text_content() for el in chosen)


def words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text.lower()))


def output_words(markup: str, values: bool = True) -> Counter:
    """Words of the scan's output: its text and (values=True) attribute values (href, sel, alt...), not tag or
    attribute names."""
    extra = " ".join(re.findall(r'="([^"]*)"', markup)) if values else ""
    return words(html.unescape(re.sub(r"<[^>]+>", " ", markup) + " " + extra))


def recall(truth: Counter, seen: Counter) -> float:
    total = sum(truth.values())
    return sum(min(n, seen[w]) for w, n in truth.items()) / total if total else 1.0


def furniture(truth: Counter, seen: Counter) -> float:
    """Share of the output's word characters that are not main text (the excess over the truth's counts)."""
    total = sum(len(w) * n for w, n in seen.items())
    extra = sum(len(w) * max(0, n - truth[w]) for w, n in seen.items())
    return extra / total if total else 0.0


def make_ctx(settings, name: str) -> ToolContext:
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    return ToolContext(f"bench-{name}", workdir, settings, None)


def finish(ctx: ToolContext) -> None:
    ctx.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _evaluate(session, source: str, options: dict):
    return await (await session.page()).evaluate(source, options)


def baseline_script(ref: str) -> Optional[str]:
    """scan.js as it was at git `ref` (the baseline run side by side), or None without git or that ref."""
    done = subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:worker/web/scan.js"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def measure_baseline(ctx: ToolContext, source: str, truth: Counter, repeat: int) -> dict:
    """The old scan in the same tab: one output cut head+tail at the cap, as the old tool did."""
    session, runs = browser_session(ctx), []
    for _ in range(repeat):
        started = time.perf_counter()
        _, result = session.call(_evaluate, source, {"textOnly": False})
        runs.append(((time.perf_counter() - started) * 1000, result))
    content = result["content"]
    seen = cut_head_tail(content, 35000 - 300)
    return {"first": len(seen), "recall": recall(truth, output_words(seen)), "furniture": furniture(truth, output_words(seen)),
            "ms": [ms for ms, _ in runs]}


def measure_page(ctx: ToolContext, url: str, page: Page, repeat: int, baseline: Optional[str] = None) -> dict:
    nav = js(ctx, f"location.href = {url!r}")
    if not nav.ok:
        raise RuntimeError(nav.output)
    truth_text = main_text(page.root / page.path, page.main, page.exclude)
    truth = words(truth_text)
    visible = js(ctx, "document.body.innerText.length", no_monitor=True).output
    page_chars = int(visible.split(": ", 1)[1])
    latencies, inpage = [], []
    first = None
    for _ in range(repeat):
        started = time.perf_counter()
        first = scan(ctx)
        latencies.append((time.perf_counter() - started) * 1000)
        inpage.append(first.data["stats"]["ms"])
    if not first.ok:
        raise RuntimeError(first.output)
    outputs = [first.output]
    for number in range(2, first.data["pages"] + 1):
        outputs.append(scan(ctx, page=number).output)
    seen = output_words("\n".join(outputs))
    content = "\n".join(body_of(o) for o in outputs)  # furniture is judged on the page, not the tool's header lines
    base = measure_baseline(ctx, baseline, truth, repeat) if baseline else None
    return {
        "base": base,
        "raw": first.data["raw_chars"],
        "first": first.data["chars"],  # the page's content, without the tab list and summary lines (~200 chars)
        "answer": len(first.output),
        "all": sum(len(o) for o in outputs),
        "pages": first.data["pages"],
        "recall": recall(truth, seen),
        "furniture": furniture(truth, output_words(content)),
        "furniture_text": furniture(truth, output_words(content, False)),
        "nav_share": max(0.0, 1 - len(truth_text.split()) / max(len(js_words(ctx)), 1)),
        "visible": page_chars,
        "ms": latencies,
        "ms_page": inpage,
        "missed": missed_words(truth, seen),
    }


def body_of(answer: str) -> str:
    """The scanned page in a web_scan answer: what follows the '--- tab url (...)' summary line."""
    return answer.split("\n--- ", 1)[1].split("\n", 1)[1]


def js_words(ctx: ToolContext) -> list[str]:
    out = js(ctx, "document.body.innerText", no_monitor=True, save_to_file="innertext.txt")
    return (ctx.workdir / "innertext.txt").read_text(encoding="utf-8").split() if out.ok else []


def missed_words(truth: Counter, seen: Counter) -> str:
    missing = Counter({w: n - seen[w] for w, n in truth.items() if n > seen[w]})
    return " ".join(f"{w}×{n}" for w, n in missing.most_common(6))


def bench_pages(pages: list[Page], repeat: int, baseline: Optional[str] = None) -> list[tuple[Page, dict]]:
    servers: dict[Path, str] = {}
    settings = load_settings({"home": tempfile.mkdtemp(prefix="bench-web-home-"), **SITE_NETWORK})
    ctx = make_ctx(settings, "pages")
    results = []
    try:
        for page in pages:
            if not (page.root / page.path).is_file():
                print(f"  skipped {page.kind} {page.path}: not on this machine (python bench/web_scan.py --install-corpus)")
                continue
            if page.root not in servers:
                servers[page.root] = serve(page.root)[1]
            results.append((page, measure_page(ctx, f"{servers[page.root]}/{page.path}", page, repeat, baseline)))
    finally:
        finish(ctx)
    return results


def nav_heavy(r: dict) -> bool:
    return r["nav_share"] >= 0.5


def page_goal(r: dict) -> str:
    misses = []
    if r["recall"] < 0.98:
        misses.append("recall")
    if nav_heavy(r) and r["raw"] / r["first"] < 8:
        misses.append("reduce")
    if nav_heavy(r) and r["furniture"] > 0.25:
        misses.append("furn")
    if r["raw"] <= 1_000_000 and percentile(r["ms"], 0.95) > 300:
        misses.append("time")
    return "ok" if not misses else ",".join(misses)


def print_pages(results: list[tuple[Page, dict]]) -> None:
    head = (f"{'kind':9} {'page':42} {'nav':>4} {'raw':>8} {'first':>6} {'all':>7} {'pg':>3} {'reduce':>7} {'recall':>7}"
            f" {'furn':>5} {'text':>5} {'p50':>5} {'p95':>5} {'inpg':>5}  goal")
    print(head)
    print("-" * len(head))
    for page, r in results:
        print(f"{page.kind:9} {page.path[-42:]:42} {r['nav_share']:>4.0%} {r['raw']:>8} {r['first']:>6} {r['all']:>7}"
              f" {r['pages']:>3} {r['raw'] / r['first']:>6.1f}x {r['recall']:>6.1%} {r['furniture']:>5.0%} {r['furniture_text']:>5.0%}"
              f" {percentile(r['ms'], 0.5):>5.0f} {percentile(r['ms'], 0.95):>5.0f} {statistics.median(r['ms_page']):>5.0f}"
              f"  {page_goal(r)}" + (f"  missed: {r['missed']}" if r["recall"] < 0.98 else ""))
    print("columns: nav = share of the visible words outside the main content (navigation-heavy: >= 50 %); raw = the"
          " page's outerHTML chars; first = the content of the first page (without the tool's tab list and summary);"
          " all = the tool's answers for every page, headers included; pg = pages; reduce = raw / first; recall = main-text words reached over all pages; furn = words of the page's content (all pages; not"
          " the tool's header lines) that are not main text (text and attribute values: href, sel, alt); text = the same over the text alone;"
          " p50/p95 = tool call ms; inpg = in-page script ms (median)")


def baseline_columns(rs: list[dict]) -> str:
    bases = [(r, r["base"]) for r in rs if r.get("base")]
    if not bases:
        return ""
    navy = [b for r, b in bases if nav_heavy(r)]
    ms = [m for r, b in bases if r["raw"] <= 1_000_000 for m in b["ms"]] or [0.0]
    return (f" | {'':9} {statistics.median(r['raw'] / b['first'] for r, b in bases):>9.1f}x {min(b['recall'] for _, b in bases):>10.1%}"
            f" {max((b['furniture'] for b in navy), default=0):>12.0%} {percentile(ms, 0.95):>8.0f}")


def print_kinds(results: list[tuple[Page, dict]]) -> None:
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for page, r in results:
        by_kind[page.kind].append(r)
    head = (f"\n{'generator':10} {'pages':>5} {'navy':>4} {'reduce med':>10} {'nav min':>8} {'recall min':>10} {'furn max nav':>12}"
            f" {'furn med':>8} {'p50':>5} {'p95':>5} {'p95 inpg':>8}  goals  | baseline: {'reduce med':>10} {'recall min':>10}"
            f" {'furn max nav':>12} {'p95 inpg':>8}")
    print(head)
    print("-" * (len(head) - 1))
    for kind, rs in by_kind.items():
        navy = [r for r in rs if nav_heavy(r)]
        all_ms = [m for r in rs if r["raw"] <= 1_000_000 for m in r["ms"]] or [0.0]
        inpg = [m for r in rs if r["raw"] <= 1_000_000 for m in r["ms_page"]] or [0.0]
        met = sum(page_goal(r) == "ok" for r in rs)
        print(f"{kind:10} {len(rs):>5} {len(navy):>4} {statistics.median(r['raw'] / r['first'] for r in rs):>9.1f}x"
              f" {min((r['raw'] / r['first'] for r in navy), default=0):>7.1f}x {min(r['recall'] for r in rs):>10.1%}"
              f" {max((r['furniture'] for r in navy), default=0):>12.0%} {statistics.median(r['furniture'] for r in rs):>8.0%}"
              f" {percentile(all_ms, 0.5):>5.0f} {percentile(all_ms, 0.95):>5.0f} {percentile(inpg, 0.95):>8.0f}  {met:>2}/{len(rs):<2}"
              + baseline_columns(rs))
    print("navy = navigation-heavy pages; 'nav min' and 'furn max nav' are over them; times over pages <= 1 MB of HTML;"
          " baseline = scan.js at --baseline REF run in the same tab, its output cut head+tail at the 35,000 cap as the"
          " old tool did (recall of what the model saw; its time is the in-page evaluate)")


# ---- memory: N tasks, each with its own browser
def tree_memory(pids: list[int]) -> tuple[int, int]:
    """(RSS, PSS) in bytes of these processes."""
    rss = pss = 0
    for member in pids:
        try:
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


def bench_memory(counts: list[int]) -> None:
    server, base = serve(FIXTURES)
    url = f"{base}/index.html"
    print(f"\nmemory of N tasks' browsers (each in its own sandbox), each with one tab on {url.split('/', 3)[-1]}")
    print(f"{'tasks':>7} {'RSS':>10} {'PSS':>8} {'PSS a task':>11}")
    for n in counts:
        settings = load_settings({"home": tempfile.mkdtemp(prefix="bench-mem-"), **SITE_NETWORK})
        ctxs = []
        for i in range(n):
            ctx = make_ctx(settings, f"mem{i}")
            nav = js(ctx, f"location.href = {url!r}")
            if not nav.ok:
                raise RuntimeError(nav.output)
            ctxs.append(ctx)
        time.sleep(1.0)  # let renderers finish starting
        rss, pss = tree_memory([pid for ctx in ctxs for pid in browser_session(ctx).processes()])
        for ctx in ctxs:
            finish(ctx)
        mb = 1024 * 1024
        print(f"{n:>7} {rss / mb:>8.0f}MB {pss / mb:>6.0f}MB {pss / n / mb:>9.0f}MB")
    server.shutdown()
    print("RSS counts shared pages once per process; PSS splits them, so PSS sums are the fair total (bubblewrap and"
          " the egress relay included). Each worker process also runs one Playwright driver (node); not counted.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install-corpus", action="store_true", help="apt-get install the corpus packages, then stop")
    parser.add_argument("--repeat", type=int, default=5, help="scans per page (p50/p95 latency)")
    parser.add_argument("--only", default="", help="comma-separated generators to run (sphinx, doxygen, ..., fixture)")
    parser.add_argument("--pages", default="", help="only pages whose path contains this text")
    parser.add_argument("--baseline", default="", help="git ref whose scan.js runs side by side (e.g. main~3)")
    parser.add_argument("--contexts", default="1,4,8", help="task counts for the memory figures")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if args.install_corpus:
        sys.exit(install_corpus())
    kinds = set(filter(None, args.only.split(",")))
    pages = [p for p in FIXTURES_PAGES + CORPUS if (not kinds or p.kind in kinds) and args.pages in p.path]
    print(f"web_scan benchmark: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start\n")
    baseline = baseline_script(args.baseline) if args.baseline else None
    if args.baseline and baseline is None:
        print(f"bench/web_scan.py: --baseline {args.baseline}: no worker/web/scan.js at that git ref; name a commit of this"
              " repository (git log --oneline -- worker/web/scan.js)", file=sys.stderr)
        sys.exit(2)
    results = bench_pages(pages, args.repeat, baseline)
    print_pages(results)
    print_kinds(results)
    print(f"load average after the pages: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    if not args.skip_memory:
        bench_memory([int(n) for n in args.contexts.split(",")])
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
