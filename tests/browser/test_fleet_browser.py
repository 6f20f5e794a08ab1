"""The fleet overview for 1,000 nodes in a real headless Chromium: it loads without a console error (a CSP
violation is one), the search and the status filter narrow the table and the heat map, the columns sort, a
heat-map cell leads to its node's row, and a probe's matrix shows. Screenshots: artifacts/screenshots/fleet-*.png."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("fleet_bench", REPO / "benchmarks" / "fleet_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def thousand(tmp_path_factory):
    """The benchmark's fleet: 1,000 nodes made from the lab's recordings, and its overview."""
    from rdmadoctor.fleet import commands
    facts = tmp_path_factory.mktemp("fleet-1000")
    _bench().make_fleet(facts, 1000)
    doc = commands.check(None, facts, "rdmadoctor check")
    return doc, commands.html(doc)


def _click(pages, element):
    """Scrolled to the middle first: the sticky section bar would take a click at the top edge."""
    pages.js("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def _shown(pages):
    return pages.js("return document.querySelectorAll('#nodes-table tbody tr:not(.hidden)').length")


def test_a_thousand_nodes(pages, thousand, browser):
    from selenium.webdriver.common.by import By
    doc, page = thousand
    started = time.monotonic()
    pages.open(page, "fleet-1000")
    assert time.monotonic() - started < 10
    assert not [e for e in pages.errors()], pages.errors()
    assert pages.js("return document.documentElement.className") == ""          # the script ran (CSP allowed it)
    assert pages.js("return document.querySelectorAll('.heat .hm').length") == 1000
    assert _shown(pages) == 1000
    memlock = next(g for g in doc["groups"] if g["label"] == "memlock-limit")

    # search: words anywhere in a row (its node, cause, summary, versions, details)
    box = browser.find_element(By.ID, "node-search")
    box.send_keys("node0042")
    assert _shown(pages) == 1
    assert pages.js("return document.querySelectorAll('.heat .hm.match').length") == 1
    assert pages.js("return document.getElementById('shown-count').textContent") == "1 of 1000 shown"
    pages.js("var s = document.getElementById('node-search'); s.value = ''; s.dispatchEvent(new Event('input'));")
    box.send_keys("64 KiB")
    assert _shown(pages) >= memlock["count"]
    pages.js("var s = document.getElementById('node-search'); s.value = ''; s.dispatchEvent(new Event('input'));")
    assert _shown(pages) == 1000

    # the status filter
    failing = doc["summary"]["failure"]
    pages.js("var s = document.getElementById('status-filter'); s.value = 'failure';"
             " s.dispatchEvent(new Event('change'));")
    assert _shown(pages) == failing
    pages.js("var s = document.getElementById('status-filter'); s.value = ''; s.dispatchEvent(new Event('change'));")

    # a group's cause filters the table and the heat map to exactly its nodes; the chip clears it
    _click(pages, browser.find_element(By.CSS_SELECTOR, '#groups-table button[data-key="memlock-limit"]'))
    assert _shown(pages) == memlock["count"]
    assert pages.js("return document.querySelectorAll('.heat .hm.match').length") == memlock["count"]
    _click(pages, browser.find_element(By.ID, "key-filter"))
    assert _shown(pages) == 1000

    # sort by node, descending, then by verdict (failures first)
    head = browser.find_element(By.CSS_SELECTOR, "#nodes-table thead th:nth-child(1) button")
    _click(pages, head)
    _click(pages, head)
    assert pages.js("return document.querySelector('#nodes-table tbody tr').id") == "n-node1000"
    _click(pages, browser.find_element(By.CSS_SELECTOR, "#nodes-table thead th:nth-child(2) button"))
    assert pages.js("return document.querySelector('#nodes-table tbody tr').dataset.status") == "failure"

    # a heat-map cell leads to its row
    cell = browser.find_element(By.CSS_SELECTOR, '.heat .hm[data-node="node0500"]')
    _click(pages, cell)
    assert pages.js("return window.location.hash") == "#n-node0500"
    assert pages.js("return document.getElementById('n-node0500').getBoundingClientRect().top") < 900
    pages.js("window.location.hash = ''; window.scrollTo(0, 0);")
    assert not pages.errors()
    screenshots = REPO / "artifacts" / "screenshots"     # where the pages fixture keeps its shots
    screenshots.mkdir(parents=True, exist_ok=True)
    pages.width(1280, 1600)
    browser.save_screenshot(str(screenshots / "fleet-1000-top-1280.png"))      # what a reader sees first
    shot = pages.screenshot("fleet-1000", 1280)
    assert shot.stat().st_size > 10000


def test_the_overview_fits_a_phone(pages, thousand):
    _, page = thousand
    pages.open(page, "fleet-1000-narrow", width=375)
    assert not pages.errors()
    top = pages.js("return document.querySelector('#verdict').getBoundingClientRect().top")
    assert top < 120
    assert pages.js("return document.documentElement.scrollWidth") <= 375


def test_a_probe_matrix(pages):
    from tests.fleet.helpers import FACTS, result_of
    from tests.fleet.test_probe import names, simulated
    from rdmadoctor.fleet import html, nodes, probe, report
    from rdmadoctor.fleet.probe import ProbeOptions
    members = names(16)
    plan, results, extra, blame, iso = probe.probe_plan(
        members, ProbeOptions(), simulated(bad_nodes={"node0005"}, bad_links=[("node0009", "node0014")]))
    doc = report.build("probe", [nodes.from_result(n, result_of(FACTS["healthy"])) for n in members])
    doc["probe"] = {"design": "each pair (a, b): `rdmadoctor check --peer <b> --json` on a over ssh",
                    "plan": plan.stats(60), "isolation_rounds": iso, "members": 16, "excluded": [], "addresses": {},
                    "pairs": results + extra, "blame": blame}
    doc["status"] = "failure"
    pages.open(html.render(doc), "fleet-probe")
    assert not pages.errors()
    assert pages.js("return document.querySelectorAll('svg.matrix rect.mx').length") > 100
    kinds = pages.js("return Array.from(document.querySelectorAll('#blame li'))"
                     ".map(li => li.dataset.kind + ':' + li.dataset.nodes)")
    assert "node:node0005" in kinds and "link:node0009,node0014" in kinds
    pages.screenshot("fleet-probe-16", 1280)
