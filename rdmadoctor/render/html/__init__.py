"""The HTML diagnosis report: one self-contained, offline file rendered from the JSON document alone.

    html = render(document, redact=False)      # document: rdmadoctor.render.json_out.to_dict(...)

Rendering reads nothing but `document` (a saved `--json` result renders the same as a live one) and
tolerates documents that lack optional parts (older results, hand-made ones): every field is read with
a default. Everything that came from a log or a host is untrusted and goes through jinja2's autoescaping;
the charts (svg.py) escape their labels. The page loads nothing: CSS and the copy button's script are
inline and allowed by their hashes in a Content-Security-Policy meta tag that forbids everything else.

The page is built in parts: text.py (fixes, evidence, raw text), findings.py (findings, ladder, comparisons),
runs.py (runs and charts), bench.py (a sweep), facts.py (one table or more per collector section).
"""
from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any, Dict, Optional

import jinja2
from markupsafe import Markup

from rdmadoctor.knowledge.phrases import LANGUAGES

from rdmadoctor.render.html.bench import bench_view
from rdmadoctor.render.html.facts import facts_view
from rdmadoctor.render.html.findings import comparisons_view, findings_view, ladder_view
from rdmadoctor.render.html.runs import charts_view, link_rate, runs_view
from rdmadoctor.render.html.text import MAX_RAW_LINES, Sources, fix_segments, raw_facts_view, raw_logs_view
from rdmadoctor.render.html.values import _d, _l, _s, _slug_label
from rdmadoctor.render.html.words import translator
from rdmadoctor.render.redact import redact_document

__all__ = ["render", "build_view", "fix_segments", "MAX_RAW_LINES"]

STATUS_LABELS = {"ok": "No problem found", "warning": "Warning", "failure": "Failure", "unknown": "Cause unknown"}


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
    lang = _language(doc)
    return env.get_template("report.html.j2").render(css=Markup(css), js=Markup(js), csp=csp, lang=lang,
                                                     tr=translator(lang), **view)


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = jinja2.Environment(loader=jinja2.PackageLoader("rdmadoctor.render.html", "templates"),
                                  autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  undefined=jinja2.ChainableUndefined)
    return _ENV


_ENV: Optional[jinja2.Environment] = None


def _asset(env: jinja2.Environment, name: str) -> str:
    assert env.loader is not None
    return env.loader.get_source(env, name)[0]


def _language(doc: Dict[str, Any]) -> str:
    lang = doc.get("lang")
    return lang if isinstance(lang, str) and lang in LANGUAGES else "en"


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


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
        "doc_title": f"rdmadoctor {command}: {translator(_language(doc))(STATUS_LABELS[status]).lower()}"
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
