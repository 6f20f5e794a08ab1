"""The probe's results and the peer's facts, as the flat view the rules in rules/host-peer.toml read.

factview.build() calls extend() last. It adds three keys (each None without a probe or an agent):

    view["probe"]   the ladder's outcomes: rung1..rung7 as words ("passed", "filtered", "unreachable"...),
                    the TCP outcomes, the rdma_cm events, the exchange and the burst, plus the lists rules
                    iterate (tcp_filtered, tcp_rejected) and the rungs themselves (state, detail, seconds)
    view["remote"]  the peer's facts (from its agent) built into the same view as this host's, asked about
                    this host's address (so remote.firewall_blocks are the peer's rules against us)
    view["pair"]    both hosts side by side: MTUs, link layer, GID type, subnet, versions, with `differ`

Nothing here judges a cause; it names what each rung saw, so that rules can.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import DEFAULT_PORT

RUNG_TITLES = {
    1: "Peer 1: local port and address",
    2: "Peer 2: route, peer answers",
    3: "Peer 3: GID type / LID and SM",
    4: "Peer 4: rdma_cm address, route",
    5: "Peer 5: rdma_cm connection",
    6: "Peer 6: WRITE/READ/SEND exchange",
    7: "Peer 7: bandwidth and counters",
}
RUNG_NAMES = {1: "peer-port", 2: "peer-reach", 3: "peer-gid", 4: "peer-cm-resolve", 5: "peer-cm-connect",
              6: "peer-exchange", 7: "peer-bandwidth"}
RETRANSMIT = ("retry", "retrans", "local_ack_timeout", "slow_restart")
# receiver-not-ready NAKs and their retries (rnr_nak_retry_err, retry_rnr_exceeded_err) are the receiver's pace, not
# loss: left out of both lists, as the pasted counters' catalogue (knowledge/messages/counters.toml) leaves them out
NOT_LOSS = ("rnr",)
OUT_OF_SEQUENCE = ("out_of_seq", "seq_err", "out_of_sequence", "implied_nak")
# the responder counts each packet it already had (rxe_resp.c check_psn(), mlx5's duplicate_request): one loss
# answered by a go-back-N resend moves it once per packet of the window resent, so it is shown, not counted as loss
RESENT_PACKETS = ("duplicate_request",)
CNP = ("cnp", "ecn_marked")
SENT_PACKETS = ("sent_pkts", "port_xmit_packets")
LOSS_FRACTION = 0.002
SLOW_FRACTION = 0.5


def _data(facts: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    sec = (facts.get("sections") or {}).get(name)
    if not isinstance(sec, dict) or sec.get("status") not in ("ok", "partial"):
        return None
    data = sec.get("data")
    return data if isinstance(data, dict) else None


def extend(view: Dict[str, Any], facts: Dict[str, Any], build: Callable[..., Dict[str, Any]]) -> None:
    view["probe"] = view["remote"] = view["pair"] = None
    peer = _data(facts, "peer")
    if peer and isinstance(peer.get("facts"), dict) and (peer["facts"].get("sections") is not None):
        remote_facts = peer["facts"]
        asked = (remote_facts.get("host") or {}).get("peer")
        remote = build(remote_facts, asked)
        remote["agent"] = peer.get("agent") or {}
        view["remote"] = remote
        probe_data = _data(facts, "probe") or {}
        view["pair"] = compare(view, facts, remote, remote_facts,
                               local_address=(probe_data.get("source") or {}).get("address"),
                               remote_address=remote["agent"].get("bind"))
    probe = _data(facts, "probe")
    if probe:
        view["probe"] = derive(probe, view)


# -- which port talks to the peer ----------------------------------------------------------------------------

def select_port(view: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The RDMA port whose netdev the route to the peer leaves through; else one with an address; else any."""
    ports = view.get("ports") or []
    route = (view.get("peer") or {}).get("route_ifname")
    for p in ports:
        if route and p.get("netdev") == route:
            return p
    for p in ports:
        if p.get("netdev_ipv4") and p.get("state") == "ACTIVE":
            return p
    for p in ports:
        if p.get("netdev_ipv4"):
            return p
    return ports[0] if ports else None


def gid_type(port: Optional[Dict[str, Any]], address: Optional[str]) -> Optional[str]:
    if not port or not address:
        return None
    if port.get("is_ib"):
        return "IB"
    if any(entry.split(": ", 1)[-1].endswith(":" + address) or entry.endswith(address)
           for entry in port.get("ipv4_v2_gids") or []):
        return "RoCE v2"
    if any(str(g).endswith(address) for g in port.get("ipv4_gids") or []):
        return "RoCE v1"
    return None


def _subnet(facts: Dict[str, Any], address: Optional[str]) -> Optional[str]:
    netlink = _data(facts, "netlink") or {}
    for a in netlink.get("addresses") or []:
        if a.get("address") == address and a.get("prefixlen") is not None:
            try:
                return str(ipaddress.ip_network(f"{address}/{a['prefixlen']}", strict=False))
            except ValueError:
                return None
    return None


def _version_number(text: Any) -> Optional[float]:
    try:
        return float(str(text).split()[0])
    except (TypeError, ValueError, IndexError):
        return None


def compare(view: Dict[str, Any], facts: Dict[str, Any], remote: Dict[str, Any], remote_facts: Dict[str, Any],
            local_address: Optional[str] = None, remote_address: Optional[str] = None) -> Dict[str, Any]:
    """Both hosts side by side. The addresses each side uses come from its route facts, else from what the
    probe saw (its own source address; the address the agent was reached at)."""
    lp, rp = select_port(view), select_port(remote)
    l_src = (view.get("peer") or {}).get("route_src") or local_address
    r_src = (remote.get("peer") or {}).get("route_src") or remote_address
    pair: Dict[str, Any] = {"local_port": lp, "remote_port": rp, "local_address": l_src, "remote_address": r_src}

    def item(name: str, label: str, a: Any, b: Any) -> None:
        known = a is not None and b is not None
        pair[name] = {"label": label, "local": a, "remote": b, "known": known, "differ": known and a != b}

    item("netdev_mtu", "netdev MTU", (lp or {}).get("netdev_mtu"), (rp or {}).get("netdev_mtu"))
    item("active_mtu", "active RDMA MTU", (lp or {}).get("active_mtu"), (rp or {}).get("active_mtu"))
    item("pfc", "PFC priorities", (lp or {}).get("pfc"), (rp or {}).get("pfc"))
    item("trust", "trust state", (lp or {}).get("trust"), (rp or {}).get("trust"))
    item("link_layer", "link layer", (lp or {}).get("link_layer"), (rp or {}).get("link_layer"))
    item("gid_type", "GID type of the address used", gid_type(lp, l_src), gid_type(rp, r_src))
    item("subnet", "IP subnet", _subnet(facts, l_src), _subnet(remote_facts, r_src))
    lv, rv = view.get("versions") or {}, remote.get("versions") or {}
    item("perftest", "perftest", lv.get("perftest"), rv.get("perftest"))
    item("perftest_protocol", "perftest protocol VERSION", lv.get("perftest_protocol_version"),
         rv.get("perftest_protocol_version"))
    item("rdma_core", "rdma-core", lv.get("rdma_core"), rv.get("rdma_core"))
    a, b = _version_number(lv.get("perftest_protocol_version")), _version_number(rv.get("perftest_protocol_version"))
    pair["perftest_protocol"]["incompatible"] = bool(a and b and ((a < 5.70 <= 5.92 <= b) or (b < 5.70 <= 5.92 <= a)))
    pair["mtu_differs"] = bool(pair["netdev_mtu"]["differ"] or pair["active_mtu"]["differ"])
    pair["mtu_text"] = ", ".join(
        f"{pair[k]['label']} {pair[k]['local']} here, {pair[k]['remote']} on the peer"
        for k in ("netdev_mtu", "active_mtu") if pair[k]["differ"]) or None
    pair["v1_only"] = "RoCE v1" in (pair["gid_type"]["local"], pair["gid_type"]["remote"])
    pair["remote_port_active"] = None if rp is None else rp.get("state") == "ACTIVE"
    pair["remote_listeners"] = [listener for listener in remote.get("listeners") or []
                                if listener.get("port") == (remote.get("host") or {}).get("port", DEFAULT_PORT)]
    return pair


# -- the probe's outcomes -----------------------------------------------------------------------------------

def _named(name: str, words: tuple) -> bool:
    return any(w in name for w in words) and not any(w in name for w in NOT_LOSS)


def _counter_sum(deltas: Optional[Dict[str, Any]], words: tuple) -> int:
    total = 0
    for kind in ("counters", "hw_counters"):
        for name, value in ((deltas or {}).get(kind) or {}).items():
            if isinstance(value, (int, float)) and value > 0 and _named(name, words):
                total += int(value)
    return total


def _moved(deltas: Optional[Dict[str, Any]], words: tuple) -> List[str]:
    out = []
    for kind in ("counters", "hw_counters"):
        for name, value in sorted(((deltas or {}).get(kind) or {}).items()):
            if isinstance(value, (int, float)) and value > 0 and _named(name, words):
                out.append(f"{name} +{int(value)}")
    return out


def _listener_event(listener: Optional[Dict[str, Any]], ev: str) -> Optional[Dict[str, Any]]:
    for event in (listener or {}).get("events") or []:
        if event.get("ev") == ev:
            return event
    return None


def _permanent(flags: Any) -> Optional[bool]:
    """Whether /proc/net/arp's flags hold ATF_PERM (0x4, include/uapi/linux/if_arp.h): an entry set by hand (`ip neigh
    ... nud permanent`, `arp -s`), which the kernel never resolves again; None when they are not shown."""
    try:
        return bool(int(str(flags), 16) & 0x4)
    except ValueError:
        return None


def derive(probe: Dict[str, Any], view: Dict[str, Any]) -> Dict[str, Any]:
    peer = probe.get("peer")
    tcp = [dict(t) for t in probe.get("tcp") or []]
    by_role = {t.get("role"): t for t in tcp}
    agent_tcp = by_role.get("agent") or {}
    perftest = by_role.get("perftest")
    agent = probe.get("agent") or {}
    cm = probe.get("cm") or {}
    connect = (cm.get("connect") or {}).get("state")
    arp = probe.get("arp") or {"state": "not-run"}
    before = probe.get("neighbour_before") or {}
    out: Dict[str, Any] = {
        "peer": peer, "agent_port": probe.get("agent_port"), "rdma_port": probe.get("rdma_port"),
        "tcp": tcp, "perftest_port": perftest, "agent_tcp": agent_tcp.get("state"),
        "agent_state": agent.get("state") or agent_tcp.get("state"), "agent_error": agent.get("error"),
        "agent_answered": agent.get("state") == "answered",
        "cm_mode": cm.get("mode"), "cm_run": cm.get("run"), "cm_why": cm.get("why"),
        "cm_addr": (cm.get("addr") or {}).get("state"), "cm_route": (cm.get("route") or {}).get("state"),
        "cm_setup": (cm.get("setup") or {}).get("state"), "cm_connect": connect,
        "cm_event": (cm.get("connect") or cm.get("route") or cm.get("addr") or {}).get("event"),
        "cm_errno": (cm.get("setup") or cm.get("connect") or cm.get("route") or cm.get("addr") or {}).get("errno"),
        "cm_error": (cm.get("setup") or cm.get("connect") or cm.get("route") or cm.get("addr") or {}).get("error"),
        "cm_seconds": {k: (cm.get(k) or {}).get("seconds") for k in ("addr", "route", "setup", "connect")},
        "arp": arp, "neighbour_known": bool(before.get("known")), "neighbour_mac": before.get("mac"),
        "neighbour_device": before.get("device"), "neighbour_static": _permanent(before.get("flags")),
        "exchange": probe.get("exchange"), "burst": probe.get("burst"), "listener": probe.get("listener"),
        "seconds": probe.get("seconds"), "source": probe.get("source") or {},
    }
    # signs of life of the peer (anything that came back from it)
    alive: List[str] = []
    for t in tcp:
        if t.get("state") in ("open", "refused"):
            alive.append(f"TCP {t.get('port')} {t.get('state')}")
        elif t.get("state") == "rejected" and (t.get("icmp") or {}).get("from") == peer:
            alive.append(f"TCP {t.get('port')} rejected by the peer itself")
    if connect in ("established", "rejected", "connect-error"):
        alive.append(f"rdma_cm {connect.upper()}")
    out["answers_above_l2"] = bool(alive)          # something above ARP came back: the stack is up
    if arp.get("state") == "answered":
        alive.append(f"ARP answered ({arp.get('mac')})")
    out["alive"] = bool(alive)
    # the peer answered a fresh ARP request with another MAC than the one this host's entry holds
    out["neighbour_other_mac"] = bool(arp.get("state") == "answered" and before.get("known") and
                                      str(arp.get("mac")).lower() != str(before.get("mac")).lower())
    out["alive_because"] = ", ".join(alive) or None
    out["tcp_works"] = any(t.get("state") in ("open", "refused") for t in tcp)
    out["tcp_filtered"] = [dict(t, label=f"TCP {t.get('port')} ({t.get('role')})") for t in tcp
                           if t.get("state") == "timeout" and out["answers_above_l2"]]
    out["tcp_rejected"] = [dict(t, label=f"TCP {t.get('port')} ({t.get('role')})",
                                icmp_name=(t.get("icmp") or {}).get("name"),
                                icmp_from=(t.get("icmp") or {}).get("from"))
                           for t in tcp if t.get("state") == "rejected"]
    out["no_arp"] = bool(any(t.get("no_arp") for t in tcp) or
                         (out["cm_addr"] == "error" and not out["neighbour_known"] and not out["alive"]))
    # the burst, against the link
    burst = probe.get("burst") or {}
    listener_burst = _listener_event(probe.get("listener"), "burst") or {}
    local_deltas, remote_deltas = burst.get("deltas"), listener_burst.get("deltas")
    lp = select_port(view)
    remote = view.get("remote")
    rp = select_port(remote) if remote else None
    rates = [r for r in ((lp or {}).get("rate_gbps"), (rp or {}).get("rate_gbps")) if isinstance(r, (int, float))]
    out["link_gbps"] = min(rates) if rates else None
    out["burst_gbps"] = burst.get("gbps")
    out["burst_fraction"] = (round(burst["gbps"] / out["link_gbps"], 4)
                             if burst.get("gbps") is not None and out["link_gbps"] else None)
    devices_read = bool((view.get("readable") or {}).get("devices"))
    used = [d for d in ((cm.get("route") or {}).get("device"), (cm.get("setup") or {}).get("device")) if d]
    out["device"] = used[0] if used else None
    out["soft_roce"] = bool((view.get("rdma") or {}).get("soft_roce")) or any(
        str(d).startswith(("rxe", "siw")) for d in used)
    out["devices_read"] = devices_read
    out["loss"] = {
        "local_retransmits": _counter_sum(local_deltas, RETRANSMIT),
        "local_out_of_sequence": _counter_sum(local_deltas, OUT_OF_SEQUENCE),
        "remote_retransmits": _counter_sum(remote_deltas, RETRANSMIT),
        "remote_out_of_sequence": _counter_sum(remote_deltas, OUT_OF_SEQUENCE),
        "moved": _moved(local_deltas, RETRANSMIT + OUT_OF_SEQUENCE + RESENT_PACKETS) +
                 [f"peer {m}" for m in _moved(remote_deltas, RETRANSMIT + OUT_OF_SEQUENCE + RESENT_PACKETS)],
        "remote_known": remote_deltas is not None,
    }
    # one lost packet moves several counters (the requester's retry and NAK-received, the responder's
    # out-of-sequence): the largest of them counts the loss events once
    events = max(v for k, v in out["loss"].items() if isinstance(v, int) and not isinstance(v, bool))
    packets = _counter_sum(local_deltas, SENT_PACKETS)
    out["loss"]["total"] = events
    out["loss"]["packets"] = packets or None
    out["loss"]["fraction"] = round(events / packets, 6) if packets else None
    # a few retransmissions in a burst are a working link; more than LOSS_FRACTION of the packets
    # (or any, when the packet count is not known) is worth a warning
    out["loss"]["significant"] = bool(events and (not packets or events / packets > LOSS_FRACTION))
    out["loss"]["text"] = ", ".join(out["loss"]["moved"]) or None
    if out["loss"]["text"] and packets:
        out["loss"]["text"] += f" for {packets} packets sent (about {events / packets:.2%} lost)"
    out["cnp"] = _counter_sum(local_deltas, CNP) + _counter_sum(remote_deltas, CNP)
    ex = probe.get("exchange") or {}
    failure = ex.get("failure") or {}
    bf = (probe.get("burst") or {}).get("failure") or {}
    out["burst_failure"] = bf.get("status_name") or bf.get("error") or (probe.get("burst") or {}).get("state")
    out["exchange_state"] = ex.get("state")
    out["exchange_op"] = ex.get("failed_op")
    out["wc_status"] = failure.get("status")
    out["wc_status_name"] = failure.get("status_name")
    out["mismatch"] = failure.get("mismatch")
    out["rungs"] = rungs(out, view)
    for r in out["rungs"]:
        out[f"rung{r['n']}"] = r["word"]
    return out


def _rung(n: int, state: str, word: str, detail: str, seconds: Optional[float] = None,
          evidence: Optional[List[str]] = None) -> Dict[str, Any]:
    return {"n": n, "name": RUNG_NAMES[n], "title": RUNG_TITLES[n], "state": state, "word": word,
            "detail": detail, "seconds": None if seconds is None else round(seconds, 3),
            "evidence": evidence or []}


def _tcp_text(t: Dict[str, Any]) -> str:
    text = f"TCP {t.get('port')} ({t.get('role')}): {t.get('state')}"
    if t.get("icmp"):
        text += f" (ICMP {t['icmp'].get('name')} from {t['icmp'].get('from')})"
    elif t.get("errno"):
        text += f" ({t['errno']})"
    return text + f" in {t.get('seconds')} s"


@dataclass(frozen=True)
class Seen:
    """What the rungs read of this host besides the probe's outcomes."""
    readable: Dict[str, Any]         # which collectors could be read
    port: Optional[Dict[str, Any]]   # the RDMA port that talks to the peer (select_port)
    peer: Dict[str, Any]             # the route facts towards the peer, with the probe's source address
    routed: bool                     # rdma_cm resolved a route on a device: it has an ACTIVE port and a GID

    @classmethod
    def of(cls, pv: Dict[str, Any], view: Dict[str, Any]) -> "Seen":
        peer = dict(view.get("peer") or {})
        source = pv.get("source") or {}
        if not peer.get("route_src") and source.get("address"):
            peer["route_src"] = source["address"]          # the probe's own answer when netlink was not read
        return cls(view.get("readable") or {}, select_port(view), peer,
                   bool(pv["cm_route"] == "resolved" and pv.get("device")))


def rungs(pv: Dict[str, Any], view: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The seven rungs, lowest first. Rungs 4-7 need the rdma_cm probe; 6 and 7 need the peer's agent."""
    seen = Seen.of(pv, view)
    out = [port_rung(pv, view, seen), reach_rung(pv, seen), gid_rung(pv, seen)]
    if not pv["cm_run"]:
        why = pv["cm_why"] or "the rdma_cm probe did not run"
        return out + [_rung(n, "not-inspected", "not-run", why) for n in (4, 5, 6, 7)]
    out += [cm_resolve_rung(pv), cm_connect_rung(pv)]
    if pv["cm_mode"] == "bare":
        why = f"needs `rdmadoctor serve` on {pv['peer']}"
        if pv["agent_state"] not in (None, "answered"):
            why += f" (agent: {pv['agent_state']}" + (f": {pv['agent_error']}" if pv["agent_error"] else "") + ")"
        return out + [_rung(6, "not-inspected", "not-run", why), _rung(7, "not-inspected", "not-run", why)]
    return out + [exchange_rung(pv), burst_rung(pv)]


def _port_down(view: Dict[str, Any], lp: Optional[Dict[str, Any]],
               addresses_known: bool) -> Optional[Tuple[str, str]]:
    """(word, detail) when this host's port cannot carry the test."""
    if (view.get("rdma") or {}).get("device_count", 0) == 0:
        return "no-device", "this host has no RDMA device"
    if lp is None:
        return "no-port", "no RDMA port found"
    if lp.get("state") != "ACTIVE":
        return "port-down", f"{lp['label']} is {lp.get('state')}"
    if lp.get("netdev_known") and (lp.get("netdev_up") is False
                                   or lp.get("netdev_oper") in ("DOWN", "LOWERLAYERDOWN")):
        return "netdev-down", f"{lp.get('netdev')} under {lp['label']} is down"
    if addresses_known and lp.get("netdev") and not lp.get("netdev_ipv4"):
        return "no-address", f"{lp.get('netdev')} under {lp['label']} has no IPv4 address"
    return None


def port_rung(pv: Dict[str, Any], view: Dict[str, Any], seen: Seen) -> Dict[str, Any]:
    """1: this host's port, its netdev and address."""
    if not seen.readable.get("devices"):
        if seen.routed:
            return _rung(1, "passed", "passed", f"{pv['device']} carried the rdma_cm route (this host's device "
                                                "facts were not read)")
        return _rung(1, "not-inspected", "unknown", "could not read this host's RDMA devices")
    lp, addresses_known = seen.port, bool(seen.readable.get("netlink"))
    down = _port_down(view, lp, addresses_known)
    if down is not None or lp is None:
        word, detail = down or ("no-port", "no RDMA port found")
        return _rung(1, "failed", word, detail)
    addresses = (f" with {', '.join(lp.get('netdev_ipv4') or [])}" if lp.get("netdev_ipv4") else
                 "" if addresses_known else " (its addresses were not read)")
    return _rung(1, "passed", "passed", f"{lp['label']} ACTIVE, {lp.get('netdev') or 'no netdev'} up{addresses}")


def _reach_evidence(pv: Dict[str, Any]) -> List[str]:
    evidence = [_tcp_text(t) for t in pv["tcp"]]
    if pv["arp"].get("state") in ("answered", "silent"):
        evidence.append(f"ARP for {pv['peer']}: {pv['arp']['state']}"
                        + (f" ({pv['arp'].get('mac')})" if pv["arp"].get("mac") else "")
                        + (f"; this host knew it as {pv['neighbour_mac']}" if pv["neighbour_known"] else ""))
    if pv["alive_because"]:
        evidence.append(f"the peer answered: {pv['alive_because']}")
    return evidence


def _route_failure(pv: Dict[str, Any], peer: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(word, detail) when the route to the peer is wrong before any packet."""
    if peer.get("route_error"):
        return "no-route", f"no route to {pv['peer']} ({peer['route_error']})"
    if peer.get("is_local"):
        return "local", f"{pv['peer']} is an address of this host"
    if peer.get("via_rdma_netdev") is False:
        return "not-rdma-netdev", f"the route to {pv['peer']} leaves through {peer.get('route_ifname')}, " \
                                  "not an RDMA netdev"
    return None


def _reach_failure(pv: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(word, detail) when packets to the peer are rejected, filtered or unanswered."""
    agent = pv["agent_tcp"]
    if pv["tcp_rejected"]:
        t = pv["tcp_rejected"][0]
        return "rejected", f"{t['label']} rejected: ICMP {t.get('icmp_name')} from {t.get('icmp_from')}"
    if pv["tcp_filtered"]:
        t = pv["tcp_filtered"][0]
        return "filtered", f"{t['label']}: no answer in {t.get('seconds')} s while the peer answers otherwise " \
                           f"({pv['alive_because']})"
    if pv["no_arp"]:
        return "no-arp", f"nobody answers ARP for {pv['peer']}"
    if agent in ("timeout", "unreachable") and not pv["answers_above_l2"]:
        return "silent", f"{pv['peer']} answers nothing: TCP {pv['agent_port']} {agent}, no rdma_cm answer"
    return None


def reach_rung(pv: Dict[str, Any], seen: Seen) -> Dict[str, Any]:
    """2: the route to the peer, and whether it answers TCP."""
    tcp, agent = pv["tcp"], pv["agent_tcp"]
    seconds = max([t.get("seconds") or 0 for t in tcp] or [0])
    evidence = _reach_evidence(pv)
    failure = _route_failure(pv, seen.peer) or _reach_failure(pv)
    if failure:
        word, detail = failure
        return _rung(2, "failed", word, detail, seconds, evidence)
    if agent in ("open", "refused") or (pv["perftest_port"] or {}).get("state") in ("open", "refused"):
        detail = f"{pv['peer']} answers: " + "; ".join(
            f"TCP {t.get('port')} {t.get('state')}" + (" (no rdmadoctor agent)" if t.get("role") == "agent" and
                                                       t.get("state") == "refused" else "")
            for t in tcp)
        return _rung(2, "passed", "passed", detail, seconds, evidence)
    if not tcp:
        return _rung(2, "not-inspected", "unknown", "no TCP probe was made", seconds, evidence)
    return _rung(2, "failed", agent or "error", f"TCP {pv['agent_port']}: {agent}", seconds, evidence)


def _ib_rung(lp: Dict[str, Any]) -> Dict[str, Any]:
    if not lp.get("lid"):
        return _rung(3, "failed", "no-lid", f"{lp['label']} has LID 0 (no subnet manager has configured it)")
    if not lp.get("sm_lid"):
        return _rung(3, "failed", "no-sm", f"{lp['label']} knows no subnet manager (SM LID 0)")
    return _rung(3, "passed", "passed", f"{lp['label']} LID {lp.get('lid')}, SM LID {lp.get('sm_lid')}")


def _roce_rung(lp: Dict[str, Any], src: Optional[str]) -> Dict[str, Any]:
    kind = gid_type(lp, src)
    if kind == "RoCE v2":
        return _rung(3, "passed", "passed", f"{lp['label']}: RoCE v2 GID for {src}")
    if kind == "RoCE v1":
        return _rung(3, "failed", "gid-v1-only", f"{lp['label']}: only a RoCE v1 GID for {src}")
    if src:
        return _rung(3, "failed", "no-gid", f"{lp['label']}: no GID for {src}")
    return _rung(3, "not-inspected", "unknown", "the source address towards the peer is not known")


def gid_rung(pv: Dict[str, Any], seen: Seen) -> Dict[str, Any]:
    """3: the GID for the source address (RoCE), or the LID and subnet manager (InfiniBand)."""
    lp, src = seen.port, seen.peer.get("route_src")
    if lp is None or not seen.readable.get("devices"):
        if seen.routed:
            return _rung(3, "passed", "passed", f"rdma_cm found a GID on {pv['device']} for the source address "
                                                "(this host's device facts were not read)")
        return _rung(3, "not-inspected", "unknown", "no RDMA port to inspect")
    if lp.get("is_ib"):
        return _ib_rung(lp)
    if src and ":" in src:
        if seen.routed:
            return _rung(3, "passed", "passed", f"rdma_cm found a GID on {pv['device']} for {src}")
        return _rung(3, "not-inspected", "unknown", f"{src} is IPv6: only rdma_cm's own lookup checks its GID")
    return _roce_rung(lp, src)


def cm_resolve_rung(pv: Dict[str, Any]) -> Dict[str, Any]:
    """4: rdma_cm resolves the peer's address and a route to it."""
    times = pv["cm_seconds"]
    cm_seconds = sum(times.get(k) or 0 for k in ("addr", "route")) if times.get("addr") is not None else None
    if pv["cm_addr"] == "resolved" and pv["cm_route"] == "resolved":
        return _rung(4, "passed", "passed", f"address and route to {pv['peer']} resolved", cm_seconds)
    if pv["cm_addr"] != "resolved":
        word = "addr-timeout" if pv["cm_addr"] == "timeout" else "addr-error"
        why = pv["cm_event"] or pv["cm_error"]
        return _rung(4, "failed", word, f"rdma_resolve_addr: {pv['cm_addr']}" + (f" ({why})" if why else ""),
                     cm_seconds)
    word = "route-timeout" if pv["cm_route"] == "timeout" else "route-error"
    return _rung(4, "failed", word, f"rdma_resolve_route: {pv['cm_route']}", cm_seconds)


_CONNECT_FAILED = {"rejected": "REJECTED by the peer", "unreachable": "UNREACHABLE: the CM request was not answered",
                   "timeout": "no answer to the CM request before the deadline", "connect-error": "CONNECT_ERROR"}


def cm_connect_rung(pv: Dict[str, Any]) -> Dict[str, Any]:
    """5: an rdma_cm connection to the agent's listener (or, without an agent, a reject from the peer's stack)."""
    connect, port = pv["cm_connect"], pv["rdma_port"]
    c_s = pv["cm_seconds"].get("connect")
    if pv["cm_setup"] == "error":
        return _rung(5, "failed", "setup-error", f"could not create the QP or register memory: {pv['cm_error']}")
    if connect == "established":
        return _rung(5, "passed", "established", f"ESTABLISHED with the agent's listener (rdma_cm port {port})", c_s)
    if connect == "rejected" and pv["cm_mode"] == "bare":
        return _rung(5, "passed", "rejected",
                     f"REJECTED: the CM request reached {pv['peer']}'s RDMA stack and was answered "
                     f"(nothing listens on rdma_cm port {port}): the RDMA path works", c_s)
    if connect is None:
        return _rung(5, "not-inspected", "not-run", "no connection was attempted")
    return _rung(5, "failed", connect, _CONNECT_FAILED.get(connect, connect), c_s)


def exchange_rung(pv: Dict[str, Any]) -> Dict[str, Any]:
    """6: RDMA WRITE, READ and SEND with the agent, verified byte for byte."""
    ex = pv["exchange"] or {}
    if not ex:
        return _rung(6, "not-inspected", "not-run", "no exchange was made")
    if ex.get("state") == "passed":
        return _rung(6, "passed", "passed", "RDMA WRITE, RDMA READ and SEND/RECV of 16 KiB/2 KiB patterns "
                                            "verified byte for byte on both sides", ex.get("seconds"))
    failure = ex.get("failure") or {}
    what = failure.get("mismatch") or failure.get("status_name") or failure.get("error") or ex.get("state")
    word = "mismatch" if ex.get("state") == "mismatch" else ("timeout" if ex.get("state") == "timeout" else "failed")
    return _rung(6, "failed", word, f"{ex.get('failed_op') or 'exchange'}: {what}", ex.get("seconds"))


def _counters_text(pv: Dict[str, Any]) -> str:
    loss = pv["loss"]
    text = f"; {loss['text']}" if loss["total"] else "; no retransmits or sequence errors on either host"
    if loss["total"] and not loss["significant"]:
        text += " (within what a working link shows)"
    if not loss["remote_known"]:
        text += " (peer's counters not reported)"
    if pv["cnp"]:
        text += f"; {pv['cnp']} CNPs (congestion control at work)"
    return text


def burst_rung(pv: Dict[str, Any]) -> Dict[str, Any]:
    """7: a burst of WRITEs: its rate against the link, and the loss counters of both hosts."""
    burst = pv["burst"] or {}
    if not burst:
        return _rung(7, "not-inspected", "not-run", "no burst was made")
    if burst.get("state") != "passed":
        failure = burst.get("failure") or {}
        return _rung(7, "failed", burst.get("state") or "failed",
                     f"burst: {failure.get('status_name') or failure.get('error') or burst.get('state')}",
                     burst.get("seconds"))
    rate = f"{burst.get('gbps'):.3g} Gb/s" if burst.get("gbps") is not None else "?"
    link = pv["link_gbps"]
    against = (f" of {link:g} Gb/s link ({pv['burst_fraction'] * 100:.0f}%)" if link and
               pv["burst_fraction"] is not None else "")
    if pv["soft_roce"]:
        against += " (Soft-RoCE: the rate is nominal, not judged)"
    detail = f"{rate}{against}{_counters_text(pv)}"
    if pv["loss"]["significant"]:
        return _rung(7, "warning", "loss", detail, burst.get("seconds"))
    if (not pv["soft_roce"] and pv["devices_read"] and pv["burst_fraction"] is not None
            and pv["burst_fraction"] < SLOW_FRACTION):
        return _rung(7, "warning", "slow", detail, burst.get("seconds"))
    return _rung(7, "passed", "passed", detail, burst.get("seconds"))
