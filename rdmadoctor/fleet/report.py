"""The fleet document (schema `rdmadoctor-fleet/1`, docs/fleet.md): nodes grouped by verdict and cause with
their node sets folded as clubak folds them, the drift across nodes, every node's record, and for `fleet probe`
the pairs, the isolation and the blame.

    doc = build("check", records, nodeset="node[001-512]", source="ssh")
    code = exit_code(doc)
"""
from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, List, Optional, Sequence

from rdmadoctor import __version__
from rdmadoctor.fleet import drift
from rdmadoctor.fleet.nodes import STATE_LABELS
from rdmadoctor.fleet.nodeset import fold

SCHEMA = "rdmadoctor-fleet/1"
STATUS_ORDER = {"failure": 0, "unknown": 1, "warning": 2, "ok": 3}
EXIT = {"ok": 0, "warning": 1, "failure": 2, "unknown": 3}


def _group_key(r: Dict[str, Any]):
    if r["state"] != "checked":
        return ("unknown", r["state"], None)
    return (r["status"], "checked", r.get("cause") if r["status"] != "ok" else None)


def groups(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Nodes with the same verdict and cause (or the same reason for having none), worst first, then largest."""
    by_key: Dict[Any, List[Dict[str, Any]]] = {}
    for r in records:
        by_key.setdefault(_group_key(r), []).append(r)
    out = []
    for (status, state, cause), members in by_key.items():
        first = members[0]
        summaries = {m.get("summary") for m in members}
        rules = sorted({str(m["rule"]) for m in members if m.get("rule")})
        out.append({
            "status": status, "state": state, "cause": cause, "label": _label(status, state, cause),
            "nodes": fold(m["node"] for m in members), "count": len(members), "rules": rules,
            # one summary when they all say the same; else the first, and how many differ
            "summary": first.get("summary") if len(summaries) == 1 or state != "checked" else
            f"{first.get('summary')} (and {len(summaries) - 1} other wording{'s' if len(summaries) > 2 else ''})",
            "fix": first.get("fix"),
        })
    out.sort(key=lambda g: (STATUS_ORDER.get(g["status"], 9), g["state"] != "checked", -g["count"], g["label"]))
    return out


def _label(status: str, state: str, cause: Optional[str]) -> str:
    if state != "checked":
        return STATE_LABELS.get(state, state)
    if status == "ok":
        return "ok"
    return cause or "unknown"


def summary(records: Sequence[Dict[str, Any]]) -> Dict[str, int]:
    out = {"nodes": len(records), "ok": 0, "warning": 0, "failure": 0, "unknown": 0, "checked": 0,
           "not_checked": 0}
    for r in records:
        out[r["status"]] = out.get(r["status"], 0) + 1
        out["checked" if r["state"] == "checked" else "not_checked"] += 1
    return out


def status_of(records: Sequence[Dict[str, Any]]) -> str:
    """The fleet's status: failure if any node fails; else unknown if any node could not be judged; else
    warning if any warns; else ok (and unknown for an empty fleet: nothing was seen)."""
    if not records:
        return "unknown"
    statuses = {r["status"] for r in records}
    for s in ("failure", "unknown", "warning"):
        if s in statuses:
            return s
    return "ok"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def build(command: str, records: List[Dict[str, Any]], nodeset: str = "", source: str = "ssh",
          seconds: Optional[float] = None, settings: Optional[Dict[str, Any]] = None,
          notes: Optional[List[str]] = None) -> Dict[str, Any]:
    checked = {r["node"]: r["attributes"] for r in records if r["state"] == "checked"}
    return {
        "schema": SCHEMA,
        "command": command,
        "rdmadoctor": __version__,
        "nodeset": nodeset or fold(r["node"] for r in records),
        "source": source,
        "started": _now(),
        "seconds": seconds,
        "settings": settings or {},
        "status": status_of(records),
        "summary": summary(records),
        "groups": groups(records),
        "drift": drift.compare(checked),
        "nodes": records,
        "probe": None,
        "notes": notes or [],
    }


def exit_code(doc: Dict[str, Any]) -> int:
    return EXIT.get(doc.get("status") or "unknown", 3)
