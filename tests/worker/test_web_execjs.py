"""web_execute_js on a real Chromium: values, errors, change reports, save_to_file, scripts from files."""
from __future__ import annotations

import json

from web_fixtures.server import goto, js, scan


def value(result) -> object:
    assert result.ok, result.output
    first = result.output.split("\nchanges:")[0]
    assert first.startswith("value: ")
    return json.loads(first[len("value: "):])


def test_values_come_back_json_safe_like_a_console(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    assert value(js(ctx, "1 + 1", no_monitor=True)) == 2
    assert value(js(ctx, "const a = 20;\nconst b = 22;\na + b", no_monitor=True)) == 42  # last expression
    assert value(js(ctx, "const rows = document.querySelectorAll('tr');\nreturn rows.length", no_monitor=True)) == 5
    assert value(js(ctx, "await new Promise(r => setTimeout(r, 50)); ({ok: true, n: null})", no_monitor=True)) == {"ok": True, "n": None}
    assert value(js(ctx, "undefined", no_monitor=True)) is None
    assert value(js(ctx, "[NaN, 1/0, 10n]", no_monitor=True)) == ["NaN", "Infinity", "10"]
    assert value(js(ctx, "const o = {name: 'loop'}; o.self = o; o", no_monitor=True)) == {"name": "loop", "self": "[circular]"}
    assert value(js(ctx, "document.querySelectorAll('#varieties td')", no_monitor=True))[:2] == ["<td>Tiny Tim</td>", "<td>55</td>"]
    element = js(ctx, "document.querySelector('#say-hi')", no_monitor=True).output
    assert element == 'value: <button id="say-hi" onclick="alert(\'Hello from the fixture\')">say hi</button>'
    assert js(ctx, "document.title", no_monitor=True).output == "value: Growing Tomatoes Indoors - Acme Garden"


def test_javascript_errors_are_the_tools_error_not_a_crash(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    thrown = js(ctx, "const x = 1;\nthrow new Error('boom at two')")
    assert not thrown.ok and not thrown.evidence
    assert thrown.output == "error: the script threw Error: boom at two (line 2)"
    missing = js(ctx, "document.querySelector('#nope').click()")
    assert not missing.ok and "TypeError" in missing.output and "null" in missing.output
    syntax = js(ctx, "let = = 3")
    assert not syntax.ok and "SyntaxError" in syntax.output
    rejected = js(ctx, "await Promise.reject(new RangeError('too far'))")
    assert not rejected.ok and "RangeError: too far" in rejected.output
    assert js(ctx, "document.title", no_monitor=True).output == "value: Growing Tomatoes Indoors - Acme Garden"  # still usable


def test_a_script_that_never_finishes_is_stopped(make_ctx, site, web_settings):
    from configs import load_settings

    quick = load_settings({"home": str(web_settings.home_dir), "worker.code_timeout": 1})
    ctx = make_ctx("quick", settings=quick)
    busy = js(ctx, "while (true) {}", no_monitor=True)
    assert not busy.ok and "longer than 1s" in busy.output
    waiting = js(ctx, "await new Promise(() => {})", no_monitor=True)
    assert not waiting.ok and "did not finish in 1s" in waiting.output
    assert value(js(ctx, "6 * 7", no_monitor=True)) == 42


def test_change_report_for_navigation_toast_dialog_and_page_errors(make_ctx, site):
    ctx = make_ctx()
    nav = goto(ctx, f"{site}/index.html")
    assert f"navigated to {site}/index.html (title 'Growing Tomatoes Indoors - Acme Garden')" in nav.output
    assert "uncaught error in t1: Error: fixture script failure at load" in nav.output  # the page's own script throws
    signup = js(ctx, "document.querySelector('#name').value = 'Ada';\ndocument.querySelector('#signup button').click()")
    assert "message appeared: 'Thanks, Ada! You are signed up.'" in signup.output  # the toast is gone after 0.4 s
    assert "DOM mutations" in signup.output and "navigated" not in signup.output
    gone = "await new Promise(r => setTimeout(r, 600)); document.querySelector('.toast')"
    assert value(js(ctx, gone, no_monitor=True)) is None  # short-lived: the report caught it anyway
    alert = js(ctx, "document.querySelector('#say-hi').click(); 'clicked'")
    assert alert.output.startswith("value: clicked") and 'dialog alert "Hello from the fixture" in t1 (accepted)' in alert.output
    broken = js(ctx, "document.querySelector('#broken').click()")
    assert broken.ok and "uncaught error in t1: Error: broken button handler" in broken.output
    quiet = js(ctx, "document.title")
    assert quiet.output.endswith("changes: none seen")


def test_change_report_waits_for_requests_the_script_started(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    loaded = js(ctx, "document.querySelector('#load-results').click()")  # the answer comes after 0.7 s
    assert "message appeared: 'Loaded 3 results'" in loaded.output and "DOM mutations" in loaded.output


def test_change_report_for_a_single_page_app_route(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/spa.html")
    routed = js(ctx, "document.querySelector('a[data-route=schedule]').click()")
    assert f"URL changed to {site}/spa.html?route=schedule without a page load" in routed.output
    assert "title changed to 'Planner - Schedule'" in routed.output and "DOM mutations" in routed.output
    assert "Monday: tomatoes" in scan(ctx, text_only=True).output


def test_change_report_for_a_new_tab(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    opened = js(ctx, "document.querySelector('#open-details').click()")
    assert f"new tab t2 'Tomato care sheet' {site}/details.html (now the active tab)" in opened.output
    assert "Tomato care sheet" in scan(ctx, text_only=True).output
    popup = js(ctx, f"window.open('{site}/spa.html'); 1")
    assert "new tab t3 'Planner - Home'" in popup.output


def test_save_to_file_and_scripts_from_files(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    saved = js(ctx, "[...document.querySelectorAll('#related a')].map(a => a.textContent)", save_to_file="out/related.json")
    assert saved.ok and saved.output.startswith("value: saved ") and "to out/related.json; preview: [" in saved.output
    titles = json.loads((ctx.workdir / "out" / "related.json").read_text())
    assert len(titles) == 30 and titles[-1] == "Related article number 30 about gardening"
    escaped = js(ctx, "document.title", save_to_file="../outside.txt")
    assert not escaped.ok and "outside" in escaped.output and not (ctx.workdir.parent / "outside.txt").exists()
    (ctx.workdir / "count.js").write_text("const cells = document.querySelectorAll('td');\ncells.length\n")
    assert value(js(ctx, "count.js", no_monitor=True)) == 12
    missing = js(ctx, "nothing-here.js")
    assert not missing.ok and "no such file" in missing.output


def test_no_monitor_reports_nothing_and_is_quick(make_ctx, site):
    ctx = make_ctx()
    goto(ctx, f"{site}/index.html")
    result = js(ctx, "document.querySelector('#toggle').click(); document.querySelector('#toggle').textContent", no_monitor=True)
    assert result.output == "value: Toggled on"


def test_change_report_for_errors_pages_unreachable_servers_and_closed_tabs(make_ctx, site):
    import socket

    ctx = make_ctx()
    missing = js(ctx, f"location.href = '{site}/missing.html'")
    assert f"navigated to {site}/missing.html" in missing.output and "HTTP 404" in missing.output
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = js(ctx, f"location.href = 'http://127.0.0.1:{port}/'")  # through the egress proxy: its 502 page
    assert f"navigated to http://127.0.0.1:{port}/ (title '', HTTP 502)" in refused.output, refused.output
    assert f"cannot reach 127.0.0.1:{port}" in js(ctx, "document.body.innerText", no_monitor=True).output
    unlisted = js(ctx, "location.href = 'https://unlisted.example/'")  # the proxy refuses the tunnel
    assert ("navigation failed: net::ERR_TUNNEL_CONNECTION_FAILED loading https://unlisted.example/ (the browser"
            " reaches only the hosts in sandbox.network: 127.0.0.1)") in unlisted.output, unlisted.output
    goto(ctx, f"{site}/index.html")
    popup = js(ctx, f"window.open('{site}/details.html')")
    assert popup.output.startswith("value: [another window]") and "new tab t2" in popup.output
    closed = js(ctx, "window.close()")
    assert "tab t2 closed; the active tab is now t1" in closed.output
    assert js(ctx, "document.title", no_monitor=True).output == "value: Growing Tomatoes Indoors - Acme Garden"
