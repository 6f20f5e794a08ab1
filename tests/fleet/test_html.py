"""The fleet overview's HTML: self-contained, autoescaped, one heat-map cell and one table row per node, the
pair matrix for a probe."""
from __future__ import annotations

import re

from tests.fleet.helpers import FACTS, result_of
from tests.fleet.test_probe import names, simulated
from rdmadoctor.fleet import html, nodes, probe, report
from rdmadoctor.fleet.probe import ProbeOptions


def _records():
    recs = [nodes.from_result(f"node{i:02d}", result_of(FACTS["healthy"])) for i in range(1, 7)]
    recs.append(nodes.from_result("node07", result_of(FACTS["memlock"])))
    recs.append(nodes.without_result("node08", "unreachable", "ssh: connect to host node08 port 22: Connection refused",
                                     255, 0.3))
    return recs


def test_page_is_self_contained_and_complete():
    page = html.render(report.build("check", _records(), source="ssh"))
    assert "Content-Security-Policy" in page and "default-src &#39;none&#39;" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", page)
    assert page.count('class="hm ') == 8 and page.count('class="node-row') == 8
    assert "memlock-limit" in page and "node[01-06]" in page and "unreachable" in page
    assert ' style="' not in page                         # the CSP would refuse inline style attributes


def test_values_from_nodes_are_text():
    recs = _records()
    recs[6]["summary"] = "<script>alert(1)</script>"
    recs[7]["node"] = "<img src=x onerror=alert(1)>"
    page = html.render(report.build("check", recs, source="ssh"))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page


def test_probe_page_has_the_matrix_and_the_blame():
    plan, results, extra, blame, iso = probe.probe_plan(names(8), ProbeOptions(),
                                                        simulated(bad_nodes={"node0002"}))
    doc = report.build("probe", [nodes.from_result(n, result_of(FACTS["healthy"])) for n in names(8)])
    doc["probe"] = {"design": "d", "plan": plan.stats(60), "isolation_rounds": iso, "members": 8, "excluded": [],
                    "addresses": {}, "pairs": results + extra, "blame": blame}
    page = html.render(doc)
    assert 'class="matrix"' in page and page.count('class="mx out-') == len({(p["a"], p["b"]) for p in results + extra})
    assert 'data-kind="node" data-nodes="node0002"' in page
    assert "mx-label blamed" in page


def test_a_thousand_nodes_render_without_a_matrix_of_a_million_cells():
    recs = [nodes.from_result(f"n{i:04d}", result_of(FACTS["healthy"])) for i in range(1, 1001)]
    doc = report.build("check", recs, source="files")
    page = html.render(doc)
    assert page.count('class="hm ') == 1000
    assert len(page) < 3_000_000
