"""What should be the same on every node of a fleet, read from each node's facts, and the nodes that differ.

A fleet is healthy when its nodes agree: the same firmware, driver, kernel, rdma-core and perftest; the same MTU,
GID type and index, link rate; PCIe links at the same width and speed; the same memlock limit; the same PFC and
trust settings. One node that differs is where a pairwise failure, a slow collective or a flaky job comes from,
and no single-host check can see it: only the comparison can.

    attrs = attributes(facts)          # {"firmware": "28.39.1002", "netdev_mtu": "9000", ...}; None = not read
    rows = compare({node: attrs})      # one row per attribute that differs, the odd nodes named
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Mapping, Optional

from rdmadoctor.fleet.nodeset import fold

# attribute -> label, in the order reports show them
ATTRIBUTES: Dict[str, str] = {
    "firmware": "Firmware",
    "driver": "Driver",
    "kernel": "Kernel",
    "os": "OS",
    "rdma_core": "rdma-core",
    "perftest": "perftest",
    "netdev_mtu": "MTU (netdev)",
    "active_mtu": "MTU (RDMA, active)",
    "gid": "GID index and type",
    "link_rate": "Link rate",
    "pcie": "PCIe speed and width",
    "memlock": "memlock (soft)",
    "pfc": "PFC priorities",
    "trust": "Trust",
}


def _data(facts: Mapping[str, Any], name: str) -> Dict[str, Any]:
    section = (facts.get("sections") or {}).get(name) or {}
    if section.get("status") not in ("ok", "partial"):
        return {}
    return section.get("data") or {}


def _join(values: List[Any]) -> Optional[str]:
    """Several ports or devices: their distinct values, sorted, so that two nodes compare equal when they hold
    the same set whatever the order the kernel listed them in."""
    seen = sorted({str(v) for v in values if v is not None and v != ""})
    return ", ".join(seen) if seen else None


def _bytes(value: Any) -> Optional[str]:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value < 0 or value >= 1 << 62:
        return "unlimited"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor and value % factor == 0:
            return f"{value // factor} {unit}"
    return f"{value} B"


def _rate(gbps: Any) -> Optional[str]:
    if not isinstance(gbps, (int, float)) or isinstance(gbps, bool) or gbps <= 0:
        return None
    return f"{gbps:g} Gb/s"


def _ports(devices: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [p for d in devices for p in (d.get("ports") or []) if isinstance(p, dict)]


def _active(ports: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The ports that carry traffic; a node with none shows its other ports (a down port is then its value)."""
    up = [p for p in ports if p.get("state") == "ACTIVE"]
    return up or ports


def _gid(port: Dict[str, Any]) -> Optional[str]:
    if port.get("link_layer") == "InfiniBand":
        return "InfiniBand (LID)"
    v4 = [g for g in (port.get("gids") or []) if isinstance(g, dict) and g.get("ipv4")]
    v2 = [g for g in v4 if g.get("type") == "RoCE v2"]
    chosen = (v2 or v4)[:1]
    if not chosen:
        return "no IPv4 GID" if port.get("gids") else None
    return f"{chosen[0].get('index')} ({chosen[0].get('type') or '?'})"


def attributes(facts: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    """One value per attribute (None: not read on this node), as text, comparable across nodes."""
    host = facts.get("host") or {}
    versions = _data(facts, "versions")
    devices = [d for d in (_data(facts, "devices").get("devices") or []) if isinstance(d, dict)]
    ports = _active(_ports(devices))
    links = {link.get("ifname"): link for link in (_data(facts, "netlink").get("links") or [])
             if isinstance(link, dict)}
    limits = _data(facts, "limits")
    pci = [p for p in (_data(facts, "pci").get("devices") or []) if isinstance(p, dict)]
    qos = [q for q in (_data(facts, "qos").get("links") or []) if isinstance(q, dict)]

    memlock = limits.get("memlock") if isinstance(limits.get("memlock"), dict) else {}
    if memlock and "soft" in memlock:
        limit = "unlimited" if memlock.get("soft") is None else _bytes(memlock.get("soft"))
        if limit and limit != "unlimited" and (limits.get("cap_ipc_lock") or host.get("is_root")):
            limit += " (exempt: CAP_IPC_LOCK)"
    else:
        limit = None

    def netdev_mtu(p: Dict[str, Any]) -> Any:
        return (links.get(p.get("netdev")) or {}).get("mtu") or p.get("netdev_mtu")

    pfc = []
    for q in qos:
        state = q.get("pfc")
        if isinstance(state, dict):
            prios = state.get("enabled") or []
            pfc.append(",".join(str(p) for p in prios) if prios else "off")
    return {
        "firmware": _join([d.get("fw_ver") for d in devices]),
        "driver": _join([d.get("driver") for d in devices]),
        "kernel": host.get("kernel") or versions.get("kernel"),
        "os": versions.get("os") or host.get("os"),
        "rdma_core": versions.get("rdma_core"),
        "perftest": versions.get("perftest") or ((versions.get("tools") or {}).get("ib_write_bw")),
        "netdev_mtu": _join([netdev_mtu(p) for p in ports if p.get("link_layer") == "Ethernet"]),
        "active_mtu": _join([p.get("active_mtu") for p in ports]),
        "gid": _join([_gid(p) for p in ports]),
        "link_rate": _join([_rate(p.get("rate_gbps")) for p in ports]),
        "pcie": _join([f"{p.get('current_link_speed')} x{p.get('current_width') or p.get('current_link_width')}"
                       for p in pci if p.get("current_link_speed")]),
        "memlock": limit,
        "pfc": _join(pfc),
        "trust": _join([q.get("trust") for q in qos]),
    }


def rdma_address(facts: Mapping[str, Any]) -> Optional[str]:
    """The node's one IPv4 address on an RDMA port (the address its agent binds by default): what a peer
    probes. None when there is none or several."""
    devices = [d for d in (_data(facts, "devices").get("devices") or []) if isinstance(d, dict)]
    found = []
    for p in _active(_ports(devices)):
        for g in p.get("gids") or []:
            if isinstance(g, dict) and g.get("ipv4") and g["ipv4"] not in found:
                found.append(g["ipv4"])
    return found[0] if len(found) == 1 else None


def compare(by_node: Mapping[str, Mapping[str, Optional[str]]]) -> List[Dict[str, Any]]:
    """Every attribute on which the nodes that reported it disagree: its values, most common first, each with
    its nodes folded (node[001-007]); the nodes outside the most common value are the odd ones. An attribute
    some nodes did not report but all others agree on is listed too, since "not read" is not "the same"."""
    rows = []
    for name, label in ATTRIBUTES.items():
        values: Dict[str, List[str]] = {}
        unknown: List[str] = []
        for node, attrs in by_node.items():
            value = attrs.get(name)
            if value is None:
                unknown.append(node)
            else:
                values.setdefault(value, []).append(node)
        if len(values) <= 1 and not (values and unknown):
            continue
        counts = Counter({v: len(n) for v, n in values.items()})
        ordered = sorted(values, key=lambda v: (-counts[v], v))
        majority = ordered[0] if ordered and (len(ordered) == 1 or counts[ordered[0]] > counts[ordered[1]]) else None
        odd = [n for v in ordered if v != majority for n in values[v]] if majority is not None else []
        rows.append({
            "attribute": name, "label": label, "majority": majority,
            "values": [{"value": v, "count": counts[v], "nodes": fold(values[v])} for v in ordered],
            "odd": fold(odd), "odd_count": len(odd),
            "unknown": fold(unknown), "unknown_count": len(unknown),
        })
    return rows
