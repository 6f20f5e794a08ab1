"""The fleet overview as one self-contained HTML file, for a handful of nodes or a thousand: the groups (folded
node sets), a heat map of causes (one cell per node, in node-name order, so a rack or a switch shows as a
block), the drift, every node in a table that searches and sorts, and for `fleet probe` the pair matrix
(client rows, agent columns) with the blame.

    html = render(fleet_document)

It builds on the single-host report (rdmadoctor/render): the same template engine settings (jinja2,
autoescaped: every value from a node is text, never markup), the same stylesheet and script (report.css and
report.js, read from rdmadoctor/render/html/templates, with the fleet's own fleet.css and fleet.js after them), the
same Content-Security-Policy (the inline style and script allowed by their hashes, nothing loaded).
"""
from __future__ import annotations

import base64
import hashlib
from typing import Any, Dict, List, Optional

import jinja2
from markupsafe import Markup

from rdmadoctor.fleet.nodes import STATE_LABELS
from rdmadoctor.fleet.nodeset import sort_key

STATUS_LABELS = {"ok": "No problem found", "warning": "Warning", "failure": "Failure", "unknown": "Not known"}
PALETTE = 12                     # cause colours (fleet.css .hc0 ... .hc11); more causes share them, in order
MATRIX_MAX_NODES = 400           # larger fleets get the pairs table, not an N x N matrix
COLUMNS = ("kernel", "firmware", "rdma_core", "perftest", "netdev_mtu", "memlock")
OUTCOME_LABELS = {"passed": "passed", "warning": "passed with a warning", "failed": "failed",
                  "incomplete": "incomplete (the agent did not serve every rung)", "not-run": "could not run"}

_ENV: Optional[jinja2.Environment] = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(
            loader=jinja2.ChoiceLoader([jinja2.PackageLoader("rdmadoctor.fleet", "templates"),
                                        jinja2.PackageLoader("rdmadoctor.render.html", "templates")]),
            autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined)
    return _ENV


def _asset(name: str) -> str:
    env = _env()
    assert env.loader is not None
    return env.loader.get_source(env, name)[0]


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def anchor(node: str) -> str:
    return "n-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in node)


def _cause_key(r: Dict[str, Any]) -> str:
    """The heat map's colour key: the cause for a node with a verdict, the state for one without."""
    if r.get("state") != "checked":
        return f"state:{r.get('state')}"
    if r.get("status") == "ok":
        return "ok"
    return r.get("cause") or "unknown"


def _group_key(g: Dict[str, Any]) -> str:
    if g.get("state") != "checked":
        return f"state:{g.get('state')}"
    return "ok" if g.get("status") == "ok" else (g.get("cause") or "unknown")


def heatmap(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    keys: Dict[str, int] = {}
    for r in records:
        k = _cause_key(r)
        keys[k] = keys.get(k, 0) + 1
    bad = sorted((k for k in keys if k != "ok" and not k.startswith("state:")), key=lambda k: (-keys[k], k))
    cls = {"ok": "hok"}
    for i, k in enumerate(bad):
        cls[k] = f"hc{i % PALETTE}"
    for k in keys:
        if k.startswith("state:"):
            cls[k] = "hna"
    order = bad + sorted(k for k in keys if k.startswith("state:")) + (["ok"] if "ok" in keys else [])
    legend = [{"key": k, "label": k[6:].replace("-", " ") if k.startswith("state:") else k, "cls": cls[k],
               "count": keys[k]} for k in order]
    cells = [{"node": r["node"], "id": anchor(r["node"]), "cls": cls[_cause_key(r)], "key": _cause_key(r),
              "status": r.get("status"),
              "title": f"{r['node']}: " + _s(r.get("cause") or r.get("status") if r.get("state") == "checked"
                                             else STATE_LABELS.get(_s(r.get("state")), r.get("state")))}
             for r in records]
    return {"cells": cells, "legend": legend, "class_of": cls}


def _node_rows(records: List[Dict[str, Any]], class_of: Dict[str, str]) -> List[Dict[str, Any]]:
    rows = []
    for r in records:
        a = r.get("attributes") or {}
        rows.append({
            "node": r["node"], "id": anchor(r["node"]),
            "status": r.get("status") or "unknown", "state": r.get("state"),
            "state_label": STATE_LABELS.get(_s(r.get("state")), r.get("state")),
            "cause": r.get("cause") or ("" if r.get("state") == "checked"
                                        else STATE_LABELS.get(_s(r.get("state")), "")),
            "cls": class_of.get(_cause_key(r), "hna"), "key": _cause_key(r), "summary": r.get("summary") or "",
            "fix": r.get("fix") or "",
            "rule": r.get("rule") or "", "seconds": r.get("seconds"),
            "attrs": [_s(a.get(k)) for k in COLUMNS],
            "problems": r.get("problems") or [], "findings": r.get("findings") or [],
            "address": r.get("address") or "",
        })
    return rows


def matrix(probe: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The N x N matrix of pairs (rows: the client, columns: the agent); the last probe of a pair wins a cell,
    retests are marked. None when there is no pair or more nodes than MATRIX_MAX_NODES."""
    pairs = probe.get("pairs") or []
    names = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs}, key=sort_key)
    if not names or len(names) > MATRIX_MAX_NODES:
        return None
    index = {n: i for i, n in enumerate(names)}
    cell = max(6, min(28, 640 // max(1, len(names))))
    cells = {}
    for p in pairs:
        cells[(p["a"], p["b"])] = p
    blamed_nodes = {n for b in probe.get("blame") or [] if b["kind"] in ("node", "both") for n in b["nodes"]}
    out = []
    for (a, b), p in cells.items():
        out.append({"x": index[b] * cell, "y": index[a] * cell, "outcome": p["outcome"],
                    "retest": p.get("purpose") == "isolate",
                    "title": f"{a} -> {b}: {OUTCOME_LABELS.get(p['outcome'], p['outcome'])}"
                             + (f", {p['cause']}" if p.get("cause") else "")
                             + (f" at {p['rung']}" if p.get("rung") else "")
                             + (" (isolation retest)" if p.get("purpose") == "isolate" else "")})
    labels = len(names) <= 64
    margin = 90 if labels else 4
    return {"names": [{"name": n, "pos": index[n] * cell + cell // 2, "blamed": n in blamed_nodes} for n in names],
            "cells": out, "cell": cell, "size": len(names) * cell, "labels": labels, "margin": margin,
            "width": len(names) * cell + margin + 4, "height": len(names) * cell + margin + 4}


def build_view(doc: Dict[str, Any]) -> Dict[str, Any]:
    records = sorted([r for r in doc.get("nodes") or [] if isinstance(r, dict) and r.get("node")],
                     key=lambda r: sort_key(r["node"]))
    heat = heatmap(records)
    status = str(doc.get("status")) if doc.get("status") in STATUS_LABELS else "unknown"
    s = doc.get("summary") or {}
    bad = [g for g in doc.get("groups") or [] if g.get("status") != "ok"]
    headline = (f"{s.get('nodes', 0)} nodes: " + ", ".join(f"{s.get(k)} {k}"
                                                           for k in ("failure", "warning", "unknown", "ok")
                                                           if s.get(k)))
    probe = doc.get("probe")
    if probe:
        plan_pairs = [p for p in probe.get("pairs") or [] if p.get("purpose") == "plan"]
        failed = sum(1 for p in plan_pairs if p.get("outcome") == "failed")
        blamed = "; ".join(f"{b['kind']} {' – '.join(b['nodes']) if b['kind'] == 'link' else ', '.join(b['nodes'])}"
                           for b in probe.get("blame") or [])
        headline = (f"{probe.get('members', 0)} nodes probed, {len(plan_pairs)} pairs: {failed} failed"
                    + (f"; blamed: {blamed}" if blamed else ""))
    view: Dict[str, Any] = {
        "doc": doc, "status": status, "status_label": STATUS_LABELS[status], "headline": headline,
        "title": f"rdmadoctor fleet {doc.get('command')}: {s.get('nodes', 0)} nodes, {STATUS_LABELS[status].lower()}",
        "groups": [{**g, "key": _group_key(g), "cls": heat["class_of"].get(_group_key(g), "hna")}
                   for g in doc.get("groups") or []],
        "bad_groups": len(bad), "heat": heat, "rows": _node_rows(records, heat["class_of"]),
        "columns": ["kernel", "firmware", "rdma-core", "perftest", "MTU", "memlock"],
        "drift": doc.get("drift") or [], "notes": doc.get("notes") or [],
        "probe": None,
    }
    if probe:
        pairs = probe.get("pairs") or []
        counts: Dict[str, int] = {}
        for p in pairs:
            if p.get("purpose") == "plan":
                counts[p["outcome"]] = counts.get(p["outcome"], 0) + 1
        shown = sorted(pairs, key=lambda p: (p["outcome"] in ("passed",), p.get("round") or 0, sort_key(p["a"])))
        view["probe"] = {"plan": probe.get("plan") or {}, "counts": counts, "blame": probe.get("blame") or [],
                         "excluded": probe.get("excluded") or [], "matrix": matrix(probe),
                         "pairs": shown[:5000], "pairs_total": len(pairs), "design": probe.get("design"),
                         "isolation_rounds": probe.get("isolation_rounds"), "outcome_labels": OUTCOME_LABELS}
    return view


def render(doc: Dict[str, Any]) -> str:
    env = _env()
    css = _asset("report.css") + "\n" + _asset("fleet.css")
    js = _asset("report.js") + "\n" + _asset("fleet.js")
    csp = (f"default-src 'none'; style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    return env.get_template("fleet.html.j2").render(css=Markup(css), js=Markup(js), csp=csp, **build_view(doc))
