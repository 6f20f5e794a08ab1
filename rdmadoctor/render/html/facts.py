"""The host's facts as tables: what each collector could read, then one or more tables per section, in the
order of SECTION_TABLES."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from rdmadoctor.render.html.values import _d, _l, _s, human_bytes

Table = Dict[str, Any]


def _cell(text: Any, cls: str = "") -> Dict[str, str]:
    return {"text": _s(text), "cls": cls}


def _state_cls(value: Any, good: Iterable[str], bad: Iterable[str] = ()) -> str:
    v = _s(value).upper()
    if v in {g.upper() for g in good}:
        return "good"
    if v in {b.upper() for b in bad} or (bad == () and v):
        return "bad"
    return ""


def _table(tid: str, title: str, columns: Sequence[str], rows: List[List[Any]], note: str = "") -> Table:
    return {"id": tid, "title": title, "columns": list(columns),
            "rows": [[c if isinstance(c, dict) else _cell(c) for c in row] for row in rows], "note": note}


def facts_view(facts: Any) -> Optional[Dict[str, Any]]:
    facts = _d(facts)
    if not facts:
        return None
    host = _d(facts.get("host"))
    sections = _d(facts.get("sections"))
    tables = [_sections_table(sections)]
    for name, tables_of in SECTION_TABLES:
        tables += tables_of(_d(_d(sections.get(name)).get("data")))
    host_rows = [[k.replace("_", " "), _s(v)] for k, v in host.items() if v is not None and v != ""]
    return {"host": host_rows, "hostname": _s(host.get("hostname")), "tables": tables}


def _sections_table(sections: Dict[str, Any]) -> Table:
    """Each section's status, source and time, and what it could not read."""
    rows = []
    for name, sec in sections.items():
        sec = _d(sec)
        status = _s(sec.get("status")) or "?"
        why = [_s(sec.get("reason"))] if sec.get("reason") else []
        why += [f"{_s(_d(u).get('what'))}: {_s(_d(u).get('why'))}" for u in _l(sec.get("unreadable"))]
        rows.append([name, _cell(status, {"ok": "good", "partial": "warn", "unavailable": "bad"}.get(status, "")),
                     _s(sec.get("source")), "" if sec.get("seconds") is None else f"{_s(sec.get('seconds'))} s",
                     "; ".join(w for w in why if w)])
    return _table("facts-sections", "What was read", ["section", "status", "source", "time", "why not all"], rows)


def _devices(data: Dict[str, Any]) -> List[Table]:
    devs = [_d(d) for d in _l(data.get("devices"))]
    if not devs:
        return []
    tables = [_table("facts-devices", "RDMA devices",
                     ["device", "driver", "transport", "node GUID", "firmware", "netdevs", "ports", "source"],
                     [[d.get("name"), d.get("driver"), d.get("transport"), d.get("node_guid"), d.get("fw_ver"),
                       _s(d.get("netdevs")), len(_l(d.get("ports"))), d.get("source")] for d in devs])]
    ports = [(d, p) for d in devs for p in (_d(x) for x in _l(d.get("ports")))]
    port_rows = [_port_row(d, p) for d, p in ports]
    gid_rows = [[f"{_s(d.get('name'))}/{_s(p.get('port'))}", g.get("index"), g.get("gid"), g.get("type"),
                 g.get("netdev"), g.get("ipv4")] for d, p in ports for g in (_d(x) for x in _l(p.get("gids")))]
    if port_rows:
        tables.append(_table("facts-ports", "Ports", ["port", "state", "physical", "link layer", "rate",
                                                      "MTU active / max", "netdev", "LID / SM LID"], port_rows))
    if gid_rows:
        tables.append(_table("facts-gids", "GIDs", ["port", "index", "GID", "type", "netdev", "IPv4"], gid_rows))
    return tables


def _port_row(d: Dict[str, Any], p: Dict[str, Any]) -> List[Any]:
    mtu = _s(p.get("active_mtu"))
    if p.get("max_mtu") is not None:
        mtu += f" / {_s(p.get('max_mtu'))}"
    netdev = _s(p.get("netdev"))
    if p.get("netdev_mtu") is not None:
        netdev += f" (MTU {_s(p.get('netdev_mtu'))})"
    return [f"{_s(d.get('name'))}/{_s(p.get('port'))}",
            _cell(p.get("state"), _state_cls(p.get("state"), ["ACTIVE"])),
            _cell(p.get("phys_state"), _state_cls(p.get("phys_state"), ["LinkUp"])),
            p.get("link_layer"), p.get("rate"), mtu, netdev,
            f"{_s(p.get('lid'))} / {_s(p.get('sm_lid'))}" if p.get("lid") is not None else ""]


def _network(net: Dict[str, Any]) -> List[Table]:
    """Interfaces with their addresses, routes, and the path to the peer."""
    tables = []
    links = [_d(x) for x in _l(net.get("links"))]
    if links:
        addrs: Dict[str, List[str]] = {}
        for a in (_d(x) for x in _l(net.get("addresses"))):
            addrs.setdefault(_s(a.get("ifname")), []).append(
                f"{_s(a.get('address'))}/{_s(a.get('prefixlen'))}" if a.get("prefixlen") is not None
                else _s(a.get("address")))
        tables.append(_table("facts-netdevs", "Network interfaces",
                             ["netdev", "state", "carrier", "MTU", "kind", "master", "MAC", "addresses"],
                             [[x.get("ifname"),
                               _cell(x.get("operstate"), _state_cls(x.get("operstate"), ["UP", "UNKNOWN"])),
                               x.get("carrier"), x.get("mtu"), x.get("kind"), x.get("master"), x.get("address"),
                               ", ".join(addrs.get(_s(x.get("ifname")), []))] for x in links]))
    routes = [_d(x) for x in _l(net.get("routes"))]
    if routes:
        tables.append(_table("facts-routes", "Routes", ["destination", "gateway", "dev", "source", "type", "proto",
                                                        "metric"],
                             [[r.get("dst") or "default", r.get("gateway"), r.get("ifname"), r.get("prefsrc"),
                               r.get("type"), r.get("proto"), r.get("metric")] for r in routes]))
    peer = _d(net.get("peer"))
    if peer:
        tables.append(_peer_table(peer))
    return tables


def _peer_table(peer: Dict[str, Any]) -> Table:
    route, neigh = _d(peer.get("route")), _d(peer.get("neighbour"))
    return _table("facts-peer", "Path to the peer", ["peer", "leaves through", "source address", "gateway",
                                                     "neighbour", "error"],
                  [[peer.get("address"), route.get("ifname"), route.get("src"), route.get("gateway"),
                    _cell(neigh.get("state"), _state_cls(neigh.get("state"), ["reachable", "permanent",
                                                                              "stale", "delay"], ())
                          if neigh.get("state") else ""),
                    _cell(route.get("error"), "bad" if route.get("error") else "")]])


def _firewall(fw: Dict[str, Any]) -> List[Table]:
    if not fw:
        return []
    verdicts = [_d(v) for v in _l(fw.get("verdicts"))]
    note = f"backend: {_s(fw.get('backend')) or 'none'}"
    if fw.get("tables"):
        note += f"; tables: {_s(fw.get('tables'))}"
    if fw.get("rules_seen") is not None:
        note += f"; {_s(fw.get('rules_seen'))} rule(s) read"
    return [_table("facts-firewall", "Firewall verdicts", ["traffic", "from / to", "purpose", "verdict", "why"],
                   [[f"{_s(v.get('proto'))}/{_s(v.get('port'))}" + (" out" if v.get("direction") == "out" else " in"),
                     (f"to {_s(v.get('dst')) or 'any'}" if v.get("direction") == "out" else
                      f"from {_s(v.get('src')) or 'any'}"), v.get("purpose"),
                     _cell(v.get("verdict"), {"accept": "good", "drop": "bad", "reject": "bad"}
                           .get(_s(v.get("verdict")), "warn")), v.get("why") or v.get("rule")]
                    for v in verdicts], note)]


def _limits(lim: Dict[str, Any]) -> List[Table]:
    if not lim:
        return []
    rows: List[List[Any]] = []
    memlock = _d(lim.get("memlock"))
    if memlock:
        rows.append(["locked memory (memlock)", f"soft {human_bytes(memlock.get('soft'))}, hard "
                                                f"{human_bytes(memlock.get('hard'))}"])
    for key in ("cap_ipc_lock", "cap_net_admin", "cap_syslog"):
        if key in lim:
            rows.append([key.upper(), lim.get(key)])
    if lim.get("systemd_default_memlock") is not None:
        rows.append(["systemd DefaultLimitMEMLOCK", lim.get("systemd_default_memlock")])
    for entry in _l(lim.get("limits_conf")):
        rows.append(["limits.conf", _s(entry)])
    return [_table("facts-limits", "Limits", ["limit", "value"], rows)]


def _command(argv: Any) -> str:
    return " ".join(_s(a) for a in _l(argv))


def _listeners(ports: Dict[str, Any]) -> List[Table]:
    if not ports:
        return []
    rows = [[f"tcp {_s(t.get('ip'))}:{_s(t.get('port'))}", t.get("process"), t.get("pid"), t.get("user"),
             _command(t.get("cmdline"))] for t in (_d(x) for x in _l(ports.get("tcp_listeners")))]
    rows += [["rdma_cm id", _s(_d(c).get("process")), _s(_d(c).get("pid")), "", _s(c)]
             for c in _l(ports.get("cm_ids"))]
    rows += [["uses RDMA", p.get("process"), p.get("pid"), p.get("user"), _command(p.get("cmdline"))]
             for p in (_d(x) for x in _l(ports.get("rdma_processes")))]
    return [_table("facts-listeners", "Listeners and RDMA processes", ["what", "process", "pid", "user", "command"],
                   rows, "; ".join(_s(n) for n in _l(ports.get("notes"))))]


def _kernel(kern: Dict[str, Any]) -> List[Table]:
    """RDMA modules, the /dev/infiniband nodes, the kernel log's RDMA lines."""
    if not kern:
        return []
    rows = [[name, _cell("loaded" if loaded else "not loaded", "good" if loaded else "")]
            for name, loaded in _d(kern.get("rdma_modules")).items()]
    tables = [_table("facts-modules", "Kernel modules", ["module", "state"], rows,
                     f"kernel {_s(kern.get('release'))}" if kern.get("release") else "")]
    devnodes = [_d(x) for x in _l(kern.get("dev_infiniband"))]
    if devnodes:
        tables.append(_table("facts-devnodes", "/dev/infiniband", ["path", "mode", "readable", "writable"],
                             [[x.get("path"), x.get("mode"),
                               _cell(x.get("readable"), "" if x.get("readable") else "bad"),
                               _cell(x.get("writable"), "" if x.get("writable") else "bad")] for x in devnodes]))
    log = _d(kern.get("log"))
    lines = [_d(x) for x in _l(log.get("lines"))]
    if lines:
        tables.append(_table("facts-kmsg", "Kernel log (RDMA lines)", ["time", "level", "message"],
                             [[f"{x['ts']:.3f}" if isinstance(x.get("ts"), (int, float)) else x.get("ts"),
                               _cell(x.get("level"), _level_cls(x.get("level"))), x.get("text")]
                              for x in lines], f"from {_s(log.get('source'))}" if log.get("source") else ""))
    return tables


def _level_cls(level: Any) -> str:
    return {"err": "bad", "crit": "bad", "alert": "bad", "emerg": "bad", "warning": "warn"}.get(level, "") \
        if isinstance(level, str) else ""


def _pci(pci: Dict[str, Any]) -> List[Table]:
    pdevs = [_d(x) for x in _l(pci.get("devices"))]
    if not pdevs:
        return []
    rows = []
    for p in pdevs:
        speed = f"{_s(p.get('current_link_speed'))} (max {_s(p.get('max_link_speed'))})"
        width = f"x{_s(p.get('current_width'))} (max x{_s(p.get('max_width'))})"
        cls = "bad" if _below(p, "current_gts", "max_gts") or _below(p, "current_width", "max_width") else ""
        rows.append([p.get("device"), p.get("bdf"), _cell(speed, cls), _cell(width, cls), p.get("numa_node")])
    return [_table("facts-pci", "PCIe links", ["device", "address", "speed", "width", "NUMA node"], rows)]


def _below(p: Dict[str, Any], current: str, most: str) -> bool:
    """A PCIe link trained below what it can do."""
    return p.get(current) is not None and p.get(most) is not None and p[current] < p[most]


def _versions(ver: Dict[str, Any]) -> List[Table]:
    if not ver:
        return []
    rows = [[k.replace("_", " "), v] for k, v in ver.items() if not isinstance(v, dict)]
    rows += [[f"{k} (tool)", v] for k, v in _d(ver.get("tools")).items()]
    return [_table("facts-versions", "Versions", ["component", "version"], rows)]


def _qos(qos: Dict[str, Any]) -> List[Table]:
    links = [_d(x) for x in _l(qos.get("links"))]
    if not links:
        return []
    rows = []
    for q in links:
        pfc = _d(q.get("pfc"))
        pause = _d(q.get("pause"))
        rows.append([q.get("netdev"),
                     "not read" if not pfc else (", ".join(_s(p) for p in _l(pfc.get("enabled"))) or "none"),
                     "not read" if not pause else f"rx {'on' if pause.get('rx') else 'off'}, "
                                                  f"tx {'on' if pause.get('tx') else 'off'}",
                     _s(q.get("trust")) or "not read"])
    return [_table("facts-qos", "Lossless Ethernet (PFC, pause, trust)", ["netdev", "PFC priorities", "pause",
                                                                          "trust"], rows)]


TablesOf = Callable[[Dict[str, Any]], List[Table]]
# (section, its tables), in the order the report shows them
SECTION_TABLES: Sequence[Tuple[str, TablesOf]] = (
    ("devices", _devices), ("netlink", _network), ("firewall", _firewall), ("limits", _limits),
    ("ports", _listeners), ("kernel", _kernel), ("pci", _pci), ("qos", _qos), ("versions", _versions),
)
