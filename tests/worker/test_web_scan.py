"""web_scan on a real Chromium: what it keeps, what it drops, and that the selectors it prints work."""
from __future__ import annotations

import json
import re

from configs import load_settings
from web_fixtures.server import SITE_NETWORK, goto, js, scan

HIDDEN_MARKERS = ["zqdisplay", "zqvisibility", "zqopacity", "zqoffscreen", "zqzerosize", "zqsronly", "zqpixel", "zqcsrf",
                  "zqclipped"]


def selectors(output: str) -> list[str]:
    return re.findall(r'sel="([^"]+)"', output)


def sel_of(output: str, text: str) -> str:
    """The selector printed on the element whose text starts with `text`."""
    match = re.search(r'sel="([^"]+)"[^>]*>' + re.escape(text), output)
    assert match, f"no element with text {text!r} in:\n{output}"
    return match.group(1)


def test_scan_keeps_what_a_person_sees_and_drops_the_rest(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    result = scan(ctx)
    out = result.output
    assert result.ok
    assert "Growing Tomatoes Indoors" in out and "eight hours of bright light" in out
    assert "<td>Red Robin</td>" in out and "<th>Days to harvest</th>" in out
    assert 'placeholder="Your name"' in out and "<option selected>Pro</option>" in out
    assert "We use cookies to remember your cart." in out  # the cookie banner is visible: kept
    assert "Changelog entry one" in out  # scrolled out of its fixed panel, but a scroll away
    assert "Slide one: spring planting" in out  # while slide two is clipped by the carousel frame
    for marker in HIDDEN_MARKERS:
        assert marker not in out, marker
    assert "analyticsQueue" not in out and "font-family" not in out and "fixture script failure" not in out
    assert "<main>" in out  # the main content is identified
    assert result.data["stats"]["hidden"] >= 5 and result.data["stats"]["offscreen"] >= 1
    assert result.data["chars"] * 3 < result.data["raw_chars"]


def test_scan_collapses_menus_repeated_navigation_and_long_lists(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    out = scan(ctx).output
    assert ">Seeds</a>" in out and ">Sale</a>" not in out  # 40-link menu: the head survives
    assert "more links" in out
    assert out.count('href="/category/seeds.html"') == 1  # the footer repeats the top menu: dropped
    assert "Acme Garden Supplies" not in out and "All rights reserved" not in out  # credits outside main: dropped
    assert "Related article number 1 about" in out and "Related article number 29 about" not in out


def test_scan_drops_content_covered_by_a_modal_until_it_is_closed(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/modal.html")
    first = scan(ctx)
    assert "Subscribe to our newsletter" in first.output
    assert "zqcovered" not in first.output
    assert first.data["stats"]["covered"] >= 1
    closed = js(ctx, f"document.querySelector({sel_of(first.output, 'No thanks')!r}).click()")
    assert closed.ok
    second = scan(ctx).output
    assert "Subscribe to our newsletter" not in second
    assert second.count("zqcovered") == 4  # including the paragraph far below the first screen


def test_printed_selectors_each_match_exactly_one_element(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    out = scan(ctx).output
    sels = selectors(out)
    assert len(sels) >= 10 and "#name" in sels and "#cookie-accept" in sels
    assert 'href="details.html" target="_blank">' in out  # a link followed by its href needs no sel
    counts = js(ctx, f"{json.dumps(sels)}.map(s => document.querySelectorAll(s).length)", no_monitor=True)
    assert counts.output.startswith("value: [")
    assert set(eval(counts.output[len("value: "):])) == {1}  # a JSON list of ints


def test_selectors_drive_the_form_and_the_cookie_banner(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    out = scan(ctx).output
    filled = js(ctx, f"document.querySelector({sel_of(out, 'Sign up')!r}).form.querySelector('#name').value = 'Grace';"
                     f" document.querySelector({sel_of(out, 'Sign up')!r}).click()")
    assert "You are signed up" in filled.output
    js(ctx, f"document.querySelector({sel_of(out, 'Accept cookies')!r}).click()")
    after = scan(ctx).output
    assert "We use cookies" not in after
    assert 'value="Grace"' in after and "Signed up as Grace (pro)" in after
    # selectors stay the same across scans of the same page
    assert sel_of(after, "Sign up") == sel_of(out, "Sign up")


def test_text_mode_is_plain_text(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    text = scan(ctx, text_only=True).output
    assert "# Growing Tomatoes Indoors" in text and "| Red Robin | 63 | High" in text
    body = text.split("\n", 3)[3]
    assert "<" not in body and "sel=" not in body


def test_a_page_over_the_cap_comes_in_pages_that_hold_all_of_it(make_ctx, site):
    small = load_settings({"home": str(make_ctx().settings.home_dir), "context.caps.web_scan_text": 700,
                           "context.caps.web_scan_html": 1000, **SITE_NETWORK})
    tight = make_ctx("tight", settings=small)
    goto(tight, f"{site}/index.html")
    for options, cap in (({"text_only": True}, 700), ({}, 1000)):
        first = scan(tight, **options)
        pages = first.data["pages"]
        assert pages >= 2 and first.output.startswith(f"main content: page 1 of {pages}; web_scan(")
        outputs = [first.output] + [scan(tight, page=n, **options).output for n in range(2, pages + 1)]
        assert outputs[-1].startswith(f"main content: page {pages} of {pages} (the last)")
        for out in outputs:
            assert len(out) <= cap and "chars cut" not in out
        whole = "\n".join(outputs)
        for sentence in ("eight hours of bright light", "Pinch the suckers", "Micro Tom", "Join the growers club",
                         "Send me the newsletter" if options else "Sign up", "Accept cookies"):
            assert sentence in whole, sentence
        if not options:  # pages end on element boundaries: each page's tags balance
            for out in outputs:
                body = out.split("\n", 3)[3]
                for tag in ("table", "form", "article", "main", "p"):
                    assert body.count(f"<{tag}>") + body.count(f"<{tag} ") == body.count(f"</{tag}>"), (tag, body)
    beyond = scan(tight, page=99)
    assert not beyond.ok and "no page 99" in beyond.output and "web_scan(page=1)" in beyond.output


def test_tabs_list_and_switching(make_ctx, site):
    ctx = make_ctx()
    tabs = scan(ctx, tabs_only=True)
    assert tabs.ok and "*t1" in tabs.output and "about:blank" in tabs.output
    goto(ctx, f"{site}/index.html")
    opened = js(ctx, "document.querySelector('#open-details').click()")
    assert "new tab t2 'Tomato care sheet'" in opened.output and "now the active tab" in opened.output
    listing = scan(ctx, tabs_only=True).output
    assert " t1 'Growing Tomatoes Indoors" in listing and "*t2 'Tomato care sheet'" in listing
    back = scan(ctx, switch_tab_id="t1", text_only=True)
    assert "*t1" in back.output and "# Growing Tomatoes Indoors" in back.output
    assert js(ctx, "document.title", no_monitor=True).output == "value: Growing Tomatoes Indoors - Acme Garden"
    missing = scan(ctx, switch_tab_id="t9")
    assert not missing.ok and "no tab 't9'" in missing.output and "t1, t2" in missing.output
