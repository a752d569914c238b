"""web_scan's Python half: the tab list and the page simplified by scan.js."""
from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path
from typing import Optional

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from memory_shared.jsontypes import JSONObject
from worker.web.browser_context import WebSession

SCAN_TIMEOUT = 30.0
HEADER_RESERVE = 400  # the paging line and the summary line


@lru_cache(maxsize=1)
def scan_script() -> str:
    return Path(__file__).with_name("scan.js").read_text(encoding="utf-8")


async def tab_list(session: WebSession) -> str:
    lines = []
    for tab_id, page in list(session.tabs.items()):
        mark = "*" if tab_id == session.active else " "
        title = await page_title(page)
        lines.append(f"{mark}{tab_id} {title[:80]!r} {page.url}")
    return "tabs (* = active):\n" + "\n".join(lines)


async def page_title(page: Page) -> str:
    try:
        return await asyncio.wait_for(page.title(), 5)
    except (PlaywrightError, asyncio.TimeoutError):
        return ""  # mid-navigation


async def simplify(page: Page, text_only: bool, budget: int = 0, number: int = 1) -> JSONObject:
    """Run scan.js in the page: {content (page `number` of the output cut into pages of at most `budget` chars;
    0: one page), page, pages, total (chars of all pages), raw (outerHTML chars), main (found?), stats}."""
    options = {"textOnly": text_only, "budget": budget, "page": number}
    for attempt in range(3):
        try:
            await _settled(page)
            return await asyncio.wait_for(page.evaluate(scan_script(), options), SCAN_TIMEOUT)
        except PlaywrightError as exc:
            if "context was destroyed" not in str(exc) and "navigat" not in str(exc).lower() or attempt == 2:
                raise
            await asyncio.sleep(0.3)  # the page navigated under us: scan the new one
    raise AssertionError("unreachable")


async def _settled(page: Page) -> None:
    """Wait (a little) for a page still loading, so the scan sees its DOM."""
    try:
        await page.wait_for_load_state("domcontentloaded", timeout=10000)
    except PlaywrightError:
        pass


async def web_scan(session: WebSession, tabs_only: bool, switch_tab_id: Optional[str], text_only: bool,
                   number: int = 1, cap: int = 0) -> JSONObject:
    """The tab list and, unless tabs_only, page `number` of the active tab's scan, sized so that the
    tab list, a summary line and the page fit in `cap` chars (0: no limit)."""
    page = await session.page(switch_tab_id)
    tabs = await tab_list(session)
    if tabs_only:
        return {"tabs": tabs}
    budget = max(cap // 2, cap - len(tabs) - HEADER_RESERVE) if cap else 0
    result = await simplify(page, text_only, budget, number)
    result["tabs"] = tabs
    result["tab"] = session.active
    result["url"] = page.url
    return result
