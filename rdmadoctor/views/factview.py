"""Facts (as the collectors wrote them) -> the flat view the fact rules read.

The collectors' document mirrors the subsystems (devices with ports with GIDs; links; addresses...).
Rules ask questions across them ("the netdev under this RoCE port is down", "the route to the peer
does not leave through an RDMA netdev"), so this joins them once, here, into lists of items that a
rule can iterate with `each = "ports"`. Nothing here judges: it only joins and derives.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, List, Optional, Set, Union

from rdmadoctor.knowledge import perftest
from rdmadoctor.runtime.net import same_address
from rdmadoctor.views import perftest_procs

# What a rule may know of a process listening on a port: never its command line (a password given on it
# would end up in a report), and on a peer only the program's name (the agent tells no more).
LISTENER_FIELDS = ("port", "ip", "family", "process", "pid", "user")


def memlock_below(soft: Optional[int], exempt: bool, need: int) -> bool:
    """Registering `need` bytes would hit the limit: it is known, it applies (neither root nor
    CAP_IPC_LOCK) and it is smaller."""
    return not exempt and soft is not None and soft < need
_CHAIN = re.compile(r"(?:^|at )((?:inet|ip6?|netdev|bridge|arp) \S+ \S+) handle \d+")
# Soft-RoCE / soft-iWARP log an application's QP errors (e.g. rxe's "make_send_cqe ... status = 13"):
# those are not a device or firmware fault.
_SOFTWARE_DRIVER = re.compile(r"\b(?:rdma_rxe|rxe\d*|siw\d*)\b|\brxe_|\bsiw_", re.IGNORECASE)
PCI_SPEED = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
PROVIDER_MODULES = ("mlx5_ib", "mlx4_ib", "irdma", "i40iw", "bnxt_re", "efa", "qedr", "hns_roce_hw_v2", "erdma",
                    "mana_ib", "rdma_rxe", "siw", "ionic_rdma", "cxgb4_iw", "vmw_pvrdma", "hfi1", "qib", "ocrdma")


def _section(facts: Dict[str, Any], name: str) -> Dict[str, Any]:
    return (facts.get("sections") or {}).get(name) or {"status": "unavailable", "reason": "not collected"}


def _data(facts: Dict[str, Any], name: str) -> Dict[str, Any]:
    section = _section(facts, name)
    return section.get("data") or {} if section.get("status") != "unavailable" else {}


def _pci_generation(speed: Optional[str]) -> Optional[int]:
    if not speed:
        return None
    number = str(speed).split()[0]
    return PCI_SPEED.get(number)


def _width(value: Any) -> Optional[int]:
    try:
        return int(str(value).lstrip("x"))
    except (TypeError, ValueError):
        return None


def _gid_view(g: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not g:
        return None
    return {"index": g.get("index"), "gid": g.get("gid"), "type": g.get("type"), "netdev": g.get("netdev"),
            "ipv4": g.get("ipv4"), "link_local": str(g.get("gid") or "").lower().startswith("fe80")}


def _lossless(q: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The port's netdev's PFC priorities, link-level pause and trust state (None: not read)."""
    q = q or {}
    pfc = q.get("pfc")
    pause = q.get("pause") or {}
    return {"pfc": (pfc or {}).get("enabled") if isinstance(pfc, dict) else None,
            "pause": (bool(pause.get("rx")) or bool(pause.get("tx"))) if pause else None,
            "trust": q.get("trust")}


def build(facts: Dict[str, Any], peer: Optional[str] = None,
          port: int = perftest.DEFAULT_PORT) -> Dict[str, Any]:
    sections = facts.get("sections") or {}
    readable = {name: s.get("status") in ("ok", "partial") for name, s in sections.items()}
    reasons = {name: s.get("reason") for name, s in sections.items() if s.get("status") != "ok"}
    host = facts.get("host") or {}
    devices_data = _data(facts, "devices")
    kernel = _data(facts, "kernel")
    netlink = _data(facts, "netlink")
    limits = _data(facts, "limits")
    firewall = _data(facts, "firewall")
    listeners = _data(facts, "ports")
    pci = _data(facts, "pci")
    qos = {q.get("netdev"): q for q in _data(facts, "qos").get("links") or [] if isinstance(q, dict)}

    links = {link.get("ifname"): link for link in netlink.get("links") or [] if link.get("ifname")}
    ipv4: Dict[Any, List[Any]] = {}
    for a in netlink.get("addresses") or []:
        if a.get("family") == 4:
            ipv4.setdefault(a.get("ifname"), []).append(a.get("address"))

    devices, ports = [], []
    for dev in devices_data.get("devices") or []:
        devices.append({"name": dev.get("name"), "label": dev.get("name"), "driver": dev.get("driver"),
                        "transport": dev.get("transport"), "pci": dev.get("pci"), "numa_node": dev.get("numa_node"),
                        "fw_ver": dev.get("fw_ver"), "verbs_visible": dev.get("verbs_visible", True),
                        "netdevs": dev.get("netdevs") or []})
        for p in dev.get("ports") or []:
            netdev = p.get("netdev")
            link = links.get(netdev) if netdev else None
            gids = p.get("gids") or []
            v4_gids = [g for g in gids if g.get("ipv4")]
            is_roce = p.get("link_layer") == "Ethernet"
            ports.append({
                "label": f"{dev.get('name')} port {p.get('port')}", "device": dev.get("name"),
                "driver": dev.get("driver"), "port": p.get("port"), "state": p.get("state"),
                "states_shown": p.get("states_shown"),
                "phys_state": p.get("phys_state"), "link_layer": p.get("link_layer"), "is_roce": is_roce,
                "is_ib": p.get("link_layer") == "InfiniBand", "active_mtu": p.get("active_mtu"),
                "max_mtu": p.get("max_mtu"), "lid": p.get("lid"), "sm_lid": p.get("sm_lid"),
                "rate": p.get("rate"), "rate_gbps": p.get("rate_gbps"), "netdev": netdev,
                "netdev_known": link is not None,
                "netdev_up": None if link is None or link.get("admin_up") is None else bool(link.get("admin_up")),
                "netdev_oper": None if link is None else link.get("operstate"),
                "netdev_carrier": None if link is None else link.get("carrier"),
                "netdev_mtu": (link or {}).get("mtu") or p.get("netdev_mtu"),
                "netdev_ipv4": ipv4.get(netdev, []) if netdev else [],
                # a paste that lists no GIDs for a port does not show an empty table: None, not 0
                "gid_count": len(gids) if p.get("gids") is not None else None,
                "ipv4_gids": [g.get("gid") for g in v4_gids] if p.get("gids") is not None else None,
                "ipv4_v2_gids": [f"{g.get('index')}: {g.get('gid')}" for g in v4_gids if g.get("type") == "RoCE v2"]
                if p.get("gids") is not None else None,
                "gids": [{"index": g.get("index"), "gid": g.get("gid"), "type": g.get("type"),
                          "netdev": g.get("netdev"), "ipv4": g.get("ipv4"),
                          "link_local": str(g.get("gid") or "").lower().startswith("fe80")}
                         for g in gids] if p.get("gids") is not None else None,
                "named": p.get("named"),
                "gid_selected": _gid_view(p.get("gid_selected")),
                **_lossless(qos.get(netdev)),
                "counter_deltas": p.get("counter_deltas") or {},
                "retries": sum(v for k, v in (p.get("counter_deltas") or {}).items()
                               if isinstance(v, (int, float)) and any(w in k for w in ("retry", "timeout", "seq_err",
                                                                                        "out_of_seq"))),
            })

    dev_nodes = kernel.get("dev_infiniband") or []
    uverbs = [n for n in dev_nodes if "uverbs" in str(n.get("path"))]
    rdma_cm = [n for n in dev_nodes if str(n.get("path", "")).endswith("rdma_cm")]
    modules = kernel.get("rdma_modules") or {}
    loaded = set(kernel.get("modules") or [])
    rdma_netdevs = {p["netdev"] for p in ports if p.get("netdev")}

    memlock = (limits.get("memlock") or {})
    soft = memlock.get("soft")
    exempt = bool(limits.get("cap_ipc_lock")) or bool(host.get("is_root"))
    view: Dict[str, Any] = {
        "readable": readable,
        "reasons": reasons,
        "host": host,
        "is_root": bool(host.get("is_root")),
        "rdma": {
            "subsystem": devices_data.get("rdma_subsystem"),
            "device_count": len(devices),
            # "not set" only when the kernel's config was read and lacks the option
            "kernel_config": ((kernel.get("config") or {}).get("CONFIG_INFINIBAND")
                              or ("not set" if kernel.get("config_source") else None)),
            "kernel_config_source": kernel.get("config_source"),
            "modules_supported": kernel.get("modules_supported"),
            "modules_known": bool(kernel.get("modules_supported", True)) and readable.get("kernel", False),
            "ib_core": bool(modules.get("ib_core")) or bool(devices_data.get("rdma_subsystem")),
            "ib_uverbs": bool(modules.get("ib_uverbs")),
            "rdma_ucm": bool(modules.get("rdma_ucm")),
            "providers_loaded": sorted(m for m in PROVIDER_MODULES if m in loaded),
            "pyverbs": (devices_data.get("pyverbs") or {}).get("available"),
            "netns_mode": kernel.get("rdma_netns_mode"),
            "soft_roce": any(d.get("driver") in ("rxe", "rdma_rxe", "siw") for d in devices),
            # ports in state ACTIVE; None when no port's state is known (a paste that lists none)
            "active_ports": (sum(1 for p in ports if p.get("state") == "ACTIVE")
                             if any(p.get("state") for p in ports) else None),
            # ports ACTIVE, or of unknown state with their netdev UP (ibdev2netdev shows only the netdev's link);
            # None when neither is known for any port
            "usable_ports": (sum(1 for p in ports if p.get("state") == "ACTIVE"
                                 or (not p.get("state") and p.get("netdev_oper") == "UP"))
                             if any(p.get("state") or p.get("netdev_oper") for p in ports) else None),
        },
        "devices": devices,
        "verbs_invisible": [d for d in devices if d.get("verbs_visible") is False],
        "ports": ports,
        "uverbs_nodes": uverbs,
        "uverbs_denied": [n for n in uverbs if not (n.get("readable") and n.get("writable"))],
        "rdma_cm_node": rdma_cm[0] if rdma_cm else None,
        "memlock": {"soft": soft, "hard": memlock.get("hard"), "unlimited": soft is None and "soft" in memlock,
                    "exempt": exempt, "known": "soft" in memlock,
                    "below_default": memlock_below(soft, exempt, perftest.DEFAULT_PIN),
                    "below_all_sizes": memlock_below(soft, exempt, perftest.ALL_SIZES_PIN),
                    "limits_conf": limits.get("limits_conf") or []},
        "firewall": {},
        "firewall_blocks": [],
        "firewall_egress_blocks": [],
        "listeners": [{k: lst.get(k) for k in LISTENER_FIELDS} for lst in listeners.get("tcp_listeners") or []
                      if isinstance(lst, dict)],
        # the perftest processes (collectors/perftest_procs.py); None when not reported (an older agent)
        "perftest": perftest_procs.described(listeners.get("perftest")),
        "pci": [],
        "kernel_log": [{**line, "software": bool(_SOFTWARE_DRIVER.search(str(line.get("text") or "")))}
                       for line in ((kernel.get("log") or {}).get("lines") or [])
                       if line.get("level") in ("emerg", "alert", "crit", "err", "error", "warning", "warn")],
        "versions": _data(facts, "versions"),
        "netdev_children": _children(links),
        "rdma_subnet_routes": _rdma_subnet_routes(netlink, rdma_netdevs),
        "rdma_arp_flux": _rdma_arp_flux(netlink, rdma_netdevs),
        "rdma_static_neighbours": _rdma_static_neighbours(netlink, rdma_netdevs, peer),
        "rdma_netem": _rdma_netem(netlink, ports),
        "umad_class": _umad_class(kernel.get("umad_class")),
        "peer": None,
    }
    for v in (v for v in firewall.get("verdicts") or [] if isinstance(v, dict)):
        outbound = v.get("direction") == "out"
        key = f"{v.get('proto')}/{v.get('port')}"
        view["firewall"][key + " out" if outbound else key] = v
        if v.get("verdict") == "drop":
            matters = v.get("proto") == "tcp" or view["rdma"]["soft_roce"]
            chain = _CHAIN.search(str(v.get("rule") or ""))
            view["firewall_egress_blocks" if outbound else "firewall_blocks"].append(
                {**v, "label": key, "matters": matters, "chain": chain.group(1) if chain else None,
                 "allow": _allow(v, chain.group(1) if chain else None, outbound)})
    # the schema cannot type these lists' items (no recorded host had a PCI device): a peer may send anything
    for d in (d for d in pci.get("devices") or [] if isinstance(d, dict)):
        cur_gen, max_gen = _pci_generation(d.get("current_link_speed")), _pci_generation(d.get("max_link_speed"))
        cur_w, max_w = _width(d.get("current_link_width")), _width(d.get("max_link_width"))
        view["pci"].append({**d, "label": f"{d.get('device')} ({d.get('bdf')})",
                            "degraded": bool((cur_gen and max_gen and cur_gen < max_gen) or
                                             (cur_w and max_w and cur_w < max_w))})
    peer_data = netlink.get("peer")
    if peer_data or peer:
        route = (peer_data or {}).get("route") or {}
        view["peer"] = {
            "address": (peer_data or {}).get("address") or peer, "route_ifname": route.get("ifname"),
            "route_src": route.get("src"), "route_gateway": route.get("gateway"), "route_error": route.get("error"),
            "route_type": route.get("type"), "is_local": route.get("type") == "local",
            "via_rdma_netdev": route.get("ifname") in rdma_netdevs if route.get("ifname") else None,
            "rdma_netdevs": sorted(rdma_netdevs),
            "neighbour": ((peer_data or {}).get("neighbour") or {}).get("state"),
        }
    # check --peer: view["probe"], view["remote"], view["pair"] from the probe's facts sections
    from rdmadoctor.views import probeview as probe_view
    probe_view.extend(view, facts, build)
    return view


# an iptables-legacy rule as collectors/nfteval.py labels it: "iptables-legacy ip filter INPUT rule 1"
_LEGACY_CHAIN = re.compile(r"(ip6?tables-legacy) ip6? (\S+) (\S+)")


def _allow(verdict: Dict[str, Any], chain: Optional[str], outbound: bool) -> str:
    """The command that lets the packet through ahead of the rule that drops it, in the tool of that rule's ruleset:
    an nft rule does not reach a table of iptables-legacy (x_tables), nor the other way round. A packet asked about
    from one source (check --peer: the peer's address here, this host's on the peer) is let in from that source
    only; a source that is not an address (a peer's agent may send anything) is left out."""
    proto, port = verdict.get("proto"), verdict.get("port")
    source = _address(verdict.get("src")) if not outbound else None
    legacy = _LEGACY_CHAIN.search(str(verdict.get("rule") or ""))
    if legacy:
        tool, table, name = legacy.groups()
        return " ".join([tool, *(["-t", table] if table != "filter" else []), "-I", name,
                         *(["-s", str(source)] if source else []), "-p", str(proto), "--dport", str(port),
                         "-j", "ACCEPT"])
    chain = chain or ("inet filter output" if outbound else "inet filter input")
    match = f"{'ip6' if source.version == 6 else 'ip'} saddr {source} " if source else ""
    return f"nft insert rule {chain} {match}{proto} dport {port} accept"


def _address(value: Any) -> Optional[Union[ipaddress.IPv4Address, ipaddress.IPv6Address]]:
    try:
        return ipaddress.ip_address(str(value)) if value else None
    except ValueError:
        return None


def _rdma_subnet_routes(netlink: Dict[str, Any], rdma_netdevs: Set[str]) -> List[Dict[str, Any]]:
    """The main table's routes that take part of an RDMA netdev's own subnet through a netdev with no RDMA port: the
    longest prefix wins, so rdma_cm resolves those peers to that netdev (ADDR_ERROR, no device) and perftest's side
    channel and a RoCE QP's neighbour lookup leave through it. A route through another RDMA netdev (one NIC per rail
    in one subnet) is not one of them; a saved facts file is read as it comes."""
    subnets = list(_rdma_subnets(netlink, rdma_netdevs))
    out = []
    for r in netlink.get("routes") or []:
        if not isinstance(r, dict) or r.get("type") != "unicast" or r.get("ifname") in rdma_netdevs \
                or not isinstance(r.get("ifname"), str):
            continue
        try:
            dst = ipaddress.ip_network(str(r.get("dst")), strict=False)
        except ValueError:
            continue            # "default" and anything unreadable: never more specific than a subnet
        for subnet, a in subnets:
            if dst.version == subnet.version and dst.prefixlen > subnet.prefixlen and dst.network_address in subnet:
                out.append({"label": f"{dst} dev {r['ifname']}", "dst": str(dst), "ifname": r["ifname"],
                            "gateway": r.get("gateway"), "proto": r.get("proto"), "subnet": str(subnet),
                            "rdma_netdev": a.get("ifname"), "address": a.get("address")})
                break
    return out


def _rdma_subnets(netlink: Dict[str, Any], rdma_netdevs: Set[str], family: Optional[int] = None):
    """(subnet, address entry) of each global address an RDMA netdev holds (of one IP version, when asked)."""
    for a in netlink.get("addresses") or []:
        if not isinstance(a, dict) or a.get("ifname") not in rdma_netdevs or a.get("scope") not in ("universe", 0):
            continue
        try:
            subnet = ipaddress.ip_interface(f"{a.get('address')}/{a.get('prefixlen')}").network
        except (ValueError, TypeError):
            continue
        if family is None or subnet.version == family:
            yield subnet, a


_NETEM_EFFECTS = (("loss_pct", "loses {}% of packets"), ("corrupt_pct", "corrupts {}% of packets"),
                  ("duplicate_pct", "duplicates {}% of packets"), ("reorder_pct", "reorders {}% of packets"))


def _rdma_netem(netlink: Dict[str, Any], ports: List[Dict[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """The netem qdiscs on RDMA netdevs (collectors/tc.py), each with what it does to the packets that pass it and
    whether the netdev carries Soft-RoCE (rxe, siw: their RDMA packets go through the netdev's qdiscs; a hardware
    NIC's bypass them, and only TCP side channels meet the qdisc). None when the qdiscs were not read."""
    qdiscs = netlink.get("qdiscs")
    if not isinstance(qdiscs, list):
        return None
    soft = {p["netdev"]: p.get("driver") in SOFTWARE_DRIVERS for p in ports if p.get("netdev")}
    out = []
    for q in qdiscs:
        raw = q.get("netem") if isinstance(q, dict) else None
        if not isinstance(raw, dict) or q.get("ifname") not in soft:
            continue
        # (a field that is not a positive number, as a peer's agent could send, is left out)
        effects = {k: v for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0}
        does = [text.format(_number(effects[key])) for key, text in _NETEM_EFFECTS if key in effects]
        if raw.get("loss_model") is True:
            does.append("loses packets by a loss model")
        if "delay_ms" in effects:
            jitter = f" ± {_number(effects['jitter_ms'])} ms" if "jitter_ms" in effects else ""
            # "loses 5% of packets, delays each by 300 ms"; alone: "delays each packet by 300 ms"
            does.append(f"delays each {'' if does else 'packet '}by {_number(effects['delay_ms'])} ms{jitter}")
        if "rate_bytes_per_s" in effects:
            does.append(f"limits the rate to {effects['rate_bytes_per_s'] * 8 / 1e6:g} Mbit/s")
        if not does:
            continue            # a netem that changes nothing (left at its defaults)
        out.append({"label": str(q["ifname"]), "netdev": q["ifname"], "soft_roce": soft[q["ifname"]],
                    "root": q.get("root"), "handle": q.get("handle"), "does": ", ".join(does),
                    "drops": "loss_pct" in effects or "corrupt_pct" in effects or raw.get("loss_model") is True,
                    **{k: effects.get(k) for k in ("loss_pct", "corrupt_pct", "duplicate_pct", "reorder_pct",
                                                   "delay_ms", "jitter_ms", "rate_bytes_per_s")}})
    return out


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _rdma_static_neighbours(netlink: Dict[str, Any], rdma_netdevs: Set[str],
                            peer: Optional[str]) -> List[Dict[str, Any]]:
    """The unicast neighbour entries of an RDMA netdev that were set by hand (`ip neigh ... nud permanent`, `arp -s`):
    the kernel never resolves them again, so a MAC that is not (or no longer) the host's sends that host's TCP and RoCE
    frames elsewhere. Multicast and broadcast entries (noarp) are the kernel's own and are not listed; nor is a
    gateway's, which sites pin on purpose (against ARP spoofing) and which no RDMA peer on the subnet goes through."""
    gateways = {str(r.get("gateway")) for r in netlink.get("routes") or [] if isinstance(r, dict) and r.get("gateway")}
    out = []
    for n in netlink.get("neighbours") or []:
        if not isinstance(n, dict) or n.get("state") != "permanent" or n.get("ifname") not in rdma_netdevs \
                or any(same_address(str(n.get("dst")), g) for g in gateways):
            continue
        try:
            dst = ipaddress.ip_address(str(n.get("dst")))
        except ValueError:
            continue
        if dst.is_multicast or dst.is_unspecified:
            continue
        out.append({"label": f"{dst} lladdr {n.get('lladdr')} dev {n['ifname']}", "dst": str(dst),
                    "lladdr": n.get("lladdr"), "ifname": n["ifname"],
                    "is_peer": bool(peer) and same_address(str(dst), str(peer))})
    return out


def _rdma_arp_flux(netlink: Dict[str, Any], rdma_netdevs: Set[str]) -> List[Dict[str, Any]]:
    """The IPv4 subnets where two or more RDMA netdevs hold an address and one of them answers ARP for every address of
    the host (net.ipv4.conf arp_ignore 0 for it and for "all": the kernel takes the larger of the two): a peer's
    rdma_cm and neighbour lookup may learn the other port's MAC for an address, and its traffic reaches the wrong port.
    A subnet where a value could not be read is not listed."""
    arp = netlink.get("arp_ignore")
    if not isinstance(arp, dict):
        return []
    by_subnet: Dict[Any, Dict[str, str]] = {}
    for subnet, a in _rdma_subnets(netlink, rdma_netdevs, 4):
        by_subnet.setdefault(subnet, {}).setdefault(a["ifname"], str(a.get("address")))
    out = []
    for subnet, held in by_subnet.items():
        if len(held) < 2:
            continue
        values = [arp.get("all"), *(arp.get(name) for name in held)]
        if not all(isinstance(v, int) for v in values):
            continue
        answering = sorted(name for name in held if max(arp["all"], arp[name]) == 0)
        if answering:
            out.append({"label": str(subnet), "subnet": str(subnet), "arp_ignore_all": arp["all"],
                        "netdevs": ", ".join(f"{name} ({held[name]})" for name in sorted(held)),
                        "answering": ", ".join(answering)})
    return out


def _children(links: Dict[Any, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The interfaces on a lower device of this host (`ip link` prints them "ib0.8001@ib0"), each with its parent's
    MTU and link type, so a rule can compare the two."""
    out = []
    for name, link in links.items():
        # a saved facts file is read as it comes: a parent that is no interface name names none
        parent_name = link.get("parent")
        parent = links.get(parent_name) if isinstance(parent_name, str) and parent_name != name else None
        if parent is None:
            continue
        mtu, parent_mtu = link.get("mtu"), parent.get("mtu")
        above = isinstance(mtu, int) and isinstance(parent_mtu, int) and mtu > parent_mtu
        out.append({"label": f"{name} (on {parent.get('ifname')})", "ifname": name, "parent": parent.get("ifname"),
                    "mtu": mtu, "parent_mtu": parent_mtu, "mtu_above_parent": above, "link_type": link.get("link_type"),
                    "parent_link_type": parent.get("link_type"),
                    "ipoib": "infiniband" in (link.get("link_type"), parent.get("link_type"))})
    return out


def _umad_class(shown: Any) -> Optional[Dict[str, Any]]:
    """The umad and issm entries of /sys/class/infiniband_mad a paste listed (None: it listed none). A paste may list
    it more than once (before and after a kernel change): the last listing is the state, and `issm_lost` names the
    issm entries an earlier listing showed that the last one lacks while it still shows their port's umad entry.
    A saved facts file is read as it comes: entries that are not such names are left out."""
    def names(listing: Dict[str, Any], kind: str) -> List[str]:
        given = listing.get(kind)
        return [n for n in given if isinstance(n, str) and n.startswith(kind)] if isinstance(given, list) else []

    given = shown.get("listings") if isinstance(shown, dict) else None
    listings = [x for x in given if isinstance(x, dict)] if isinstance(given, list) else []
    if not listings:
        return None
    umad, issm = names(listings[-1], "umad"), names(listings[-1], "issm")
    earlier = {n for x in listings[:-1] for n in names(x, "issm")}
    return {"listings": len(listings), "umad": umad, "issm": issm,
            "umad_without_issm": [u for u in umad if "issm" + u[4:] not in issm],
            "issm_lost": sorted(n for n in earlier if n not in issm and "umad" + n[4:] in umad)}


SOFTWARE_DRIVERS = ("rxe", "rdma_rxe", "siw")


def link_rate_gbps(view: Optional[Dict[str, Any]]) -> Optional[float]:
    """The rate results are judged against: the one rate of this host's active hardware ports. Soft-RoCE and
    soft-iWARP report a nominal rate (rxe says 2.5 Gb/s on any netdev), so they give none; two different
    rates give none either (which port a test used is not known here)."""
    if not view:
        return None
    rates = {p["rate_gbps"] for p in view.get("ports") or []
             if p.get("state") == "ACTIVE" and p.get("driver") not in SOFTWARE_DRIVERS
             and isinstance(p.get("rate_gbps"), (int, float)) and p["rate_gbps"] > 0}
    return rates.pop() if len(rates) == 1 else None

