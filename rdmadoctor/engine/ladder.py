"""check's ladder: each rung's state from the findings, in dependency order.

A rung is failed when an unexplained failure sits on it; skipped when a rung it depends on failed (its
findings are then folded under that failure instead of being shown as more failures); not inspected
when the facts it needs could not be read (and why); passed otherwise.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from rdmadoctor.model import Evidence, Finding, Rung

# rung -> (title, the fact sections it needs, the rung it depends on)
LADDER = (
    ("device", "RDMA device", ("devices",), None),
    ("driver", "Kernel modules and device access", ("kernel", "devices"), "device"),
    ("port", "Port state", ("devices",), "driver"),
    ("address", "Addresses and GIDs", ("devices", "netlink"), "port"),
    ("route", "Route to the peer", ("netlink",), "address"),
    ("firewall", "Firewall", ("firewall",), None),
    ("connection", "Side-channel port", ("ports",), None),
    ("limits", "Locked-memory limit", ("limits",), None),
    ("performance", "Performance (PCIe, MTU)", ("pci", "devices"), "port"),
)


def _passed_detail(name: str, view: Dict[str, Any]) -> str:
    ports = view.get("ports", [])
    if name == "device":
        return ", ".join(f"{d['name']} ({d.get('driver') or '?'})" for d in view.get("devices", [])) or "devices found"
    if name == "driver":
        return "ib_uverbs loaded; /dev/infiniband usable" + ("" if view["rdma"].get("rdma_ucm") else "")
    if name == "port":
        return ", ".join(f"{p['label']} {p['state']}" for p in ports)
    if name == "address":
        return ", ".join(f"{p['label']}: {', '.join(p['ipv4_gids']) or 'IB'}" for p in ports)
    if name == "route":
        peer = view.get("peer") or {}
        return f"{peer.get('address')} via {peer.get('route_ifname')} (neighbour {peer.get('neighbour')})"
    if name == "connection":
        return "perftest's port is free"
    if name == "firewall":
        verdicts = view.get("firewall", {})
        return ", ".join(f"{k} {v.get('verdict')}" for k, v in verdicts.items()) or "no filtering"
    if name == "limits":
        m = view.get("memlock", {})
        if m.get("exempt"):
            return "CAP_IPC_LOCK (not limited)"
        return "memlock unlimited" if m.get("unlimited") else f"memlock {m.get('soft')} bytes"
    return "nothing found"


def build(findings: List[Finding], view: Dict[str, Any], peer: Optional[str]) -> List[Rung]:
    readable = view.get("readable", {})
    reasons = view.get("reasons", {})
    by_rung: Dict[str, List[Finding]] = {}
    for f in findings:
        if f.rung:
            by_rung.setdefault(f.rung, []).append(f)
    states: Dict[str, Rung] = {}
    rungs: List[Rung] = []
    for name, title, needs, depends in LADDER:
        live = [f for f in by_rung.get(name, []) if f.explained_by is None]
        failed = [f for f in live if f.severity == "fail"]
        warned = [f for f in live if f.severity == "warn"]
        blocker = states.get(depends) if depends else None
        unreadable = [n for n in needs if not readable.get(n, False)]
        if blocker is not None and blocker.state in ("failed", "skipped"):
            blocked_by = blocker.blocked_by if blocker.state == "skipped" else blocker.name
            rung = Rung(name, title, "skipped", f"not checked: the {blocked_by} rung failed", blocked_by=blocked_by)
            cause = next((f for f in by_rung.get(blocked_by, []) if f.severity == "fail" and not f.explained_by),
                         None)
            for f in by_rung.get(name, []):
                if f.explained_by is None and cause is not None:
                    f.explained_by = cause.rule           # shown as skipped, not as another failure
        elif failed:
            rung = Rung(name, title, "failed", failed[0].title, evidence=list(failed[0].evidence))
        elif unreadable:
            why = "; ".join(f"{n}: {reasons.get(n) or 'not collected'}" for n in unreadable)
            rung = Rung(name, title, "not-inspected", f"could not read {why}")
        elif name == "route" and not peer:
            rung = Rung(name, title, "not-inspected", "no --peer given")
        elif warned:
            rung = Rung(name, title, "warning", warned[0].title, evidence=list(warned[0].evidence))
        else:
            rung = Rung(name, title, "passed", _passed_detail(name, view),
                        evidence=[Evidence("facts", _passed_detail(name, view))])
        states[name] = rung
        rungs.append(rung)
    return rungs
