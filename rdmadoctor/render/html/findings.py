"""Findings (each with the findings it explains folded under it), the ladder, and the server-against-client
comparison."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from rdmadoctor.model import RUNGS
from rdmadoctor.render.html.text import Sources, evidence_view, fix_segments
from rdmadoctor.render.html.values import _anchor, _d, _l, _s, _slug_label

STATE_LABELS = {"passed": "passed", "failed": "failed", "warning": "warning", "skipped": "skipped",
                "not-inspected": "not inspected", "no-finding": "no finding"}
SEVERITY_LABELS = {"fail": "Failure", "warn": "Warning", "info": "Info"}


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
    out = [_rung(_d(r), sources) for r in rungs]
    if out:
        return out, False
    return _derived_ladder(findings), True


def _repeats(e: Any, detail: str) -> bool:
    """A fact that only repeats the rung's detail: it says nothing new."""
    return isinstance(e, dict) and e.get("line") is None and _s(e.get("text")).strip() == detail.strip()


def _rung(r: Dict[str, Any], sources: Sources) -> Dict[str, Any]:
    state = _s(r.get("state")) or "not-inspected"
    detail = _s(r.get("detail"))
    evidence = [e for e in _l(r.get("evidence")) if not _repeats(e, detail)]
    return {"name": _s(r.get("name")), "title": _s(r.get("title")) or _s(r.get("name")).capitalize(),
            "state": state, "state_label": STATE_LABELS.get(state, state), "detail": _s(r.get("detail")),
            "blocked_by": _s(r.get("blocked_by")),
            "seconds": r.get("seconds") if isinstance(r.get("seconds"), (int, float)) else None,
            "evidence": [evidence_view(e, sources) for e in evidence]}


def _derived_ladder(findings: Sequence[Any]) -> List[Dict[str, Any]]:
    """Each rung's worst unexplained finding (failed over warning), with their titles; [] without any."""
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
        return []
    out: List[Dict[str, Any]] = []
    for name in list(RUNGS) + sorted(set(worst) - set(RUNGS)):
        state, titles = worst.get(name, ("no-finding", []))
        out.append({"name": name, "title": name.capitalize(), "state": state,
                    "state_label": STATE_LABELS[state], "detail": "; ".join(titles), "blocked_by": "",
                    "seconds": None, "evidence": []})
    return out


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
