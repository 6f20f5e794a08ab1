"""The fleet report as text for a terminal: the groups (clubak-style folded node sets), the drift, and for
`fleet probe` the pairs that failed and whom the isolation blames."""
from __future__ import annotations

from typing import Any, Dict, List

from rdmadoctor.runtime.text import printable

STATUS_WORD = {"ok": "OK", "warning": "WARNING", "failure": "FAILURE", "unknown": "UNKNOWN"}


def _p(value: Any) -> str:
    return printable("" if value is None else str(value), False)


def _counts(s: Dict[str, int]) -> str:
    parts = [f"{s.get(k, 0)} {k}" for k in ("ok", "warning", "failure", "unknown") if s.get(k)]
    text = f"{s.get('nodes', 0)} node{'s' if s.get('nodes') != 1 else ''}: " + (", ".join(parts) or "none")
    if s.get("not_checked"):
        text += f" ({s['not_checked']} not checked)"
    return text


def render(doc: Dict[str, Any], verbose: bool = False) -> str:
    word = STATUS_WORD.get(str(doc.get("status")), "UNKNOWN")
    counts = _counts(doc.get("summary") or {})
    if doc.get("command") == "probe":
        counts = f"pairwise probe; the nodes' own checks: {counts}"
    out: List[str] = [f"FLEET {word}  {counts}"]
    out.extend(_group_line(g) for g in doc.get("groups") or [])
    rows = doc.get("drift") or []
    if rows:
        out.append("Drift (values that differ across nodes; the odd nodes are outside the most common value)")
        out.extend(_drift_line(row) for row in rows)
    probe = doc.get("probe")
    if probe:
        out.extend(_probe_lines(probe, verbose))
    for note in doc.get("notes") or []:
        out.append(f"Note: {_p(note)}")
    return "\n".join(out) + "\n"


def _group_line(g: Dict[str, Any]) -> str:
    """A group of nodes that answered alike: its status and nodes, and what is wrong and the fix unless ok."""
    word = (g["status"] if g["state"] == "checked" else "unknown").ljust(8)
    label = (_p(g["label"]) if g["status"] != "ok" else "-").ljust(28)
    line = f"  {word} {label} {_p(g['nodes'])}"
    if g["status"] != "ok":
        line += f"\n           {_p(g.get('summary'))}"
        if g.get("fix"):
            line += f"\n           Fix: {_p(g['fix'])}"
    return line


def _drift_line(row: Dict[str, Any]) -> str:
    """A value that differs across nodes: the majority's as a count of nodes (when more than 3), the others' with
    their nodes named."""
    values = "; ".join(f"{_p(v['value'])} on {v['count']} node{'s' if v['count'] != 1 else ''}"
                       if v["value"] == row.get("majority") and v["count"] > 3 else
                       f"{_p(v['value'])} on {_p(v['nodes'])}" for v in row["values"])
    if row.get("unknown_count"):
        values += f"; not read on {_p(row['unknown'])}"
    if row.get("majority") is None and len(row["values"]) > 1:
        values += " (no majority)"
    return f"  {_p(row['label']).ljust(22)} {values}"


def _probe_lines(probe: Dict[str, Any], verbose: bool) -> List[str]:
    plan = probe.get("plan") or {}
    pairs = probe.get("pairs") or []
    counts: Dict[str, int] = {}
    for p in pairs:
        if p.get("purpose") == "plan":
            counts[p["outcome"]] = counts.get(p["outcome"], 0) + 1
    out = [f"Probe: {plan.get('kind')} plan, {plan.get('rounds')} round(s) of at most {plan.get('round_seconds'):g} s, "
           f"{plan.get('pairs')} pair(s): " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))]
    for b in probe.get("blame") or []:
        where = " - ".join(b["nodes"]) if b["kind"] == "link" else ", ".join(b["nodes"])
        out.append(f"  {_p(b['kind']).ljust(12)} {_p(where).ljust(24)} {_p(b.get('cause') or 'unknown')}: "
                   f"{_p(b.get('summary'))}"
                   f" ({len(b.get('pairs') or [])} failed pair{'s' if len(b.get('pairs') or []) != 1 else ''})")
    shown = [p for p in pairs if p["outcome"] not in ("passed",) or verbose]
    if shown:
        out.append("Pairs (client -> agent)" + ("" if verbose else ", all but those that passed"))
        for p in shown:
            rung = f" at {p['rung']}" if p.get("rung") else ""
            out.append(f"  {_p(p['a'])} -> {_p(p['b'])}  {p['purpose']:<8} {p['outcome']:<11}"
                       f"{_p(p.get('cause') or '')}{rung}: {_p(p.get('summary'))}")
    return out
