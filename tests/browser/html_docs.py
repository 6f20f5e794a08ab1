"""Documents for the HTML report tests: real explain results (with the raw-text fields the report reads),
a check result built from recorded facts, hostile logs, and minimal documents.

json_out.to_dict carries `inputs[].excerpt` and `evidence[].context`; `without_raw_text` removes them to
test documents from before they existed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
SEED = FIXTURES / "handwritten" / "seed-qp-mismatch"
CONTEXT = 3


def without_raw_text(document: Dict[str, Any]) -> Dict[str, Any]:
    """The document as an older rdmadoctor wrote it: no inputs[].excerpt, no evidence[].context."""
    for inp in document.get("inputs", []):
        inp.pop("excerpt", None)
    for item in document.get("findings", []) + document.get("rungs", []):
        for ev in item.get("evidence", []):
            ev.pop("context", None)
    return document


def explain_document(paths: Sequence[Path], link_rate: Optional[float] = None, raw_text: bool = True) -> Dict[str, Any]:
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_paths
    from rdmadoctor.render import json_out
    parsed = parse_paths([str(p) for p in paths])
    diagnosis = diagnose.explain(parsed, link_rate)
    document = json.loads(json.dumps(json_out.to_dict(diagnosis), default=str))
    if link_rate is not None:
        document.setdefault("link_rate_gbps", link_rate)
    return document if raw_text else without_raw_text(document)


def seed_document(**kw: Any) -> Dict[str, Any]:
    return explain_document([SEED / "server.log", SEED / "client.log"], **kw)


def write_logs(tmp: Path, files: Dict[str, str]) -> List[Path]:
    paths = []
    for name, text in files.items():
        p = tmp / name
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths


HOSTILE = '<script>window.__pwned=1</script>'
HOSTILE_ATTR = '"><img src=x onerror="window.__pwned=1">'


def hostile_logs(tmp: Path) -> List[Path]:
    """A client log whose every field a renderer shows carries markup: the command's host, an error, a
    header value, a line of its own."""
    client = (f"[root@{'evil'} ~]# ib_write_bw -d mlx5_0 --qp=4 10.9.8.7\n"
              + (SEED / "client.log").read_text(encoding="utf-8").split("\n", 1)[1].replace(
                  "Number of qps   : 10", "Number of qps   : 4").rstrip("\n")
              + f"\n{HOSTILE}\n{HOSTILE_ATTR}\n"
              + f"Couldn't connect to {HOSTILE_ATTR}:18515\n")
    server = (SEED / "server.log").read_text(encoding="utf-8").replace(
        "ib_write_bw --ib-dev=mlx5_1", f"ib_write_bw --ib-dev=mlx5_1 {HOSTILE}") + HOSTILE + "\n"
    return write_logs(tmp, {'server-"><i>x<i>.log': server, "client.log": client})


def check_document(facts_path: Path) -> Dict[str, Any]:
    """A `check` result around recorded facts: what cli's check writes (verdict, findings, rungs, facts)."""
    facts = json.loads(facts_path.read_text(encoding="utf-8"))
    host = facts.get("host", {})
    peer = host.get("peer") or "192.0.2.2"
    fw = facts["sections"].get("firewall", {}).get("data", {}) or {}
    verdicts = fw.get("verdicts") or []
    dropped = [v for v in verdicts if v.get("verdict") == "drop"]
    rungs = [
        {"name": "device", "title": "RDMA device", "state": "passed", "detail": "rxe0 (rxe)", "evidence": [],
         "seconds": 0.4, "blocked_by": None},
        {"name": "port", "title": "Port state", "state": "passed", "detail": "rxe0/1 ACTIVE, LinkUp", "evidence": [],
         "seconds": None, "blocked_by": None},
        {"name": "address", "title": "Address and GID", "state": "passed",
         "detail": "GID 1 ::ffff:192.0.2.1 on eth0", "evidence": [], "seconds": None, "blocked_by": None},
        {"name": "route", "title": f"Route to {peer}", "state": "passed", "detail": "via eth0", "evidence": [],
         "seconds": None, "blocked_by": None},
        {"name": "firewall", "title": "Firewall", "state": "failed" if dropped else "passed",
         "detail": "; ".join(f"{v['proto']}/{v['port']} from {v.get('src')}: {v['verdict']}" for v in verdicts),
         "evidence": [{"source": "facts:firewall", "text": v.get("why") or "", "line": None, "note": v.get("purpose")}
                      for v in dropped], "seconds": None, "blocked_by": None},
        {"name": "limits", "title": "Locked memory", "state": "warning", "detail": "memlock 8 MiB", "evidence": [],
         "seconds": None, "blocked_by": None},
        {"name": "connection", "title": "Connection to the peer", "state": "skipped" if dropped else "not-inspected",
         "detail": "" if dropped else "no --peer given", "evidence": [], "seconds": None,
         "blocked_by": "firewall" if dropped else None},
    ]
    findings = []
    if dropped:
        v = dropped[0]
        findings.append({
            "rule": "FACT-FIREWALL-DROP", "cause": "firewall-blocks-port", "severity": "fail",
            "title": f"The firewall drops {v['proto']}/{v['port']} from {v.get('src')}",
            "explanation": "perftest's server never sees the client's connection: the firewall drops it first.",
            "evidence": [{"source": "facts:firewall", "text": v.get("why") or "", "line": None,
                          "note": v.get("purpose")}],
            "fix": [f"Allow it: `nft add rule inet filter input {v['proto']} dport {v['port']} accept`"],
            "confidence": "high", "kind": "cause", "candidates": [], "next_steps": [],
            "refs": ["docs/perftest-messages.md#c02"], "rung": "firewall", "explained_by": None, "key": None})
    findings.append({
        "rule": "FACT-MEMLOCK-LOW", "cause": "memlock-limit", "severity": "warn",
        "title": "Locked memory is limited to 8 MiB",
        "explanation": "Large message sizes or many QPs need more pinned memory than this.",
        "evidence": [{"source": "facts:limits", "text": "memlock soft 8388608, hard 8388608", "line": None,
                      "note": None}],
        "fix": ["Raise it: `* - memlock unlimited` in /etc/security/limits.d/rdma.conf"],
        "confidence": "medium", "kind": "cause", "candidates": [], "next_steps": [], "refs": [],
        "rung": "limits", "explained_by": None, "key": None})
    status = "failure" if dropped else "warning"
    first = findings[0]
    return {
        "schema": "rdmadoctor/1", "command": "check", "rdmadoctor": "0.1.0",
        "verdict": {"status": status, "cause": first["cause"], "rule": first["rule"], "summary": first["title"],
                    "confidence": first["confidence"], "fix": first["fix"][0], "candidates": [], "next_steps": []},
        "findings": findings, "rungs": rungs, "comparisons": [], "runs": [], "inputs": [],
        "facts": facts, "notes": [],
    }


def real_check_document(facts_path: Path) -> Dict[str, Any]:
    """What `rdmadoctor check --from FACTS --json` gives, when this rdmadoctor has check; else check_document."""
    try:
        from rdmadoctor.engine import diagnose
        from rdmadoctor.render import json_out
        facts = json.loads(facts_path.read_text(encoding="utf-8"))
        diagnosis = diagnose.check(facts, None, (facts.get("host") or {}).get("peer"))
    except (ImportError, AttributeError):
        return check_document(facts_path)
    return json.loads(json.dumps(json_out.to_dict(diagnosis), default=str))
