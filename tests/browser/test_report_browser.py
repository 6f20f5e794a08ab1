"""The HTML report in a real headless Chromium: it loads without a console error (a CSP violation is one),
shows the verdict, findings and tables, its copy button copies, hostile logs stay text, and it holds up
at 375 px and in print. Screenshots: artifacts/screenshots/*.png."""
from __future__ import annotations

import json
import time

import pytest

import html_docs
from rdmadoctor.render import html as hr

LAB_FACTS = html_docs.FIXTURES / "facts" / "lab" / "trixie" / "facts-firewall.json"


LAB_FAULT = html_docs.FIXTURES / "lab" / "trixie" / "memlock-64k-nonroot-server"


def _lab_fault_logs():
    """A fault recorded in the lab: the server's MR registration under a 64 KiB memlock limit."""
    return f"lab-{LAB_FAULT.parent.name}-{LAB_FAULT.name}", sorted(LAB_FAULT.glob("*.log"))


def _wait(pages, script, timeout=3.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pages.js(script)
        if value:
            return value
        time.sleep(0.05)
    return pages.js(script)


def _assert_no_console_errors(pages):
    errors = pages.errors()
    assert not errors, "console errors:\n" + "\n".join(e.get("message", "") for e in errors)


def _assert_fits(pages, width):
    overflow = pages.js("return document.documentElement.scrollWidth")
    assert overflow <= width, f"the page is {overflow} px wide at a {width} px viewport"


def test_seed_report(pages):
    doc = html_docs.seed_document()
    pages.open(hr.render(doc), "seed")
    _assert_no_console_errors(pages)
    assert pages.js("return document.documentElement.className") == ""          # the script ran (CSP allowed it)
    assert pages.js("return getComputedStyle(document.body).margin") == "0px"   # the stylesheet applied
    status = pages.js("return document.querySelector('#verdict .status-text').textContent")
    assert status == "Failure"
    summary = pages.js("return document.querySelector('#verdict-title').textContent")
    assert summary == doc["verdict"]["summary"]
    shown = pages.js("return document.querySelector('.verdict-fix').textContent")
    assert doc["verdict"]["fix"] in " ".join(shown.split())
    cards = pages.js("return Array.from(document.querySelectorAll('article.card')).map(a => a.dataset.rule)")
    assert sorted(cards) == sorted(f["rule"] for f in doc["findings"])
    # the explained findings are folded: in the DOM, not on screen until opened
    folded = "document.querySelector('article[data-rule=\"PT-GARBAGE-ROW\"]')"
    assert pages.js(f"return {folded}.closest('details').open") is False
    assert pages.js(f"return {folded}.checkVisibility()") is False
    differs = pages.js("return Array.from(document.querySelectorAll('table.compare tr.differs'))"
                       ".map(r => r.dataset.parameter)")
    assert set(differs) == {c["parameter"] for c in doc["comparisons"] if c["differs"]}
    marks = pages.js("return Array.from(document.querySelectorAll('.evidence mark')).map(m => m.textContent)")
    assert "Number of qps   : 10" in marks
    pages.screenshot("seed-qp-mismatch", 1280)
    pages.js("document.querySelectorAll('details.explained, details.raw').forEach(d => d.open = true)")
    pages.screenshot("seed-qp-mismatch-expanded", 1280)


def test_seed_report_on_a_narrow_screen(pages):
    pages.open(hr.render(html_docs.seed_document()), "seed-narrow", width=375)
    _assert_no_console_errors(pages)
    _assert_fits(pages, 375)
    # the verdict comes first and is readable without zooming
    top = pages.js("return document.querySelector('#verdict').getBoundingClientRect().top")
    size = pages.js("return parseFloat(getComputedStyle(document.querySelector('#verdict-title')).fontSize)")
    assert top < 120 and size >= 18
    pages.screenshot("seed-qp-mismatch", 375)


def test_copy_button_copies_the_command(pages, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    doc = html_docs.seed_document()
    pages.open(hr.render(doc), "copy")
    button = browser.find_element(By.CSS_SELECTOR, ".verdict-fix button.copy")
    expected = button.get_attribute("data-copy")
    assert expected == "ib_write_bw --ib-dev=mlx5_1 --qp=10"
    button.click()
    assert _wait(pages, "return document.querySelector('.verdict-fix button.copy').dataset.copied") == "yes"
    assert button.text == "Copied"
    # paste it back: what the user would get
    pages.js("var t = document.createElement('textarea'); t.id = 'paste-here'; document.body.appendChild(t);")
    area = browser.find_element(By.ID, "paste-here")
    area.click()
    area.send_keys(Keys.CONTROL, "v")
    assert _wait(pages, "return document.getElementById('paste-here').value") == expected
    _assert_no_console_errors(pages)


def test_hostile_logs_stay_text(pages, tmp_path):
    doc = html_docs.explain_document(html_docs.hostile_logs(tmp_path))
    for redact in (False, True):
        pages.open(hr.render(doc, redact=redact), f"xss-{redact}")
        assert pages.js("return typeof window.__pwned") == "undefined"
        assert pages.js("return document.querySelectorAll('img').length") == 0
        assert pages.js("return document.scripts.length") == 1
        text = pages.js("return document.body.textContent")
        assert html_docs.HOSTILE in text and html_docs.HOSTILE_ATTR in text
        # opening every section (the raw logs render their lines) changes nothing
        pages.js("document.querySelectorAll('details').forEach(d => d.open = true)")
        time.sleep(0.1)
        assert pages.js("return typeof window.__pwned") == "undefined"
        _assert_no_console_errors(pages)
    pages.screenshot("xss-hostile-log", 1280)


def test_lab_fault_report(pages):
    name, logs = _lab_fault_logs()
    doc = html_docs.explain_document(logs)
    pages.open(hr.render(doc), "lab-fault")
    _assert_no_console_errors(pages)
    assert doc["verdict"]["cause"] == "memlock-limit"
    assert pages.js("return document.querySelector('#verdict .status-text').dataset.status") == doc["verdict"]["status"]
    assert pages.js("return document.querySelectorAll('article.card').length") == len(doc["findings"])
    pages.screenshot(f"fault-{name}", 1280)
    pages.screenshot(f"fault-{name}", 375)
    _assert_fits(pages, 375)


def test_lab_check_report_with_facts(pages):
    doc = html_docs.check_document(LAB_FACTS)
    pages.open(hr.render(doc), "lab-check")
    _assert_no_console_errors(pages)
    for tid in ("facts-devices", "facts-ports", "facts-gids", "facts-netdevs", "facts-routes", "facts-firewall",
                "facts-limits", "facts-versions"):
        rows = pages.js(f"return document.querySelectorAll('#{tid} tbody tr').length")
        assert rows >= 1, tid
    verdicts = pages.js("return Array.from(document.querySelectorAll('#facts-firewall td.bad'))"
                        ".map(t => t.textContent)")
    assert "drop" in verdicts
    states = pages.js("return Object.fromEntries(Array.from(document.querySelectorAll('.ladder .rung'))"
                      ".map(r => [r.dataset.rung, r.dataset.state]))")
    assert states["firewall"] == "failed" and states["connection"] == "skipped" and states["device"] == "passed"
    pages.screenshot("lab-check-firewall", 1280)
    pages.screenshot("lab-check-firewall", 375)
    _assert_fits(pages, 375)


def test_redacted_report(pages):
    doc = html_docs.check_document(LAB_FACTS)
    pages.open(hr.render(doc, redact=True), "redacted")
    _assert_no_console_errors(pages)
    pages.js("document.querySelectorAll('details').forEach(d => d.open = true)")
    text = pages.js("return document.documentElement.outerHTML")
    for secret in ("192.0.2.1", "192.0.2.2", "coll-trixie-h1", "5054:00ff:fe00:0101", "fe80::5054:ff:fe00:101",
                   "52:54:00:00:01:01"):
        assert secret not in text, secret
    assert "::ffff:ip-" in text and "host-1" in text
    pages.screenshot("lab-check-firewall-redacted", 1280)


def test_healthy_run_chart(pages):
    healthy = html_docs.FIXTURES / "real" / "crater-memlock-fixed-healthy"
    doc = html_docs.explain_document(sorted(healthy.glob("*.log")), link_rate=100.0)
    pages.open(hr.render(doc), "healthy")
    _assert_no_console_errors(pages)
    assert pages.js("return document.querySelectorAll('#results svg.chart-svg rect.bar').length") == 2
    box = pages.js("var r = document.querySelector('#results svg').getBoundingClientRect(); return [r.width, r.height]")
    assert box[0] > 300 and box[1] > 80
    pages.screenshot("healthy-bandwidth", 1280)


def test_print_expands_everything_and_hides_buttons(pages, browser):
    import base64
    pages.open(hr.render(html_docs.seed_document()), "print")
    closed = pages.js("return document.querySelectorAll('details:not([open])').length")
    assert closed > 0
    pages.js("window.dispatchEvent(new Event('beforeprint'))")
    assert pages.js("return document.querySelectorAll('details:not([open])').length") == 0
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        hidden = pages.js("return Array.from(document.querySelectorAll('button')).every("
                          "b => getComputedStyle(b).display === 'none')")
        assert hidden, "buttons show in print"
        assert pages.js("return getComputedStyle(document.querySelector('nav.toc')).display") == "none"
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    pages.js("window.dispatchEvent(new Event('afterprint'))")
    assert pages.js("return document.querySelectorAll('details:not([open])').length") == closed
    pdf = browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": True})
    assert base64.b64decode(pdf["data"]).startswith(b"%PDF")


def test_evidence_link_opens_the_raw_log(pages, browser):
    from selenium.webdriver.common.by import By
    pages.open(hr.render(html_docs.seed_document()), "anchor")
    link = browser.find_element(By.CSS_SELECTOR, ".evidence a.ev-link")
    target = link.get_attribute("href").rsplit("#", 1)[1]
    link.click()
    assert _wait(pages, f"return document.getElementById('{target}').closest('details').open") is True
    assert pages.js(f"return document.getElementById('{target}').classList.contains('hit')")


def test_check_report_from_the_engine(pages):
    doc = html_docs.real_check_document(LAB_FACTS)
    pages.open(hr.render(doc), "engine-check")
    _assert_no_console_errors(pages)
    states = pages.js("return Array.from(document.querySelectorAll('.ladder .rung, .strip .rung'))"
                      ".map(r => r.dataset.state)")
    assert len(states) == len(doc["rungs"]) and states == [r["state"] for r in doc["rungs"]]
    assert pages.js("return document.querySelectorAll('article.card').length") == len(doc["findings"])
    assert pages.js("return document.querySelectorAll('#facts table').length") >= 8
    pages.screenshot("check-lab-firewall", 1280)
    pages.screenshot("check-lab-firewall", 375)
    _assert_fits(pages, 375)


BENCH = html_docs.FIXTURES / "lab" / "bench"


@pytest.mark.parametrize("name", ["sweep-3x3", "sweep-memlock"])
def test_bench_sweep_report(pages, name):
    """A bench sweep recorded in the lab (fixtures/lab/bench/, `pytest tests/lab/test_bench.py` writes them)."""
    doc = json.loads((BENCH / f"{name}.diagnosis.json").read_text())
    pages.open(hr.render(doc), name)
    _assert_no_console_errors(pages)
    results = doc["bench"]["results"]
    rows = pages.js("return Array.from(document.querySelectorAll('#sweep-table tbody tr'))"
                    ".map(r => [r.querySelector('th').textContent.trim(), r.dataset.status])")
    assert [(label.replace(" best", ""), status) for label, status in rows] == \
        [(f"{r['tool']} qp={r['qp']} size={r['size']}", r["status"]) for r in results]
    best = pages.js("return Array.from(document.querySelectorAll('#sweep-table tr.best th')).map(t => t.textContent)")
    assert [b.replace(" best", "").strip() for b in best] == [doc["bench"]["best"]]
    # one line per QP count in each chart, one point per completed combination
    qps = {r["qp"] for r in results if r["status"] == "ok"}
    for kind in ("bw", "rate"):
        lines = pages.js(f"return document.querySelectorAll('#sweep figure[data-kind=\"{kind}\"] svg polyline').length")
        assert lines == len(qps), kind
    failed = [r for r in results if r["status"] != "ok"]
    for r in failed:
        cause = pages.js("return Array.from(document.querySelectorAll('#sweep-table tr[data-status=\"failed\"] code'))"
                         ".map(c => c.textContent)")
        assert r["verdict"]["cause"] in cause
    if failed:
        assert pages.js("return document.querySelector('#verdict .status-text').textContent") == "Failure"
    pages.screenshot(f"bench-{name}", 1280)
    pages.screenshot(f"bench-{name}", 375)
    _assert_fits(pages, 375)
