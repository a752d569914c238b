"""web_scan on the shapes of real sites, in a real Chromium: long main content paged and never collapsed, a
navigation-heavy page cut down to what a person moves on with, a shadow-DOM component and a same-origin iframe
whose printed selectors work."""
from __future__ import annotations

import re

from configs import load_settings
from web_fixtures.server import SITE_NETWORK, goto, js, scan


def all_pages(ctx, **options) -> list[str]:
    first = scan(ctx, **options)
    assert first.ok, first.output
    return [first.output] + [scan(ctx, page=n, **options).output for n in range(2, first.data["pages"] + 1)]


def test_a_long_table_and_list_in_the_main_content_are_kept_whole_across_pages(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/longtable.html")
    pages = all_pages(ctx)
    assert len(pages) >= 2 and pages[0].startswith(f"main content: page 1 of {len(pages)}; web_scan(page=2) for more")
    whole = "\n".join(pages)
    rows = re.findall(r"<td>Part (\d{3})</td>", whole)
    assert rows == [f"{i:03d}" for i in range(1, 401)]  # every row, once, in order: pages neither lose nor repeat
    steps = re.findall(r">Assembly step (\d+):", whole)
    assert steps == [str(i) for i in range(1, 151)]
    assert "more items" not in whole and "more links" not in whole
    assert "zqfirstpara" in pages[0] and "zqlastpara" in pages[-1]
    for page in pages:  # a page ends on an element boundary: it closes what it opened
        body = page.split("\n", 3)[3]
        for tag in ("table", "tr", "ul", "li", "main"):
            assert len(re.findall(rf"<{tag}[ >]", body)) == body.count(f"</{tag}>"), (tag, body[-300:])
    text_pages = all_pages(ctx, text_only=True)
    assert text_pages[0].startswith("main content: page 1 of") and "web_scan(text_only=true, page=2)" in text_pages[0]
    assert re.findall(r"\| Part (\d{3}) \|", "\n".join(text_pages)) == [f"{i:03d}" for i in range(1, 401)]


def test_a_navigation_heavy_page_keeps_the_way_on_and_drops_the_furniture(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/navheavy.html")
    result = scan(ctx)
    out = result.output
    body = out.split("\n", 2)[2]
    assert "zqtune" in out and "Raise the cache size" in out  # the main content
    for near in ("Topic 40", "Topic 41", "Topic 42", "Topic 43", "Topic 44"):  # the current item and its neighbours
        assert near in out, near
    assert "Topic 39" not in out and "Topic 45" not in out and "Topic 120" not in out
    assert "<i>… 118 more links</i>" in out  # 123 in the sidebar, 5 kept
    assert 'placeholder="Search the docs"' in out and ">Next: Topic 43</a>" in out and ">Previous: Topic 41</a>" in out
    assert "Handbook</a> » <a" in out  # breadcrumbs
    for furniture in ("Copyright", "Created using", "7.3.1", "Show source", 'href="#why"'):
        assert furniture not in out, furniture
    assert result.data["raw_chars"] >= 8 * len(body)
    assert body.count("sel=") == 2  # the search box and its button; links are followed by href


def test_a_shadow_dom_component_is_scanned_and_its_selectors_reach_into_it(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/shadow.html")
    out = scan(ctx).output
    assert "Email preferences" in out and "zqshadowtext" in out and "zqshadowhidden" not in out
    assert "<option selected>weekly</option>" in out
    save = re.search(r'<button sel="([^"]+)">Save preferences', out).group(1)
    freq = re.search(r'<select sel="([^"]+)">', out).group(1)
    assert " >>> " in save
    assert "not a valid selector" in js(ctx, f"document.querySelector({save!r})", no_monitor=True).output
    changed = js(ctx, f"$ga({freq!r}).value = 'daily'; $ga({save!r}).click()")
    assert changed.ok, changed.output
    assert "Saved: daily" in scan(ctx).output


def test_a_same_origin_iframe_is_scanned_and_its_selectors_reach_into_it(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/frame.html")
    out = scan(ctx).output
    assert "zqframetext" in out and "zqframehidden" not in out
    assert "zqcrossorigin" not in out  # another origin's document cannot be read
    card = re.search(r'<input sel="([^"]+)" placeholder="1234', out).group(1)
    pay = re.search(r'<button sel="([^"]+)">Pay now', out).group(1)
    assert card.startswith("#pay >>> ") and pay.startswith("#pay >>> ")
    js(ctx, f"$ga({card!r}).value = '4111'; $ga({pay!r}).click()")
    assert "Paid with 4111" in scan(ctx).output


def test_the_first_line_of_a_paged_scan_counts_pages_within_a_small_cap(make_ctx, site, tmp_path):
    small = load_settings({"home": str(tmp_path / "home"), "context.caps.web_scan_html": 4000, **SITE_NETWORK})
    ctx = make_ctx("small", settings=small)
    goto(ctx, f"{site}/longtable.html")
    pages = all_pages(ctx)
    assert len(pages) >= 8
    for number, page in enumerate(pages, 1):
        assert len(page) <= 4000 and "chars cut" not in page
        assert page.startswith(f"main content: page {number} of {len(pages)}")
    assert re.findall(r"<td>Part (\d{3})</td>", "\n".join(pages)) == [f"{i:03d}" for i in range(1, 401)]
