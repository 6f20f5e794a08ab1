"""The monitors' own formats, for one host (`check --format`) and for a fleet (`fleet check|probe --format`):

- `line`: one line in the Nagios/NHC plugin style, `RDMA CRITICAL memlock-limit: <summary>`; the exit code is the
  plugin's (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), as it is for every rdmadoctor command.
- `jsonl`: compact JSON on one line: a host's whole result, or one line per node (or pair) of a fleet, for
  collectors that read a line at a time.
- `prom`: the Prometheus text format for node_exporter's textfile collector, written with prometheus-client
  (metric names: `rdmadoctor_` prefix, base units, `_info` for labels-only metrics, `_seconds`, `_timestamp_seconds`).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional

from rdmadoctor import __version__
from rdmadoctor.runtime.text import printable

FORMATS = ("text", "json", "jsonl", "line", "prom")
NAGIOS = {"ok": "OK", "warning": "WARNING", "failure": "CRITICAL", "unknown": "UNKNOWN"}
STATUSES = ("ok", "warning", "failure", "unknown")
RUNG_STATES = ("passed", "warning", "failed", "skipped", "not-inspected")
LINE_MAX = 1000          # NHC and Slurm keep a reason short; Nagios reads the first 4 KiB of a plugin's output


def _one_line(text: Any) -> str:
    return " ".join(printable("" if text is None else str(text), False).split())


def _cut(text: str, limit: int = LINE_MAX) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def compact(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"


# -- one host -------------------------------------------------------------------------------------------

def check_line(doc: Dict[str, Any]) -> str:
    """`RDMA CRITICAL memlock-limit: The locked-memory limit is 64 KiB ...` (ok: `RDMA OK: <summary>`)."""
    verdict = doc.get("verdict") or {}
    status = verdict.get("status") or "unknown"
    cause = verdict.get("cause")
    head = f"RDMA {NAGIOS.get(status, 'UNKNOWN')}"
    if cause and status != "ok":
        head += f" {_one_line(cause)}"
    return _cut(f"{head}: {_one_line(verdict.get('summary'))}") + "\n"


def check_prom(doc: Dict[str, Any]) -> str:
    from prometheus_client import CollectorRegistry, Enum, Gauge, Info
    from prometheus_client.exposition import generate_latest
    registry = CollectorRegistry()
    verdict = doc.get("verdict") or {}
    status = str(verdict.get("status")) if verdict.get("status") in STATUSES else "unknown"
    Enum("rdmadoctor_status", "The verdict of rdmadoctor check on this host.", states=list(STATUSES),
         registry=registry).state(status)
    Gauge("rdmadoctor_exit_code", "rdmadoctor check's exit code: 0 ok, 1 warning, 2 failure, 3 unknown.",
          registry=registry).set({"ok": 0, "warning": 1, "failure": 2, "unknown": 3}[status])
    Info("rdmadoctor_verdict", "The verdict's cause (docs/causes.md), rule and confidence.", registry=registry).info(
        {"cause": _one_line(verdict.get("cause") or ""), "rule": _one_line(verdict.get("rule") or ""),
         "confidence": _one_line(verdict.get("confidence") or "")})
    findings = Gauge("rdmadoctor_findings", "Findings by severity, explained ones included.", ["severity"],
                     registry=registry)
    counts = {"fail": 0, "warn": 0, "info": 0}
    for f in doc.get("findings") or []:
        if isinstance(f, dict) and f.get("severity") in counts:
            counts[f["severity"]] += 1
    for severity, n in counts.items():
        findings.labels(severity).set(n)
    rungs = [r for r in doc.get("rungs") or [] if isinstance(r, dict) and r.get("state") in RUNG_STATES]
    if rungs:
        rung = Enum("rdmadoctor_rung", "The state of each step of check's ladder.", ["rung"],
                    states=list(RUNG_STATES), registry=registry)
        for r in rungs:
            rung.labels(_one_line(r.get("name"))).state(r["state"])
    Info("rdmadoctor_build", "The rdmadoctor that ran the check.", registry=registry).info(
        {"version": _one_line(doc.get("rdmadoctor") or __version__)})
    facts = doc.get("facts") or {}
    seconds = facts.get("seconds") if isinstance(facts, dict) else None
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        Gauge("rdmadoctor_check_duration_seconds", "How long collecting this host's facts took.",
              registry=registry).set(seconds)
    import time
    Gauge("rdmadoctor_last_check_timestamp_seconds", "When this check ran (Unix time).",
          registry=registry).set(round(time.time(), 3))
    return generate_latest(registry).decode("utf-8")


def check(doc: Dict[str, Any], fmt: str) -> str:
    if fmt == "line":
        return check_line(doc)
    if fmt == "jsonl":
        return compact(doc)
    if fmt == "prom":
        return check_prom(doc)
    raise ValueError(fmt)


# -- a fleet --------------------------------------------------------------------------------------------

def fleet_line(doc: Dict[str, Any]) -> str:
    """`RDMA CRITICAL 2 of 8 nodes: memlock-limit node003; mtu-mismatch node[005-006]; unreachable node7`."""
    s = doc.get("summary") or {}
    status = doc.get("status") or "unknown"
    bad = [g for g in doc.get("groups") or [] if g.get("status") != "ok"]
    n_bad = sum(g.get("count", 0) for g in bad)
    head = f"RDMA {NAGIOS.get(status, 'UNKNOWN')} "
    if doc.get("command") == "probe" and doc.get("probe"):
        blame = doc["probe"].get("blame") or []
        parts = [f"{b['kind']} {'-'.join(b['nodes']) if b['kind'] == 'link' else ','.join(b['nodes'])} "
                 f"{b.get('cause') or 'unknown'}" for b in blame]
        pairs = doc["probe"].get("plan", {}).get("pairs", 0)
        failed = sum(1 for p in doc["probe"].get("pairs") or [] if p.get("purpose") == "plan"
                     and p.get("outcome") in ("failed", "not-run", "incomplete"))
        head += f"{failed} of {pairs} pairs"
        body = "; ".join(parts) or "every pair passed"
    else:
        head += f"{n_bad} of {s.get('nodes', 0)} nodes"
        body = "; ".join(f"{g['label']} {g['nodes']}" for g in bad) or "every node ok"
    return _cut(_one_line(f"{head}: {body}")) + "\n"


def fleet_jsonl(doc: Dict[str, Any]) -> str:
    """One line per node (`fleet check`) or per pair (`fleet probe`), then nothing else: a collector keys on
    `node` or on `a` and `b`."""
    lines: List[str] = []
    if doc.get("command") == "probe" and doc.get("probe"):
        for p in doc["probe"].get("pairs") or []:
            lines.append(compact({k: p.get(k) for k in ("a", "b", "address", "purpose", "round", "outcome",
                                                         "status", "cause", "rule", "rung", "summary", "seconds")}))
        for b in doc["probe"].get("blame") or []:
            lines.append(compact({"blame": b["kind"], **{k: b.get(k) for k in ("nodes", "cause", "summary")}}))
        return "".join(lines)
    for r in doc.get("nodes") or []:
        lines.append(compact({k: r.get(k) for k in ("node", "state", "status", "cause", "rule", "summary", "fix",
                                                     "rc", "seconds", "error")}))
    return "".join(lines)


def fleet_prom(doc: Dict[str, Any]) -> str:
    from prometheus_client import CollectorRegistry, Enum, Gauge, Info
    from prometheus_client.exposition import generate_latest
    registry = CollectorRegistry()
    records = doc.get("nodes") or []
    status = Enum("rdmadoctor_node_status", "Each node's verdict (unknown when it could not be checked).",
                  ["node"], states=list(STATUSES), registry=registry)
    state = Gauge("rdmadoctor_node_checked", "1 when the node's check answered; 0 when it could not be checked "
                  "(unreachable, timeout, not installed, no result).", ["node", "state"], registry=registry)
    cause = Info("rdmadoctor_node_verdict", "Each node's cause and rule.", ["node"], registry=registry)
    for r in records:
        node = _one_line(r.get("node"))
        status.labels(node).state(r.get("status") if r.get("status") in STATUSES else "unknown")
        state.labels(node, r.get("state") or "").set(1 if r.get("state") == "checked" else 0)
        cause.labels(node).info({"cause": _one_line(r.get("cause") or ""), "rule": _one_line(r.get("rule") or "")})
    nodes = Gauge("rdmadoctor_fleet_nodes", "Nodes by verdict.", ["status"], registry=registry)
    s = doc.get("summary") or {}
    for k in STATUSES:
        nodes.labels(k).set(s.get(k, 0))
    odd = Gauge("rdmadoctor_fleet_drift_odd_nodes", "Nodes whose value of an attribute differs from the most "
                "common one.", ["attribute"], registry=registry)
    for row in doc.get("drift") or []:
        odd.labels(_one_line(row.get("attribute"))).set(row.get("odd_count") or 0)
    probe = doc.get("probe")
    if probe:
        outcome = Gauge("rdmadoctor_pair_ok", "1 when the probe from node a to node b's agent passed, 0 when it "
                        "failed, could not run or was incomplete.", ["a", "b", "outcome"], registry=registry)
        for p in probe.get("pairs") or []:
            if p.get("purpose") == "plan":
                outcome.labels(_one_line(p["a"]), _one_line(p["b"]), p.get("outcome") or "").set(
                    1 if p.get("outcome") in ("passed", "warning") else 0)
        blamed = Gauge("rdmadoctor_blamed", "Nodes and links the isolation blames (1 each).",
                       ["kind", "nodes", "cause"], registry=registry)
        for b in probe.get("blame") or []:
            blamed.labels(b["kind"], _one_line(",".join(b["nodes"])), _one_line(b.get("cause") or "unknown")).set(1)
    if isinstance(doc.get("seconds"), (int, float)):
        Gauge("rdmadoctor_fleet_duration_seconds", "How long the fleet run took.",
              registry=registry).set(doc["seconds"])
    import time
    Gauge("rdmadoctor_fleet_last_run_timestamp_seconds", "When this fleet run ended (Unix time).",
          registry=registry).set(round(time.time(), 3))
    return generate_latest(registry).decode("utf-8")


def fleet(doc: Dict[str, Any], fmt: str) -> str:
    if fmt == "line":
        return fleet_line(doc)
    if fmt == "jsonl":
        return fleet_jsonl(doc)
    if fmt == "prom":
        return fleet_prom(doc)
    raise ValueError(fmt)


def names() -> Iterable[str]:
    return FORMATS


def parse(value: Optional[str], json_flag: bool) -> str:
    """--format and --json together: --json is --format json; both given must agree."""
    fmt = (value or ("json" if json_flag else "text")).lower()
    if fmt not in FORMATS:
        raise ValueError(f"{value!r} is not one of {', '.join(FORMATS)}")
    if json_flag and fmt != "json":
        raise ValueError(f"--json and --format {fmt} disagree: give one")
    return fmt
