"""The ladders: check's host ladder and the --peer probe's, each rung's state from the findings, in dependency
order. One module builds both; engine/verdict.py reads them to pick the verdict.

Host ladder: a rung is failed when an unexplained failure sits on it; skipped when a rung it depends on failed
(its findings are then folded under that failure instead of being shown as more failures); not inspected when
the facts it needs could not be read (and why); passed otherwise.

Probe ladder (`check --peer`): seven rungs judged in order, stopping at the first broken one. Each rung's state
comes from what it saw (views/probeview.py); the findings of rules with a `probe_rung` say why. A failed rung
shows its top finding's title; the rungs above it are skipped and their findings folded under the failure; a
rung that could not run says why (not inspected). Rungs 1 and 3 are judged from this host's facts, so when one
of them fails its detail comes from the host ladder's findings on the same rungs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from rdmadoctor.knowledge.phrases import say
from rdmadoctor.model import Evidence, Finding, Rung
from rdmadoctor.views.probeview import RUNG_NAMES

# rung -> (title, the fact sections it needs, the rung it depends on)
HOST_LADDER = (
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
# Without these a host cannot be called healthy: nothing else matters if they were not seen.
ESSENTIAL = ("device", "driver", "port", "address")
PROBE_RUNG_NUMBERS = {name: n for n, name in RUNG_NAMES.items()}
# probe rung -> the host rungs whose failures explain it (rungs 1 and 3 look at this host's own facts)
PROBE_HOST_RUNGS = {1: ("device", "driver", "port"), 3: ("address", "port")}


@dataclass
class Ladders:
    host: List[Rung] = field(default_factory=list)
    probe: List[Rung] = field(default_factory=list)
    probe_top: Optional[Finding] = None      # the finding that names the first failed probe rung's cause

    @property
    def all(self) -> List[Rung]:
        return self.host + self.probe


def on_probe_ladder(finding: Finding) -> bool:
    """A finding of a rule with a `probe_rung` belongs to the probe ladder, not to the host ladder."""
    return finding.probe_rung is not None


def probe_rung_number(finding: Finding) -> Optional[int]:
    return PROBE_RUNG_NUMBERS.get(finding.probe_rung) if finding.probe_rung else None


# -- host ladder --------------------------------------------------------------------------------------------

def _devices(view: Dict[str, Any]) -> str:
    return ", ".join(f"{d['name']} ({d.get('driver') or '?'})" for d in view.get("devices", [])) or "devices found"


def _route(view: Dict[str, Any]) -> str:
    peer = view.get("peer") or {}
    return f"{peer.get('address')} via {peer.get('route_ifname')} (neighbour {peer.get('neighbour')})"


def _firewall(view: Dict[str, Any]) -> str:
    return ", ".join(f"{k} {v.get('verdict')}" for k, v in view.get("firewall", {}).items()) or "no filtering"


def _limits(view: Dict[str, Any]) -> str:
    m = view.get("memlock", {})
    if m.get("exempt"):
        return "CAP_IPC_LOCK (not limited)"
    return "memlock unlimited" if m.get("unlimited") else f"memlock {m.get('soft')} bytes"


def _ipv4_gids(port: Dict[str, Any]) -> str:
    return ", ".join(str(g) for g in port.get("ipv4_gids") or [] if g)


PASSED: Dict[str, Callable[[Dict[str, Any]], str]] = {
    "device": _devices,
    "driver": lambda view: "ib_uverbs loaded; /dev/infiniband usable",
    "port": lambda view: ", ".join(f"{p['label']} {p['state']}" for p in view.get("ports", [])),
    "address": lambda view: ", ".join(f"{p['label']}: {_ipv4_gids(p) or 'IB'}" for p in view.get("ports", [])),
    "route": _route,
    "connection": lambda view: "perftest's port is free",
    "firewall": _firewall,
    "limits": _limits,
}


def _host_rung(name: str, title: str, needs: Tuple[str, ...], blocker: Optional[Rung], findings: List[Finding],
               by_rung: Dict[str, List[Finding]], view: Dict[str, Any], peer: Optional[str]) -> Rung:
    live = [f for f in findings if f.explained_by is None]
    failed = [f for f in live if f.severity == "fail"]
    warned = [f for f in live if f.severity == "warn"]
    readable, reasons = view.get("readable", {}), view.get("reasons", {})
    unreadable = [n for n in needs if not readable.get(n, False)]
    if blocker is not None and blocker.state in ("failed", "skipped"):
        blocked_by = blocker.blocked_by if blocker.state == "skipped" else blocker.name
        cause = next((f for f in by_rung.get(blocked_by or "", []) if f.severity == "fail" and not f.explained_by),
                     None)
        for f in findings:
            if f.explained_by is None and cause is not None:
                f.explained_by = cause.rule            # shown as skipped, not as another failure
        return Rung(name, title, "skipped", f"not checked: the {blocked_by} rung failed", blocked_by=blocked_by)
    if failed:
        return Rung(name, title, "failed", failed[0].title, evidence=list(failed[0].evidence))
    if unreadable:
        why = "; ".join(f"{n}: {reasons.get(n) or 'not collected'}" for n in unreadable)
        return Rung(name, title, "not-inspected", f"could not read {why}")
    if name == "route" and not peer:
        return Rung(name, title, "not-inspected", "no --peer given")
    if warned:
        return Rung(name, title, "warning", warned[0].title, evidence=list(warned[0].evidence))
    detail = PASSED.get(name, lambda view: "nothing found")(view)
    return Rung(name, title, "passed", detail, evidence=[Evidence("facts", detail)])


def host(findings: List[Finding], view: Dict[str, Any], peer: Optional[str], lang: Optional[str] = None) -> List[Rung]:
    by_rung: Dict[str, List[Finding]] = {}
    for f in findings:
        if f.rung and not on_probe_ladder(f):
            by_rung.setdefault(f.rung, []).append(f)
    states: Dict[str, Rung] = {}
    for name, _, needs, depends in HOST_LADDER:
        blocker = states.get(depends) if depends else None
        states[name] = _host_rung(name, say(f"rung-{name}", lang), needs, blocker, by_rung.get(name, []), by_rung,
                                  view, peer)
    return list(states.values())


# -- probe ladder -------------------------------------------------------------------------------------------

def _probe_top(findings: List[Finding], n: int) -> Optional[Finding]:
    live = [f for f in findings if f.explained_by is None and f.severity == "fail"]
    for f in live:
        number = probe_rung_number(f)
        if number is not None and number <= n:
            return f                       # a cause found at or below the rung that broke
    for f in live:
        if not on_probe_ladder(f) and f.rung in PROBE_HOST_RUNGS.get(n, ()):
            return f
    return None


def probe(findings: List[Finding], view: Dict[str, Any]) -> Tuple[List[Rung], Optional[Finding]]:
    """(the probe's rungs, the finding that names the first failed rung's cause, if one does)."""
    seen = view.get("probe")
    if not seen:
        return [], None
    out: List[Rung] = []
    failed_at: Optional[int] = None
    blocked_by: Optional[str] = None
    top: Optional[Finding] = None
    for raw in seen.get("rungs") or []:
        n = raw["n"]
        evidence = [Evidence("probe", text) for text in raw.get("evidence") or []]
        if failed_at is not None:
            out.append(Rung(raw["name"], raw["title"], "skipped", f"not judged: rung {failed_at} failed",
                            evidence=evidence, seconds=raw.get("seconds"), blocked_by=blocked_by))
            continue
        state, detail = raw["state"], raw["detail"]
        if state == "failed":
            failed_at, blocked_by = n, raw["name"]
            top = _probe_top(findings, n)
            if top is not None:
                evidence = [Evidence("probe", detail)] + evidence
                detail = top.title
        out.append(Rung(raw["name"], raw["title"], state, detail,
                        evidence=evidence or [Evidence("probe", raw["detail"])], seconds=raw.get("seconds")))
    if failed_at is not None and top is not None:
        for f in findings:
            number = probe_rung_number(f)
            if f is not top and f.explained_by is None and number is not None and number > failed_at:
                f.explained_by = top.rule
    return out, top


def build(findings: List[Finding], view: Dict[str, Any], peer: Optional[str], lang: Optional[str] = None) -> Ladders:
    host_rungs = host(findings, view, peer, lang)    # first: it folds findings of skipped rungs
    probe_rungs, top = probe(findings, view)
    return Ladders(host_rungs, probe_rungs, top)
