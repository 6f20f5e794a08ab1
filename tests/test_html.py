"""The HTML report (rdmadoctor.render.html) at the string level: escaping, redaction, charts, fields,
documents with parts missing. The browser tests (tests/browser/) load the same pages in Chromium."""
from __future__ import annotations

import copy
import html as htmllib
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "browser"))

import html_docs  # noqa: E402
from rdmadoctor.render import html as hr  # noqa: E402
from rdmadoctor.render import svg  # noqa: E402
from rdmadoctor.render.redact import Redactor, redact_document  # noqa: E402

FACTS = html_docs.FIXTURES / "facts" / "lab" / "trixie" / "facts-firewall.json"


@pytest.fixture(scope="module")
def seed():
    return html_docs.seed_document()


@pytest.fixture(scope="module")
def seed_html(seed):
    return hr.render(seed)


class Page(HTMLParser):
    """Text, tags and attributes of a page, the way a browser's DOM would hold them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.attrs = []
        self.chunks = []
        self.script_bodies = []
        self._in_script = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_bodies.append(data)
        else:
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def norm_text(self) -> str:
        return " ".join(self.text.split())


def _norm(s: str) -> str:
    return " ".join(str(s).split())


# -- structure ---------------------------------------------------------------------------------------

def test_one_self_contained_file(seed_html):
    page = Page(seed_html)
    assert seed_html.startswith("<!DOCTYPE html>")
    # nothing is loaded: no external script, stylesheet, image, font, frame or fetch
    for tag, attrs in page.attrs:
        assert "src" not in attrs or attrs["src"].startswith("data:"), (tag, attrs)
        if tag == "link":
            pytest.fail(f"a <link> in a self-contained report: {attrs}")
        for key in ("href", "action", "formaction"):
            value = attrs.get(key)
            assert value is None or value.startswith("#"), (tag, key, value)
    assert "@import" not in seed_html and "url(" not in seed_html
    assert not re.search(r"https?://", "".join(page.script_bodies))
    assert page.tags.count("script") == 1 and page.tags.count("style") == 1


def test_csp_allows_exactly_the_inline_style_and_script(seed_html):
    import base64
    import hashlib
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', seed_html)
    assert m, "no CSP meta tag"
    csp = htmllib.unescape(m.group(1))
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    style = re.search(r"<style>(.*?)</style>", seed_html, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", seed_html, re.S).group(1)
    for body, directive in ((style, "style-src"), (script, "script-src")):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in csp
    # the CSP meta comes before anything it governs
    assert seed_html.index("Content-Security-Policy") < seed_html.index("<style>")
    assert ' style="' not in seed_html           # inline style attributes would be blocked


def test_every_verdict_field_is_in_the_page(seed, seed_html):
    text = Page(seed_html).norm_text()
    v = seed["verdict"]
    for key in ("status", "cause", "rule", "summary", "confidence", "fix"):
        assert v[key], key
    assert "Failure" in text
    assert v["cause"] in text and v["rule"] in text and _norm(v["summary"]) in text and v["confidence"] in text
    assert _norm(v["fix"]) in text
    assert 'class="verdict status-failure"' in seed_html


def test_every_finding_field_is_in_the_page(seed, seed_html):
    page = Page(seed_html)
    text = page.norm_text()
    cards = [a for t, a in page.attrs if t == "article" and "card" in a.get("class", "")]
    assert len(cards) == len(seed["findings"])
    keys = {a.get("data-key") for a in cards}
    for f in seed["findings"]:
        assert f["rule"] in text and _norm(f["title"]) in text and _norm(f["explanation"]) in text
        assert f["cause"] in text and f["kind"] in text and f["rung"] in text and f["confidence"] in text
        for fix in f["fix"]:
            assert _norm(fix) in text, fix
        for ev in f["evidence"]:
            assert _norm(ev["text"]) in text and ev["source"] in text
            if ev["note"]:
                assert _norm(ev["note"]) in text
        for item in f["candidates"] + f["refs"]:
            assert _norm(item) in text, item
        for step in f["next_steps"]:
            assert _norm(step) in text, step
        if f["explained_by"]:
            assert f"Explained by {f['explained_by']}" in text
        assert f["key"] in keys
    assert any(a.get("data-severity") == "fail" for a in cards)


def test_explained_findings_fold_under_their_cause(seed_html):
    first = seed_html.index('data-rule="PT-QP-COUNT"')
    folded = seed_html.index('<details class="explained">', first)
    garbage = seed_html.index('data-rule="PT-GARBAGE-ROW"')
    assert first < folded < garbage


def test_evidence_excerpt_has_line_numbers_and_marks_the_match(seed_html):
    # the client's "Number of qps : 10" at line 5, with context lines 2..8, line 5 highlighted
    block = seed_html[seed_html.index("client: number of QPs = 10") - 2000:]
    block = block[block.index('<pre class="excerpt">'):]
    block = block[:block.index("</pre>")]
    numbers = [int(n) for n in re.findall(r'<span class="n">(\d+)</span>', block)]
    assert numbers == list(range(2, 9))
    assert re.search(r'<span class="row hit"><span class="n">5</span>.*<mark>Number of qps   : 10</mark>', block)
    assert 'href="#src1-L5"' in seed_html and 'id="src1-L5"' in seed_html


def test_comparison_table_highlights_mismatches(seed, seed_html):
    differs = [c for c in seed["comparisons"] if c["differs"]]
    assert differs
    rows = re.findall(r'<tr class="(differs)?" data-parameter="([^"]+)"', seed_html)
    flagged = {p for cls, p in rows if cls}
    assert flagged == {c["parameter"] for c in differs}
    assert len(rows) == len(seed["comparisons"])


def test_raw_logs_are_collapsible_with_every_line(seed, seed_html):
    for i, inp in enumerate(seed["inputs"]):
        assert f'<details class="raw" id="src{i}"' in seed_html
        for n in range(1, inp["lines"] + 1):
            assert f'id="src{i}-L{n}"' in seed_html
    assert seed_html.count('<details class="raw"') == len(seed["inputs"])


def test_derived_ladder_marks_the_failing_step(seed_html):
    assert 'data-rung="exchange" data-state="failed"' in seed_html
    assert 'data-rung="device" data-state="no-finding"' in seed_html


def test_fix_commands_get_copy_buttons(seed_html):
    assert 'data-copy="ib_write_bw --ib-dev=mlx5_1 --qp=10"' in seed_html


@pytest.mark.parametrize("text, codes", [
    ("Run both sides with the same --qp. On the server: ib_write_bw --ib-dev=mlx5_1 --qp=10",
     ["ib_write_bw --ib-dev=mlx5_1 --qp=10"]),
    ("Load the module: `modprobe rdma_ucm` (and check `ls -l /dev/infiniband/rdma_cm`).",
     ["modprobe rdma_ucm", "ls -l /dev/infiniband/rdma_cm"]),
    ("Or run both sides with another port: ib_write_bw -p 18516 (and the same -p on the client).",
     ["ib_write_bw -p 18516"]),
    ("Or run the client with --qp=1.", []),
    ("an `unpaired backtick", []),
])
def test_fix_segments(text, codes):
    segs = hr.fix_segments(text)
    assert [s["text"] for s in segs if s["kind"] == "code"] == codes
    assert "".join(s["text"] for s in segs).replace("`", "") == text.replace("`", "")


# -- hostile input -----------------------------------------------------------------------------------

def test_hostile_logs_render_as_text(tmp_path):
    doc = html_docs.explain_document(html_docs.hostile_logs(tmp_path))
    for redact in (False, True):
        out = hr.render(doc, redact=redact)
        page = Page(out)
        assert page.tags.count("script") == 1, "a log's <script> became an element"
        assert "img" not in page.tags, "a log's <img> became an element"
        assert not any(k.startswith("on") for _, a in page.attrs for k in a), "an event handler attribute"
        assert "<script>window.__pwned" not in out and "<img src=x" not in out
        assert html_docs.HOSTILE in page.text and html_docs.HOSTILE_ATTR in page.text
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in out


def test_hostile_strings_in_every_field_are_escaped(seed):
    doc = copy.deepcopy(seed)
    evil = '</script><script>alert(1)</script>"\'><svg onload=alert(1)>'

    def poison(value):
        if isinstance(value, str):
            return value + evil
        if isinstance(value, dict):
            return {k: poison(v) for k, v in value.items()}
        if isinstance(value, list):
            return [poison(v) for v in value]
        return value
    doc = poison(doc)
    doc["schema"] = "rdmadoctor/1"
    doc["facts"] = poison(json.loads(FACTS.read_text()))
    out = hr.render(doc)
    page = Page(out)
    assert page.tags.count("script") == 1
    assert page.tags.count("svg") == 0 or all(a.get("class") == "chart-svg" for t, a in page.attrs if t == "svg")
    assert not any(k.startswith("on") for _, a in page.attrs for k in a)
    assert "<svg onload" not in out


def test_chart_labels_are_escaped():
    out = str(svg.chart([{"label": '<script>x</script>"', "unit": "Gb/s",
                          "points": [{"size": 65536, "value": 10.0}]}], link_rate_gbps=25))
    assert "<script>" not in out and "&lt;script&gt;" in out


# -- redaction ---------------------------------------------------------------------------------------

def _redaction_doc(tmp_path):
    logs = html_docs.write_logs(tmp_path, {
        "server.log": (html_docs.SEED / "server.log").read_text()
        .replace("ib_write_bw --ib-dev=mlx5_1", "[alice@gpu-node-17.example.com ~]$ ib_write_bw --ib-dev=mlx5_1"),
        "client.log": (html_docs.SEED / "client.log").read_text()
        .replace("[root@node2 ~]#", "[root@gpu-node-18 ~]#")
        .replace("192.168.100.1 --qp=10",
                 "192.168.100.1 --qp=10\nnode GUID: 0x0002c90300a1b2c3  port GUID 0002:c903:00a1:b2c4")
        + " GID: fe80:0000:0000:0000:0202:c9ff:fe00:0001 and 00:00:00:00:00:00:00:00:00:00:255:255:192:168:100:01\n",
    })
    doc = html_docs.explain_document(logs)
    doc["facts"] = json.loads(FACTS.read_text())
    return doc


SECRETS = ["192.168.100.1", "192.168.100.2", "gpu-node-17", "gpu-node-18", "example.com", "0002c90300a1b2c3",
           "0002:c903:00a1:b2c4", "fe80::202:c9ff:fe00:1", "fe80:0000:0000:0000:0202", "192.0.2.1", "192.0.2.2",
           "coll-trixie-h1", "5054:00ff:fe00:0101", "52:54:00:00:01:01", "fe80::5054:ff:fe00:101",
           "255:255:192:168:100:01", "ffff:c0a8"]


def test_redaction_leaves_nothing_of_the_original(tmp_path):
    doc = _redaction_doc(tmp_path)
    plain = hr.render(doc)
    for secret in ("192.168.100.1", "gpu-node-17", "0002c90300a1b2c3", "coll-trixie-h1", "192.0.2.2"):
        assert secret in plain, secret          # the test's secrets are really in the unredacted report
    out = hr.render(doc, redact=True)
    low = out.lower()
    for secret in SECRETS:
        assert secret.lower() not in low, secret
    assert "redacted:" in out


def test_redaction_is_consistent_across_the_report(tmp_path):
    doc = _redaction_doc(tmp_path)
    r = Redactor()
    masked, counts = r.document(doc), r.summary()
    assert redact_document(doc) == (masked, counts)
    blob = json.dumps(masked)
    # the server's address: in the client's command line, in its GID (as ::ffff:...), in the comparisons
    token = r.tokens[("ip", "192.168.100.1")]
    assert token.startswith("ip-")
    client = next(run for run in masked["runs"] if run["side"] == "client")
    assert client["command"]["host"] == token
    assert token in client["command"]["text"]
    server = next(run for run in masked["runs"] if run["side"] == "server")
    assert server["addresses"][0]["gid"] == f"::ffff:{token}"
    # the decimal perftest GID and the canonical one become the same token
    client = next(i for i in masked["inputs"] if i["name"].endswith("client.log"))
    assert f"::ffff:{token}" in "\n".join(client["excerpt"])
    # the same GUID in two spellings, one token
    assert r.text("0x0002c90300a1b2c3") == r.text("0002:c903:00a1:b2c3") == r.tokens[("guid", "0002c90300a1b2c3")]
    # host names: the prompt's, everywhere
    host = r.hosts["gpu-node-17.example.com"]
    assert host.startswith("host-") and r.hosts["gpu-node-17"] == host
    assert blob.count(host) >= 1
    # distinct values, distinct tokens
    assert r.text("192.168.100.2") != token
    assert counts["ip"] >= 3 and counts["guid"] >= 2 and counts["host"] >= 2 and counts["ip6"] >= 1
    # rendering twice gives the same page (tokens are assigned in document order)
    assert hr.render(doc, redact=True) == hr.render(doc, redact=True)
    # and the excerpt's highlighted evidence still lines up after masking
    out = hr.render(doc, redact=True)
    assert "<mark>" in out


def test_redaction_keeps_what_identifies_nothing():
    r = Redactor()
    for keep in ("127.0.0.1", "0.0.0.0", "::1", "::", "00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00",
                 "localhost", "12:34:56", "4096[B]", "6.12.117+deb13-amd64", "ib_write_bw --qp=10",
                 "00:00:00:00:00:00"):
        assert r.text(keep) == keep, keep
    assert r.text("ip 10.0.0.1, again 10.0.0.1, then 10.0.0.2.") == "ip ip-1, again ip-1, then ip-2."
    assert r.text("connect to 10.0.0.1:18515 failed") == "connect to ip-1:18515 failed"
    assert r.text("GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:01") == "GID: ::ffff:ip-1"
    assert r.text("192.0.2.0/24") == "ip-3/24"


def test_redaction_does_not_touch_the_callers_document(seed):
    before = json.dumps(seed, sort_keys=True)
    hr.render(seed, redact=True)
    assert json.dumps(seed, sort_keys=True) == before


# -- charts ------------------------------------------------------------------------------------------

def test_chart_for_a_successful_run():
    doc = html_docs.explain_document([html_docs.REPO / "tests" / "data" / "healthy-write-bw.log"], link_rate=25.0)
    out = hr.render(doc)
    assert '<figure class="chart" data-kind="bw">' in out and 'class="chart-svg"' in out
    assert "link rate 25 Gb/s" in out
    # 14.45 MB/sec (2^20 bytes) = 0.121 Gb/s
    assert "0.121 Gb/s" in out


def test_chart_without_link_rate_says_so():
    doc = html_docs.explain_document([html_docs.REPO / "tests" / "data" / "healthy-write-bw.log"])
    out = hr.render(doc)
    assert 'class="chart-svg"' in out and "No link rate known" in out


def test_no_chart_for_failed_runs(seed_html):
    # the seed's server printed a garbage result row (a key record read as a size): no chart
    assert 'class="chart-svg"' not in seed_html and 'id="results"' not in seed_html


def test_line_chart_for_a_size_sweep():
    doc = html_docs.explain_document([html_docs.REPO / "tests" / "data" / "healthy-write-bw.log"], link_rate=25.0)
    run = doc["runs"][0]
    base = run["results"][0]
    run["results"] = [dict(base, size=2 ** k, values={"bw_peak": 100.0 * k, "bw_avg": 90.0 * k, "msg_rate": 1.0})
                      for k in range(1, 24)]
    out = hr.render(doc)
    assert "<polyline" in out and "against message size" in out and "8 MiB" in out


def test_latency_chart():
    doc = html_docs.seed_document()
    doc["runs"] = [{"source": "lat.log", "side": "client", "tool": "ib_send_lat", "messages": [],
                    "results": [{"line": 20, "kind": "lat", "size": 2, "iterations": 1000, "unit": "usec",
                                 "values": {"t_min": 1.1, "t_max": 9.0, "t_typical": 1.3, "t_avg": 1.4, "t_99": 2.0}}]}]
    out = hr.render(doc)
    assert '<figure class="chart" data-kind="lat">' in out and "usec" in out


def test_nice_ticks():
    assert svg.nice_ticks(100, 4) == [0, 25, 50, 75, 100]
    assert svg.nice_ticks(0.12, 5)[-1] >= 0.12


# -- facts (check) -----------------------------------------------------------------------------------

def test_facts_tables():
    doc = html_docs.check_document(FACTS)
    out = hr.render(doc)
    text = Page(out).norm_text()
    for tid in ("facts-sections", "facts-devices", "facts-ports", "facts-gids", "facts-netdevs", "facts-routes",
                "facts-peer", "facts-firewall", "facts-limits", "facts-listeners", "facts-modules",
                "facts-devnodes", "facts-kmsg", "facts-versions"):
        assert f'id="{tid}"' in out, tid
    assert "::ffff:192.0.2.1" in text and "RoCE v2" in text and "rxe0/1" in text
    assert re.search(r'<td class="bad"><div class="c">drop</div></td>', out)
    assert "8 MiB" in text and "56.1-1" in text
    assert '<details class="raw" id="raw-facts">' in out
    # the real ladder, with a skipped rung and why
    assert 'data-rung="connection" data-state="skipped"' in out and "skipped because" in text
    assert 'class="chart-svg"' not in out


def test_facts_with_unavailable_sections():
    doc = html_docs.check_document(html_docs.FIXTURES / "facts" / "lab" / "trixie" / "facts-nobody.json")
    out = hr.render(doc)
    assert "unavailable" in out and "needs CAP_NET_ADMIN" in out


# -- documents with parts missing --------------------------------------------------------------------

@pytest.mark.parametrize("doc", [
    {},
    {"schema": "rdmadoctor/1"},
    {"schema": "rdmadoctor/1", "verdict": {"status": "ok"}},
    {"schema": "rdmadoctor/1", "verdict": {"status": "nonsense", "cause": None}, "findings": [{}],
     "rungs": [{}], "comparisons": [{}], "runs": [{}], "inputs": [{}], "facts": {}, "notes": ["a note"]},
    {"schema": "rdmadoctor/1", "verdict": None, "findings": None, "runs": None, "inputs": None, "facts": None},
    {"findings": [{"rule": "X", "evidence": [{"text": "t", "line": "3"}, {}], "fix": [None], "explained_by": "Y"}],
     "runs": [{"results": [{"size": "big", "values": None}], "messages": [None], "header": {"a": "b"}}],
     "facts": {"sections": {"devices": {"status": "ok", "data": {"devices": [{"ports": [{"gids": [{}]}]}]}},
                            "firewall": {"status": "ok", "data": {"verdicts": [{}]}}, "weird": None}}},
])
def test_renders_documents_that_lack_optional_fields(doc):
    out = hr.render(doc)
    assert out.startswith("<!DOCTYPE html>") and "</html>" in out
    assert hr.render(doc, redact=True)


def test_without_raw_text_it_degrades(seed):
    doc = html_docs.seed_document(raw_text=False)
    out = hr.render(doc)
    assert "The raw text is not in this result" in out
    # the quoted line itself is still shown, highlighted, with its number
    assert re.search(r'<span class="row hit"><span class="n">5</span><mark>Number of qps   : 10</mark>', out)


def test_report_command_renders_a_saved_result(tmp_path, seed):
    from typer.testing import CliRunner
    from rdmadoctor.cli import app
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(seed))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(saved), "-o", str(out), "--redact"])
    assert result.exit_code == 2, result.output
    page = out.read_text()
    assert "192.168.100.1" not in page and "ip-1" in page


def test_templates_ship_inside_the_package():
    root = Path(hr.__file__).parent / "templates"
    for name in ("report.html.j2", "macros.html.j2", "report.css", "report.js"):
        assert (root / name).is_file(), name


def test_matching_parameters_are_folded():
    healthy = html_docs.FIXTURES / "real" / "crater-memlock-fixed-healthy"
    doc = html_docs.explain_document(sorted(healthy.glob("*.log")))
    assert doc["comparisons"] and not any(c["differs"] for c in doc["comparisons"])
    out = hr.render(doc)
    assert '<details class="same"><summary>Show the' in out and "The parameters match" in out


def _fixture_documents():
    for case in sorted((html_docs.FIXTURES / "real").glob("*/")) + \
            sorted((html_docs.FIXTURES / "handwritten").glob("*/")):
        logs = sorted(case.glob("*.log"))
        if logs:
            yield pytest.param(("explain", logs), id=case.name)
    for facts in sorted((html_docs.FIXTURES / "facts" / "lab").glob("*/facts-*.json")):
        yield pytest.param(("check", facts), id=f"{facts.parent.name}-{facts.stem}")


@pytest.mark.parametrize("case", list(_fixture_documents()))
def test_every_fixture_renders(case):
    kind, what = case
    if kind == "explain":
        doc = html_docs.explain_document(what)
    else:
        doc = html_docs.check_document(what)
    plain = hr.render(doc)
    assert 'id="verdict"' in plain
    masked = hr.render(doc, redact=True)
    for ip in re.findall(r"\b(?:192\.0\.2|192\.168\.\d+|10\.\d+\.\d+)\.\d+\b", plain):
        assert ip not in masked, ip


def test_a_huge_log_stays_bounded(tmp_path):
    import time
    big = tmp_path / "big.log"
    body = (html_docs.SEED / "client.log").read_text()
    big.write_text(body + ("x" * 3000 + "\n") * 19000)
    doc = html_docs.explain_document([big])
    start = time.monotonic()
    out = hr.render(doc)
    assert time.monotonic() - start < 5
    shown = len(doc["inputs"][0]["excerpt"])         # the document's excerpt budget (render/json_out.py)
    assert 0 < shown <= hr.MAX_RAW_LINES
    assert f'id="src0-L{shown}"' in out and f'id="src0-L{shown + 1}"' not in out
    assert "Only the first" in out and "(line cut)" in out
    assert len(out) < 1_000_000


def test_check_result_from_the_engine():
    doc = html_docs.real_check_document(FACTS)
    out = hr.render(doc)
    text = Page(out).norm_text()
    assert _norm(doc["verdict"]["summary"]) in text
    for r in doc["rungs"]:
        assert f'data-rung="{r["name"]}" data-state="{r["state"]}"' in out
    assert out.count('<article class="card') == len(doc["findings"])


def test_the_report_speaks_the_documents_language():
    """A result written in Chinese (--lang zh) gets the report's headings and labels in Chinese; the rule ids,
    slugs and commands stay as they are."""
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_paths
    from rdmadoctor.render import json_out

    log = html_docs.FIXTURES / "lab" / "bookworm" / "qp-mismatch-server-10"
    paths = sorted(str(p) for p in log.glob("*.log"))
    assert paths, log
    zh_doc = json_out.to_dict(diagnose.explain(parse_paths(paths), lang="zh"))
    en_doc = json_out.to_dict(diagnose.explain(parse_paths(paths)))
    assert (zh_doc["lang"], en_doc["lang"]) == ("zh", "en")
    zh, en = Page(hr.render(zh_doc)), Page(hr.render(en_doc))
    assert ("html", {"lang": "zh", "class": "no-js"}) in zh.attrs
    assert ("html", {"lang": "en", "class": "no-js"}) in en.attrs
    for english, chinese in (("Findings", "发现"), ("Fix", "修复"), ("Evidence", "证据"), ("Raw logs", "原始日志")):
        assert english in en.text and chinese in zh.text, english
        assert f">{english}<" not in hr.render(zh_doc), english
    assert zh_doc["verdict"]["rule"] and zh_doc["verdict"]["rule"] in zh.text
    assert zh_doc["verdict"]["cause"] in zh.text
