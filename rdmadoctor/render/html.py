"""The HTML diagnosis report: one self-contained, offline file rendered from the JSON document alone.

    html = render(document, redact=False)      # document: rdmadoctor.render.json_out.to_dict(...)

Rendering reads nothing but `document` (a saved `--json` result renders the same as a live one) and
tolerates documents that lack optional parts (older results, hand-made ones): every field is read with
a default. Everything that came from a log or a host is untrusted and goes through jinja2's autoescaping;
the charts (svg.py) escape their labels. The page loads nothing: CSS and the copy button's script are
inline and allowed by their hashes in a Content-Security-Policy meta tag that forbids everything else.

Raw logs and evidence context come from two optional document fields (see docs/html-report.md):
`inputs[].excerpt` (the kept lines of each input, line 1 first) and `evidence[].context`
(`{"first": N, "lines": [...]}`, the lines around the quoted one). Without them the report shows the quoted
line alone and says that the raw text is not in the result.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import jinja2
from markupsafe import Markup

from rdmadoctor.knowledge.perftest import UNIT_TO_GBPS, is_real_row
from rdmadoctor.render import svg
from rdmadoctor.render.redact import redact_document

CONTEXT = 3                # lines shown before and after a quoted line
MAX_RAW_LINES = 5000       # lines of one input shown in the raw log section
MAX_LINE_CHARS = 2000      # characters of one line shown (the rest is cut, and says so)
MAX_RAW_FACTS = 400_000    # characters of the raw facts JSON shown

RUNG_ORDER = ("input", "device", "driver", "port", "address", "route", "firewall", "limits", "connection",
              "exchange", "resources", "transport", "performance")
STATUS_LABELS = {"ok": "No problem found", "warning": "Warning", "failure": "Failure", "unknown": "Cause unknown"}
STATE_LABELS = {"passed": "passed", "failed": "failed", "warning": "warning", "skipped": "skipped",
                "not-inspected": "not inspected", "no-finding": "no finding"}
SEVERITY_LABELS = {"fail": "Failure", "warn": "Warning", "info": "Info"}

_COMMAND_START = re.compile(
    r"^(?:sudo\s+)?(?:ib_\w+|ibv_\w+|rping|rdma|ip|nft|modprobe|ulimit|systemctl|ss|nc|firewall-cmd|show_gids|"
    r"ibstat|sminfo|ls|lsmod|rdmadoctor|apt|dnf|docker|kubectl|pkill|echo|sysctl|mlnx\w*|cma_roce_\w+)\b")


# -- entry point ---------------------------------------------------------------------------------------

def render(document: Dict[str, Any], redact: bool = False) -> str:
    doc = copy.deepcopy(document) if isinstance(document, dict) else {}
    redaction: Optional[Dict[str, int]] = None
    if redact:
        doc, redaction = redact_document(doc)
    env = _env()
    css = _asset(env, "report.css")
    js = _asset(env, "report.js")
    csp = ("default-src 'none'; "
           f"style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    view = build_view(doc)
    view["redaction"] = redaction
    return env.get_template("report.html.j2").render(css=Markup(css), js=Markup(js), csp=csp, **view)


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(loader=jinja2.PackageLoader("rdmadoctor.render", "templates"),
                                  autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  undefined=jinja2.ChainableUndefined)
    return _ENV


_ENV: Optional[jinja2.Environment] = None


def _asset(env: jinja2.Environment, name: str) -> str:
    assert env.loader is not None
    return env.loader.get_source(env, name)[0]


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


# -- small readers -------------------------------------------------------------------------------------

def _d(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_s(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _slug_label(slug: Any) -> str:
    if not slug or slug == "unknown":
        return ""
    return str(slug).replace("-", " ").replace("_", " ")


def _anchor(*parts: Any) -> str:
    text = "-".join(str(p) for p in parts if p is not None)
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower() or "x"


def human_bytes(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return _s(value)
    if value < 0 or value >= 1 << 62:
        return "unlimited"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor:
            v = value / factor
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{value:.0f} B"


# -- fix text: prose with commands ---------------------------------------------------------------------

def fix_segments(text: Any) -> List[Dict[str, str]]:
    """'Run X: `cmd a` or b: ib_write_bw -q 2' -> text / code segments; code gets a copy button."""
    text = _s(text)
    segments: List[Dict[str, str]] = []
    parts = text.split("`")
    if len(parts) % 2 == 0:            # an unpaired backtick: take it literally
        parts = [text]
    for i, part in enumerate(parts):
        if not part:
            continue
        if i % 2 == 1:
            segments.append({"kind": "code", "text": part})
            continue
        starts = [0] + [m.end() for m in re.finditer(r":\s+", part)]
        at = next((i for i in starts if _COMMAND_START.match(part[i:])), None)
        if at is not None:
            tail = part[at:]
            head = part[:at]
            rest = ""
            cut = re.search(r"\s+\((?=[a-z])", tail)
            if cut:
                tail, rest = tail[:cut.start()], tail[cut.start():]
            else:
                stripped = tail.rstrip(".")
                rest = tail[len(stripped):]
                tail = stripped
            if head:
                segments.append({"kind": "text", "text": head})
            segments.append({"kind": "code", "text": tail})
            if rest:
                segments.append({"kind": "text", "text": rest})
        else:
            segments.append({"kind": "text", "text": part})
    return segments


# -- evidence and excerpts -----------------------------------------------------------------------------

def _mark(line: str, needle: str) -> List[Tuple[str, bool]]:
    """Split `line` into (text, matched) pieces around `needle` (whitespace-tolerant)."""
    needle = (needle or "").strip()
    if not needle:
        return [(line, False)]
    at = line.find(needle)
    if at >= 0:
        return [(line[:at], False), (needle, True), (line[at + len(needle):], False)]
    words = needle.split()
    if words:
        pattern = r"\s+".join(re.escape(w) for w in words)
        m = re.search(pattern, line)
        if m:
            return [(line[:m.start()], False), (m.group(0), True), (line[m.end():], False)]
    return [(line, True)]


def _cut(line: str) -> Tuple[str, bool]:
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS], True
    return line, False


class Sources:
    """The raw text the document carries: per input, its kept lines (when the document has them)."""

    def __init__(self, inputs: Sequence[Dict[str, Any]]):
        self.index: Dict[str, int] = {}
        self.lines: Dict[str, List[str]] = {}
        for i, inp in enumerate(inputs):
            name = _s(inp.get("name"))
            self.index.setdefault(name, i)
            excerpt = inp.get("excerpt")
            if isinstance(excerpt, list):
                self.lines[name] = [_s(x) for x in excerpt]

    def anchor(self, source: str, line: Optional[int]) -> Optional[str]:
        i = self.index.get(source)
        if i is None or not isinstance(line, int):
            return None
        kept = self.lines.get(source)
        if kept is None or line > min(len(kept), MAX_RAW_LINES):
            return None
        return f"src{i}-L{line}"

    def context(self, evidence: Dict[str, Any]) -> List[Dict[str, Any]]:
        """The excerpt rows around one quoted line: [{n, pieces, hit}]; [] when there is no log line."""
        line = evidence.get("line")
        text = _s(evidence.get("text"))
        if not isinstance(line, int) or isinstance(line, bool):
            return []
        ctx = _d(evidence.get("context"))
        first, lines = ctx.get("first"), ctx.get("lines")
        if not (isinstance(first, int) and isinstance(lines, list)):
            kept = self.lines.get(_s(evidence.get("source")))
            if kept is not None and 1 <= line <= len(kept):
                first = max(1, line - CONTEXT)
                lines = kept[first - 1:min(len(kept), line + CONTEXT)]
            else:
                first, lines = line, [text]
        rows = []
        for k, raw in enumerate(lines):
            n = first + k
            shown, cut = _cut(_s(raw))
            hit = n == line
            rows.append({"n": n, "hit": hit, "cut": cut,
                         "pieces": _mark(shown, text) if hit else [(shown, False)]})
        if not any(r["hit"] for r in rows):       # the context did not reach the quoted line
            rows = [{"n": line, "hit": True, "cut": False, "pieces": [(text, True)]}]
        return rows


def evidence_view(ev: Any, sources: Sources) -> Dict[str, Any]:
    ev = _d(ev)
    source = _s(ev.get("source"))
    line = ev.get("line") if isinstance(ev.get("line"), int) else None
    rows = sources.context(ev)
    return {"source": source, "line": line, "text": _s(ev.get("text")), "note": _s(ev.get("note")),
            "rows": rows, "anchor": sources.anchor(source, line),
            "is_fact": not rows}


# -- findings ------------------------------------------------------------------------------------------

def finding_view(f: Dict[str, Any], sources: Sources, n: int) -> Dict[str, Any]:
    severity = _s(f.get("severity")) or "info"
    return {
        "id": _anchor("finding", n, f.get("rule")),
        "rule": _s(f.get("rule")),
        "cause": _s(f.get("cause")),
        "cause_label": _slug_label(f.get("cause")),
        "severity": severity if severity in SEVERITY_LABELS else "info",
        "severity_label": SEVERITY_LABELS.get(severity, severity.capitalize()),
        "title": _s(f.get("title")) or _s(f.get("rule")) or "Finding",
        "explanation": _s(f.get("explanation")),
        "evidence": [evidence_view(e, sources) for e in _l(f.get("evidence"))],
        "fix": [fix_segments(x) for x in _l(f.get("fix"))],
        "confidence": _s(f.get("confidence")),
        "kind": _s(f.get("kind")),
        "candidates": [_s(c) for c in _l(f.get("candidates"))],
        "next_steps": [fix_segments(x) for x in _l(f.get("next_steps"))],
        "refs": [_s(r) for r in _l(f.get("refs"))],
        "rung": _s(f.get("rung")),
        "explained_by": _s(f.get("explained_by")),
        "key": _s(f.get("key")),
        "explained": [],
    }


def findings_view(findings: Sequence[Any], sources: Sources) -> List[Dict[str, Any]]:
    """Primary cards, each with the findings it explains folded under it."""
    cards = [finding_view(_d(f), sources, i) for i, f in enumerate(findings)]
    by_rule: Dict[str, Dict[str, Any]] = {}
    for card in cards:
        if not card["explained_by"]:
            by_rule.setdefault(card["rule"], card)
    top = []
    for card in cards:
        parent = by_rule.get(card["explained_by"]) if card["explained_by"] else None
        if parent is not None and parent is not card:
            parent["explained"].append(card)
        else:
            top.append(card)
    return top


# -- the ladder ----------------------------------------------------------------------------------------

def ladder_view(rungs: Sequence[Any], findings: Sequence[Any], sources: Sources) -> Tuple[List[Dict[str, Any]], bool]:
    """The document's rungs; without any, a ladder read off the findings' rungs (marked as derived)."""
    out = []
    for r in rungs:
        r = _d(r)
        state = _s(r.get("state")) or "not-inspected"
        detail = _s(r.get("detail"))
        evidence = [e for e in _l(r.get("evidence"))      # a fact that only repeats the detail says nothing new
                    if not (isinstance(e, dict) and e.get("line") is None and _s(e.get("text")).strip() == detail.strip())]
        out.append({"name": _s(r.get("name")), "title": _s(r.get("title")) or _s(r.get("name")).capitalize(),
                    "state": state, "state_label": STATE_LABELS.get(state, state), "detail": _s(r.get("detail")),
                    "blocked_by": _s(r.get("blocked_by")),
                    "seconds": r.get("seconds") if isinstance(r.get("seconds"), (int, float)) else None,
                    "evidence": [evidence_view(e, sources) for e in evidence]})
    if out:
        return out, False
    worst: Dict[str, Tuple[str, List[str]]] = {}
    for f in findings:
        f = _d(f)
        rung = _s(f.get("rung"))
        if not rung or f.get("explained_by"):
            continue
        state = {"fail": "failed", "warn": "warning"}.get(_s(f.get("severity")))
        if state is None:
            continue
        prev = worst.get(rung)
        titles = (prev[1] if prev else []) + [_s(f.get("title"))]
        worst[rung] = ("failed" if state == "failed" or (prev and prev[0] == "failed") else state, titles)
    if not worst:
        return [], True
    names = list(RUNG_ORDER) + sorted(set(worst) - set(RUNG_ORDER))
    for name in names:
        state, titles = worst.get(name, ("no-finding", []))
        out.append({"name": name, "title": name.capitalize(), "state": state,
                    "state_label": STATE_LABELS[state], "detail": "; ".join(titles), "blocked_by": "",
                    "seconds": None, "evidence": []})
    return out, True


# -- server vs client ----------------------------------------------------------------------------------

def comparisons_view(rows: Sequence[Any]) -> List[Dict[str, Any]]:
    groups: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        row = _d(row)
        pair = _s(row.get("pair"))
        g = groups.setdefault(pair, {"pair": pair, "rows": [], "differs": 0})
        server, client = pair.split(" / ", 1) if " / " in pair else (pair, "")
        g["server"], g["client"] = server, client
        differs = bool(row.get("differs"))
        g["differs"] += differs
        g["rows"].append({"label": _s(row.get("label")) or _s(row.get("parameter")),
                          "parameter": _s(row.get("parameter")),
                          "server": _s(row.get("server")) if row.get("server") is not None else "—",
                          "client": _s(row.get("client")) if row.get("client") is not None else "—",
                          "server_source": _s(row.get("server_source")),
                          "client_source": _s(row.get("client_source")), "differs": differs})
    for g in groups.values():      # mismatches first, then the document's order
        g["rows"].sort(key=lambda r: not r["differs"])
    return list(groups.values())


# -- runs and charts -----------------------------------------------------------------------------------

def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def run_ok(run: Dict[str, Any]) -> bool:
    """A run that printed results and no error message."""
    return bool(_l(run.get("results"))) and not any(_d(m).get("kind") == "error" for m in _l(run.get("messages")))


def sane_rows(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = []
    for row in _l(run.get("results")):
        row = _d(row)
        if is_real_row(row.get("size"), row.get("iterations")):
            rows.append(row)
    return rows


def _point(row: Dict[str, Any]) -> Optional[Tuple[str, str, Dict[str, Any]]]:
    """(kind, unit, point) for one result row, or None when it has no plottable value."""
    values = _d(row.get("values"))
    unit = _s(row.get("unit"))
    kind = _s(row.get("kind"))
    if kind == "bw":
        avg, peak = _num(values.get("bw_avg")), _num(values.get("bw_peak"))
        if avg is None or avg <= 0:
            return None
        factor = UNIT_TO_GBPS.get(unit)
        if factor is not None:
            avg, peak, unit = avg * factor, (peak * factor if peak is not None else None), "Gb/s"
        return "bw", unit or "?", {"size": row["size"], "value": avg, "high": peak, "high_label": "peak"}
    if kind in ("lat", "lat_dur"):
        typical = _num(values.get("t_typical"))
        if typical is None:
            typical = _num(values.get("t_avg"))
        if typical is None or typical <= 0:
            return None
        p99 = _num(values.get("t_99"))
        return "lat", unit or "usec", {"size": row["size"], "value": typical, "low": _num(values.get("t_min")),
                                       "low_label": "min", "high": p99, "high_label": "99%"}
    return None


def _run_label(run: Dict[str, Any], names: Dict[str, int]) -> str:
    side = _s(run.get("side"))
    tool = _s(run.get("tool")) or _s(_d(run.get("test_name")).get("value")) or "perftest"
    label = f"{side} · {tool}" if side and side != "unknown" else tool
    source = _s(run.get("source"))
    if names.get(label, 0) > 1 and source:
        label += f" ({source.rsplit('/', 1)[-1]})"
    return label


def link_rate(doc: Dict[str, Any]) -> Optional[float]:
    """The link rate to draw against: the one the diagnosis judged results by (--link-rate or the facts)."""
    for key in ("link_rate_gbps", "link_rate"):
        value = _num(doc.get(key))
        if value and value > 0:
            return value
    return None


def charts_view(runs: Sequence[Any], rate: Optional[float]) -> List[Dict[str, Any]]:
    ok = [_d(r) for r in runs if run_ok(_d(r))]
    labels = [_run_label(r, {}) for r in ok]
    counts: Dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for run in ok:
        per: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for row in sane_rows(run):
            got = _point(row)
            if got:
                per.setdefault((got[0], got[1]), []).append(got[2])
        for key, points in per.items():
            groups.setdefault(key, []).append({"label": _run_label(run, counts), "unit": key[1], "points": points})
    charts = []
    for (kind, unit), series in groups.items():
        title = ("Bandwidth" if kind == "bw" else "Latency") + f" ({unit})"
        chart = svg.chart(series, kind=kind, link_rate_gbps=rate, title=title)
        if chart:
            charts.append({"kind": kind, "unit": unit, "title": title, "svg": chart})
    return charts


def bench_view(bench: Any, rate: Optional[float]) -> Optional[Dict[str, Any]]:
    """bench's sweep: bandwidth and message rate against size, one line per QP count, the best combination
    marked, failed combinations with the cause their own logs gave."""
    bench = _d(bench)
    rows = [_d(r) for r in _l(bench.get("results"))]
    if not rows:
        return None
    best = _s(bench.get("best"))
    charts = []
    for metric, title, unit in (("bw_avg_gbps", "Bandwidth", "Gb/s"), ("msg_rate_mpps", "Message rate", "Mpps"),
                                ("lat_typical_us", "Latency", "usec")):
        series: Dict[str, List[Dict[str, Any]]] = {}
        for r in rows:
            value = _num(r.get(metric))
            if r.get("status") == "ok" and value is not None and value > 0 and isinstance(r.get("size"), int):
                series.setdefault(f"{_s(r.get('tool'))} qp={r.get('qp')}", []).append(
                    {"size": r["size"], "value": value})
        if series:
            kind = "bw" if metric == "bw_avg_gbps" else ("lat" if metric == "lat_typical_us" else "rate")
            chart = svg.chart([{"label": k, "unit": unit, "points": v} for k, v in series.items()], kind=kind,
                              link_rate_gbps=rate if kind == "bw" else None, title=f"{title} ({unit})")
            if chart:
                charts.append({"kind": kind, "unit": unit, "title": f"{title} against message size, one line per QP "
                                                                    f"count ({unit})", "svg": chart})
    table = []
    for r in rows:
        label = f"{_s(r.get('tool'))} qp={r.get('qp')}" + (f" size={r.get('size')}" if r.get("size") else "")
        verdict = _d(r.get("verdict"))
        table.append({"label": label, "best": label == best, "status": _s(r.get("status")),
                      "bw": _num(r.get("bw_avg_gbps")), "rate": _num(r.get("msg_rate_mpps")),
                      "lat": _num(r.get("lat_typical_us")), "seconds": _num(r.get("seconds")),
                      "cause": _s(verdict.get("cause")), "summary": _s(verdict.get("summary"))})
    return {"peer": _s(bench.get("peer")), "best": best, "charts": charts, "rows": table,
            "failed": sum(1 for r in table if r["status"] != "ok"), "interrupted": bool(bench.get("interrupted"))}


def runs_view(runs: Sequence[Any], sources: Sources) -> List[Dict[str, Any]]:
    out = []
    for i, run in enumerate(runs):
        run = _d(run)
        header = _d(run.get("header"))
        command = _d(run.get("command"))
        errors = [m for m in (_d(x) for x in _l(run.get("messages"))) if m.get("kind") == "error"]
        rows = []
        for row in _l(run.get("results")):
            row = _d(row)
            values = _d(row.get("values"))
            sane = is_real_row(row.get("size"), row.get("iterations"))
            rows.append({"line": row.get("line"), "kind": _s(row.get("kind")), "size": row.get("size"),
                         "size_label": svg.human_size(row["size"]) if sane else _s(row.get("size")),
                         "iterations": _s(row.get("iterations")), "unit": _s(row.get("unit")),
                         "fields": [(k, _s(v)) for k, v in values.items()],
                         "sane": sane})
        out.append({
            "id": _anchor("run", i), "source": _s(run.get("source")), "side": _s(run.get("side")) or "unknown",
            "side_reason": _s(run.get("side_reason")), "tool": _s(run.get("tool")),
            "test": _s(_d(run.get("test_name")).get("value")),
            "device": _s(_d(header.get("device")).get("value")),
            "command": _s(command.get("text")), "command_line": command.get("line"),
            "lines": f"{run.get('first_line')}–{run.get('last_line')}" if run.get("first_line") else "",
            "label": _s(run.get("label")),
            "header": [(k.replace("_", " "), _s(_d(v).get("value")) if isinstance(v, dict) else _s(v))
                       for k, v in header.items()],
            "addresses": [_d(a) for a in _l(run.get("addresses"))],
            "results": rows, "errors": len(errors),
            "messages": [{"id": _s(m.get("id")), "kind": _s(m.get("kind")), "text": _s(m.get("text")),
                          "line": m.get("line"), "anchor": sources.anchor(_s(m.get("source")) or _s(run.get("source")),
                                                                           m.get("line"))}
                         for m in (_d(x) for x in _l(run.get("messages")))],
            "ok": run_ok(run),
        })
    return out


# -- facts ---------------------------------------------------------------------------------------------

def _cell(text: Any, cls: str = "") -> Dict[str, str]:
    return {"text": _s(text), "cls": cls}


def _state_cls(value: Any, good: Iterable[str], bad: Iterable[str] = ()) -> str:
    v = _s(value).upper()
    if v in {g.upper() for g in good}:
        return "good"
    if v in {b.upper() for b in bad} or (bad == () and v):
        return "bad"
    return ""


def _table(tid: str, title: str, columns: Sequence[str], rows: List[List[Any]], note: str = "") -> Dict[str, Any]:
    return {"id": tid, "title": title, "columns": list(columns),
            "rows": [[c if isinstance(c, dict) else _cell(c) for c in row] for row in rows], "note": note}


def facts_view(facts: Any) -> Optional[Dict[str, Any]]:
    facts = _d(facts)
    if not facts:
        return None
    host = _d(facts.get("host"))
    sections = _d(facts.get("sections"))

    def data(name: str) -> Dict[str, Any]:
        return _d(_d(sections.get(name)).get("data"))

    status_rows = []
    for name, sec in sections.items():
        sec = _d(sec)
        status = _s(sec.get("status")) or "?"
        why = [_s(sec.get("reason"))] if sec.get("reason") else []
        why += [f"{_s(_d(u).get('what'))}: {_s(_d(u).get('why'))}" for u in _l(sec.get("unreadable"))]
        status_rows.append([name, _cell(status, {"ok": "good", "partial": "warn", "unavailable": "bad"}.get(status, "")),
                            _s(sec.get("source")), "" if sec.get("seconds") is None else f"{_s(sec.get('seconds'))} s",
                            "; ".join(w for w in why if w)])
    tables: List[Dict[str, Any]] = [_table("facts-sections", "What was read", ["section", "status", "source", "time",
                                                                              "why not all"], status_rows)]

    devs = [_d(d) for d in _l(data("devices").get("devices"))]
    if devs:
        tables.append(_table("facts-devices", "RDMA devices",
                             ["device", "driver", "transport", "node GUID", "firmware", "netdevs", "ports", "source"],
                             [[d.get("name"), d.get("driver"), d.get("transport"), d.get("node_guid"), d.get("fw_ver"),
                               _s(d.get("netdevs")), len(_l(d.get("ports"))), d.get("source")] for d in devs]))
        port_rows, gid_rows = [], []
        for d in devs:
            for p in (_d(x) for x in _l(d.get("ports"))):
                mtu = _s(p.get("active_mtu"))
                if p.get("max_mtu") is not None:
                    mtu += f" / {_s(p.get('max_mtu'))}"
                netdev = _s(p.get("netdev"))
                if p.get("netdev_mtu") is not None:
                    netdev += f" (MTU {_s(p.get('netdev_mtu'))})"
                port_rows.append([f"{_s(d.get('name'))}/{_s(p.get('port'))}",
                                  _cell(p.get("state"), _state_cls(p.get("state"), ["ACTIVE"])),
                                  _cell(p.get("phys_state"), _state_cls(p.get("phys_state"), ["LinkUp"])),
                                  p.get("link_layer"), p.get("rate"), mtu, netdev,
                                  f"{_s(p.get('lid'))} / {_s(p.get('sm_lid'))}" if p.get("lid") is not None else ""])
                for g in (_d(x) for x in _l(p.get("gids"))):
                    gid_rows.append([f"{_s(d.get('name'))}/{_s(p.get('port'))}", g.get("index"), g.get("gid"),
                                     g.get("type"), g.get("netdev"), g.get("ipv4")])
        if port_rows:
            tables.append(_table("facts-ports", "Ports", ["port", "state", "physical", "link layer", "rate",
                                                          "MTU active / max", "netdev", "LID / SM LID"], port_rows))
        if gid_rows:
            tables.append(_table("facts-gids", "GIDs", ["port", "index", "GID", "type", "netdev", "IPv4"], gid_rows))

    net = data("netlink")
    links = [_d(x) for x in _l(net.get("links"))]
    if links:
        addrs: Dict[str, List[str]] = {}
        for a in (_d(x) for x in _l(net.get("addresses"))):
            addrs.setdefault(_s(a.get("ifname")), []).append(
                f"{_s(a.get('address'))}/{_s(a.get('prefixlen'))}" if a.get("prefixlen") is not None else _s(a.get("address")))
        tables.append(_table("facts-netdevs", "Network interfaces",
                             ["netdev", "state", "carrier", "MTU", "kind", "master", "MAC", "addresses"],
                             [[x.get("ifname"), _cell(x.get("operstate"), _state_cls(x.get("operstate"), ["UP", "UNKNOWN"])),
                               x.get("carrier"), x.get("mtu"), x.get("kind"), x.get("master"), x.get("address"),
                               ", ".join(addrs.get(_s(x.get("ifname")), []))] for x in links]))
    routes = [_d(x) for x in _l(net.get("routes"))]
    if routes:
        tables.append(_table("facts-routes", "Routes", ["destination", "gateway", "dev", "source", "type", "proto",
                                                        "metric"],
                             [[r.get("dst") or "default", r.get("gateway"), r.get("ifname"), r.get("prefsrc"),
                               r.get("type"), r.get("proto"), r.get("metric")] for r in routes]))
    peer = _d(net.get("peer"))
    if peer:
        route, neigh = _d(peer.get("route")), _d(peer.get("neighbour"))
        tables.append(_table("facts-peer", "Path to the peer", ["peer", "leaves through", "source address", "gateway",
                                                               "neighbour", "error"],
                             [[peer.get("address"), route.get("ifname"), route.get("src"), route.get("gateway"),
                               _cell(neigh.get("state"), _state_cls(neigh.get("state"), ["reachable", "permanent",
                                                                                         "stale", "delay"], ())
                                     if neigh.get("state") else ""),
                               _cell(route.get("error"), "bad" if route.get("error") else "")]]))

    fw = data("firewall")
    if fw:
        verdicts = [_d(v) for v in _l(fw.get("verdicts"))]
        note = f"backend: {_s(fw.get('backend')) or 'none'}"
        if fw.get("tables"):
            note += f"; tables: {_s(fw.get('tables'))}"
        if fw.get("rules_seen") is not None:
            note += f"; {_s(fw.get('rules_seen'))} rule(s) read"
        tables.append(_table("facts-firewall", "Firewall verdicts", ["traffic", "from", "purpose", "verdict", "why"],
                             [[f"{_s(v.get('proto'))}/{_s(v.get('port'))}", v.get("src") or "any", v.get("purpose"),
                               _cell(v.get("verdict"), {"accept": "good", "drop": "bad", "reject": "bad"}
                                     .get(_s(v.get("verdict")), "warn")), v.get("why") or v.get("rule")]
                              for v in verdicts], note))

    lim = data("limits")
    if lim:
        rows = []
        memlock = _d(lim.get("memlock"))
        if memlock:
            rows.append(["locked memory (memlock)", f"soft {human_bytes(memlock.get('soft'))}, hard "
                                                    f"{human_bytes(memlock.get('hard'))}"])
        for key in ("cap_ipc_lock", "cap_net_admin", "cap_syslog"):
            if key in lim:
                rows.append([key.upper().replace("CAP_", "CAP_"), lim.get(key)])
        if lim.get("systemd_default_memlock") is not None:
            rows.append(["systemd DefaultLimitMEMLOCK", lim.get("systemd_default_memlock")])
        for entry in _l(lim.get("limits_conf")):
            rows.append(["limits.conf", _s(entry)])
        tables.append(_table("facts-limits", "Limits", ["limit", "value"], rows))

    ports = data("ports")
    if ports:
        rows = [[f"tcp {_s(t.get('ip'))}:{_s(t.get('port'))}", t.get("process"), t.get("pid"), t.get("user"),
                 " ".join(_s(a) for a in _l(t.get("cmdline")))] for t in (_d(x) for x in _l(ports.get("tcp_listeners")))]
        rows += [["rdma_cm id", _s(_d(c).get("process")), _s(_d(c).get("pid")), "", _s(c)]
                 for c in _l(ports.get("cm_ids"))]
        rows += [["uses RDMA", p.get("process"), p.get("pid"), p.get("user"),
                  " ".join(_s(a) for a in _l(p.get("cmdline")))] for p in (_d(x) for x in _l(ports.get("rdma_processes")))]
        tables.append(_table("facts-listeners", "Listeners and RDMA processes",
                             ["what", "process", "pid", "user", "command"], rows,
                             "; ".join(_s(n) for n in _l(ports.get("notes")))))

    kern = data("kernel")
    if kern:
        rows = [[name, _cell("loaded" if loaded else "not loaded", "good" if loaded else "")]
                for name, loaded in _d(kern.get("rdma_modules")).items()]
        tables.append(_table("facts-modules", "Kernel modules", ["module", "state"], rows,
                             f"kernel {_s(kern.get('release'))}" if kern.get("release") else ""))
        devnodes = [_d(x) for x in _l(kern.get("dev_infiniband"))]
        if devnodes:
            tables.append(_table("facts-devnodes", "/dev/infiniband", ["path", "mode", "readable", "writable"],
                                 [[x.get("path"), x.get("mode"),
                                   _cell(x.get("readable"), "" if x.get("readable") else "bad"),
                                   _cell(x.get("writable"), "" if x.get("writable") else "bad")] for x in devnodes]))
        log = _d(kern.get("log"))
        lines = [_d(x) for x in _l(log.get("lines"))]
        if lines:
            tables.append(_table("facts-kmsg", "Kernel log (RDMA lines)", ["time", "level", "message"],
                                 [[f"{x['ts']:.3f}" if isinstance(x.get("ts"), (int, float)) else x.get("ts"),
                                   _cell(x.get("level"), "bad" if x.get("level") in ("err", "crit", "alert", "emerg")
                                         else "warn" if x.get("level") == "warning" else ""), x.get("text")]
                                  for x in lines], f"from {_s(log.get('source'))}" if log.get("source") else ""))

    pci = data("pci")
    pdevs = [_d(x) for x in _l(pci.get("devices"))]
    if pdevs:
        rows = []
        for p in pdevs:
            speed = f"{_s(p.get('current_link_speed'))} (max {_s(p.get('max_link_speed'))})"
            width = f"x{_s(p.get('current_width'))} (max x{_s(p.get('max_width'))})"
            degraded = (p.get("current_gts") is not None and p.get("max_gts") is not None
                        and p.get("current_gts") < p.get("max_gts")) or (
                p.get("current_width") is not None and p.get("max_width") is not None
                and p.get("current_width") < p.get("max_width"))
            rows.append([p.get("device"), p.get("bdf"), _cell(speed, "bad" if degraded else ""),
                         _cell(width, "bad" if degraded else ""), p.get("numa_node")])
        tables.append(_table("facts-pci", "PCIe links", ["device", "address", "speed", "width", "NUMA node"], rows))

    ver = data("versions")
    if ver:
        rows = [[k.replace("_", " "), v] for k, v in ver.items() if not isinstance(v, dict)]
        rows += [[f"{k} (tool)", v] for k, v in _d(ver.get("tools")).items()]
        tables.append(_table("facts-versions", "Versions", ["component", "version"], rows))

    host_rows = [[k.replace("_", " "), _s(v)] for k, v in host.items() if v is not None and v != ""]
    return {"host": host_rows, "hostname": _s(host.get("hostname")), "tables": tables}


# -- raw text ------------------------------------------------------------------------------------------

def raw_logs_view(inputs: Sequence[Any], hits: Dict[str, set]) -> List[Dict[str, Any]]:
    out = []
    for i, inp in enumerate(inputs):
        inp = _d(inp)
        name = _s(inp.get("name"))
        excerpt = inp.get("excerpt")
        lines = None
        if isinstance(excerpt, list):
            lines = []
            for k, raw in enumerate(excerpt[:MAX_RAW_LINES]):
                shown, cut = _cut(_s(raw))
                lines.append({"n": k + 1, "text": shown, "cut": cut, "hit": (k + 1) in hits.get(name, set()),
                              "id": f"src{i}-L{k + 1}"})
        total = inp.get("lines")
        shown = len(lines) if lines is not None else 0
        out.append({"name": name, "id": f"src{i}", "lines": lines, "total": total,
                    "bytes": inp.get("bytes"), "decode_errors": inp.get("decode_errors") or 0,
                    "flattened": inp.get("flattened_lines") or 0,
                    "truncated": bool(inp.get("truncated")) or (isinstance(total, int) and lines is not None
                                                                and total > shown)})
    return out


def raw_facts_view(facts: Any) -> Optional[Dict[str, Any]]:
    if not facts:
        return None
    text = json.dumps(facts, indent=2, sort_keys=False, default=str)
    cut = len(text) > MAX_RAW_FACTS
    return {"text": text[:MAX_RAW_FACTS], "cut": cut, "size": len(text)}


# -- the whole page ------------------------------------------------------------------------------------

def build_view(doc: Dict[str, Any]) -> Dict[str, Any]:
    verdict = _d(doc.get("verdict"))
    status = _s(verdict.get("status")) or "unknown"
    if status not in STATUS_LABELS:
        status = "unknown"
    inputs = [_d(x) for x in _l(doc.get("inputs"))]
    sources = Sources(inputs)
    findings = _l(doc.get("findings"))
    cards = findings_view(findings, sources)
    hits: Dict[str, set] = {}
    for f in findings:
        for e in _l(_d(f).get("evidence")):
            e = _d(e)
            if isinstance(e.get("line"), int):
                hits.setdefault(_s(e.get("source")), set()).add(e["line"])
    ladder, derived = ladder_view(_l(doc.get("rungs")), findings, sources)
    runs = _l(doc.get("runs"))
    rate = link_rate(doc)
    facts = facts_view(doc.get("facts"))
    command = _s(doc.get("command")) or "rdmadoctor"
    counts = {"fail": 0, "warn": 0, "info": 0}
    for f in findings:
        sev = _s(_d(f).get("severity"))
        if sev in counts:
            counts[sev] += 1
    subject = ", ".join(i["name"].rsplit("/", 1)[-1] for i in inputs if i.get("name"))
    if facts and facts["hostname"]:
        subject = facts["hostname"] + (f" · {subject}" if subject else "")
    return {
        "doc_title": f"rdmadoctor {command}: {STATUS_LABELS[status].lower()}"
                     + (f" ({_slug_label(verdict.get('cause'))})" if _slug_label(verdict.get("cause")) else ""),
        "command": command,
        "version": _s(doc.get("rdmadoctor")),
        "schema": _s(doc.get("schema")),
        "subject": subject,
        "verdict": {
            "status": status, "status_label": STATUS_LABELS[status],
            "cause": _s(verdict.get("cause")), "cause_label": _slug_label(verdict.get("cause")),
            "rule": _s(verdict.get("rule")), "summary": _s(verdict.get("summary")),
            "confidence": _s(verdict.get("confidence")),
            "fix": fix_segments(verdict.get("fix")) if verdict.get("fix") else [],
            "candidates": [_s(c) for c in _l(verdict.get("candidates"))],
            "next_steps": [fix_segments(x) for x in _l(verdict.get("next_steps"))],
            "anchor": next((c["id"] for c in cards if c["rule"] and c["rule"] == _s(verdict.get("rule"))), ""),
        },
        "counts": counts,
        "ladder": ladder, "ladder_derived": derived,
        "findings": cards, "findings_total": len(findings),
        "comparisons": comparisons_view(_l(doc.get("comparisons"))),
        "runs": runs_view(runs, sources),
        "charts": charts_view(runs, rate),
        "bench": bench_view(doc.get("bench"), rate),
        "link_rate": rate,
        "facts": facts,
        "raw_logs": raw_logs_view(inputs, hits),
        "has_excerpts": any(isinstance(i.get("excerpt"), list) for i in inputs),
        "raw_facts": raw_facts_view(doc.get("facts")),
        "notes": [_s(n) for n in _l(doc.get("notes"))],
    }
