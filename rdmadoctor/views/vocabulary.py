"""The names fact rules may read: the shape of the facts view (views/factview.py, views/probeview.py, the
bench view), each name with what it means.

A shape is a description string (a value), a dict of names -> shapes, a one-item list [item shape] (a list a
rule can iterate with `each`), {"*": shape} (a map with open keys), or VIEW (the same shape as the whole
view: the peer's facts). The rule loader refuses a `fact`, `each`, `item` or template name that is not here,
and tests/views/test_vocabulary.py builds the view from every recorded facts file and checks that it holds
no name that is not here, so this page and the builders cannot drift apart. docs/vocabulary.md is generated
from it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

Shape = Union[str, Dict[str, Any], List[Any]]
VIEW = "@view"          # the whole view again (the peer's facts under "remote")

_GID_NODE = {"path": "device node path", "mode": "its mode, octal text", "uid": "owner uid", "gid": "group gid",
             "type": "char | dir | other", "readable": "this user can read it (None: not known)",
             "writable": "this user can write it (None: not known)"}
_FIREWALL_VERDICT = {
    "proto": "tcp | udp", "port": "the port asked about", "family": "4 | 6", "src": "the source address asked about",
    "purpose": "why the port matters (perftest's side channel, RoCEv2, the agent)",
    "verdict": "accept | drop | unknown: what the ruleset does to that packet",
    "rule": "the rule that decided, as the ruleset prints it", "why": "how the verdict was reached",
    "trail": [{"at": "where in the ruleset", "chain": "the chain", "verdict": "what that step decided"}],
    "direction": "'out' for a packet this host sends (absent: one it receives)",
    "dst": "the destination address asked about (a packet this host sends)",
}
_GID_ENTRY = {"index": "GID index", "gid": "the GID (canonical IPv6 text)",
              "type": "RoCE v2 | IB/RoCE v1 | RoCE v1 | IB", "netdev": "its netdev", "ipv4": "its IPv4 address",
              "link_local": "an IPv6 link-local GID (fe80::)"}
_LISTENER = {"port": "TCP port", "ip": "the address it listens on", "family": "4 | 6",
             "process": "the program's name", "pid": "its process id (this host only, when visible)",
             "user": "its user (this host only, when visible)"}

HOST: Dict[str, Any] = {
    "readable": {"*": "True when that facts section (devices, kernel, netlink, limits, firewall, ports, pci, "
                      "versions, probe, peer) could be read, wholly or in part"},
    "reasons": {"*": "why that section could not be read (or was read only in part)"},
    "host": {"hostname": "host name", "user": "the user check ran as", "uid": "its uid", "is_root": "euid 0",
             "kernel": "uname -r", "machine": "uname -m", "os": "the distribution", "live": "read from this host "
             "(False: a saved tree)", "root": "the tree read, when not /", "collected_at": "ISO time",
             "rdmadoctor": "the version that collected", "peer": "the --peer address asked about",
             "port": "the perftest port asked about"},
    "is_root": "check ran as root (root has CAP_IPC_LOCK: memlock does not apply)",
    "rdma": {
        "subsystem": "the kernel's RDMA subsystem is present (/sys/class/infiniband)",
        "device_count": "number of RDMA devices",
        "kernel_config": "CONFIG_INFINIBAND of the running kernel (y, m, 'not set'); None when not read",
        "kernel_config_source": "where the kernel config was read",
        "modules_supported": "the kernel loads modules",
        "modules_known": "the module list could be read",
        "ib_core": "ib_core is loaded (or built in)", "ib_uverbs": "ib_uverbs is loaded (userspace verbs)",
        "rdma_ucm": "rdma_ucm is loaded (userspace rdma_cm)",
        "providers_loaded": ["a loaded provider driver module (mlx5_ib, irdma, rdma_rxe, ...)"],
        "pyverbs": "pyverbs could be imported to read the devices",
        "netns_mode": "the RDMA namespace mode: shared | exclusive",
        "soft_roce": "a device is Soft-RoCE or soft-iWARP (rxe, siw)",
        "active_ports": "number of ports in state ACTIVE (None: no port's state is known)",
        "usable_ports": "number of ports ACTIVE, or of unknown state with their netdev UP (None: neither is known)",
    },
    "devices": [{"name": "ibdev name (mlx5_0)", "label": "how the report names it", "driver": "its driver",
                 "transport": "InfiniBand | iWARP | ...", "pci": "PCI address", "numa_node": "NUMA node",
                 "fw_ver": "firmware version", "verbs_visible": "libibverbs lists it (False: no userspace provider)",
                 "netdevs": ["a netdev of the device"]}],
    "verbs_invisible": [{"name": "a device the kernel has but libibverbs does not list", "label": "its label",
                         "driver": "its driver"}],
    "ports": [{
        "label": "'mlx5_0 port 1'", "device": "ibdev name", "driver": "driver", "port": "port number",
        "state": "ACTIVE | DOWN | INIT | ARMED",
        "states_shown": ["a state a pasted listing showed the port in, in order; one shown again right after itself "
                         "is not repeated (None: not a paste)"],
        "phys_state": "LinkUp | Disabled | Polling | ...",
        "link_layer": "Ethernet | InfiniBand", "is_roce": "link layer Ethernet", "is_ib": "link layer InfiniBand",
        "active_mtu": "active RDMA MTU in bytes", "max_mtu": "largest RDMA MTU in bytes", "lid": "LID (IB)",
        "sm_lid": "the subnet manager's LID (IB)", "rate": "rate as the kernel prints it",
        "rate_gbps": "rate in Gb/s", "netdev": "the netdev under the port", "netdev_known": "that netdev was read",
        "netdev_up": "administratively up", "netdev_oper": "operstate (UP, DOWN, LOWERLAYERDOWN)",
        "netdev_carrier": "carrier (1 / 0)", "netdev_mtu": "the netdev's MTU",
        "netdev_ipv4": ["an IPv4 address on the netdev"],
        "gid_count": "number of GIDs (None: a paste that lists no GIDs for the port)",
        "ipv4_gids": ["an IPv4-mapped GID"], "ipv4_v2_gids": ["'index: GID' of a RoCE v2 IPv4 GID"],
        "gids": [_GID_ENTRY],
        "named": "a run of the paste names this device (True), names only other devices (False), names none (None)",
        "gid_selected": dict(_GID_ENTRY, index="the GID index the paste's runs chose (perftest -x, ibv_*_pingpong -g, "
                                              "NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX), when the paste lists it"),
        "counter_deltas": {"*": "a port counter's change between the two samples"},
        "pfc": ["a priority with PFC enabled on the port's netdev (None: not read)"],
        "pause": "link-level pause is on, receive or transmit (None: not read)",
        "trust": "the netdev's trust state, pcp or dscp (None: not read)",
        "retries": "sum of the retry, timeout and sequence-error counter changes",
    }],
    "uverbs_nodes": [_GID_NODE], "uverbs_denied": [_GID_NODE], "rdma_cm_node": _GID_NODE,
    "memlock": {"soft": "soft RLIMIT_MEMLOCK in bytes (None: unlimited)", "hard": "hard limit in bytes",
                "unlimited": "the soft limit is unlimited", "exempt": "root or CAP_IPC_LOCK: the limit does not apply",
                "known": "the limit was read",
                "below_default": "the limit applies and is below what perftest pins with default options (128 KiB)",
                "below_all_sizes": "the limit applies and is below what -a pins (16 MiB)",
                "limits_conf": [{"file": "a limits.conf file", "line": "line number", "text": "the memlock line"}]},
    "firewall": {"*": _FIREWALL_VERDICT},
    "firewall_egress_blocks": [dict(_FIREWALL_VERDICT, label="'tcp/18515'", matters="the drop matters here (TCP, or "
                                                                                   "UDP 4791 with Soft-RoCE)",
                                    chain="the chain that dropped it",
                                    allow="the command that lets it out ahead of that rule, in its ruleset's tool")],
    "firewall_blocks": [dict(_FIREWALL_VERDICT, label="'tcp/18515'", matters="the drop matters here (TCP, or UDP "
                                                                           "4791 with Soft-RoCE)",
                             chain="the chain that dropped it",
                             allow="the command that lets it in ahead of that rule, in its ruleset's tool (nft, "
                                   "iptables-legacy)")],
    "listeners": [_LISTENER],
    "pci": [{"label": "'mlx5_0 (0000:3b:00.0)'", "device": "ibdev name", "bdf": "PCI address",
             "current_link_speed": "e.g. '8.0 GT/s PCIe'", "max_link_speed": "what the slot and card can do",
             "current_link_width": "lanes in use", "max_link_width": "lanes the card has",
             "numa_node": "NUMA node", "degraded": "running below its capable speed or width"}],
    "kernel_log": [{"text": "a kernel log line (warning level or worse)", "level": "its level",
                    "ts": "seconds since boot", "software": "from Soft-RoCE or soft-iWARP (an application's "
                                                            "QP error, not a device fault)"}],
    "versions": {"*": "a version string (rdma_core, perftest, perftest_protocol_version, kernel, os, pyverbs, "
                      "providers, ...), or a map of them (tools, sources)"},
    "netdev_children": [{"label": "'ib0.8001 (on ib0)'", "ifname": "an interface on a lower device (an IPoIB child, "
                                                              "a VLAN), as a pasted `ip link` shows it",
                         "parent": "its parent interface", "mtu": "its MTU", "parent_mtu": "the parent's MTU",
                         "mtu_above_parent": "both MTUs shown, the child's the larger",
                         "link_type": "its link type (infiniband, ether; None: not shown)",
                         "parent_link_type": "the parent's link type",
                         "ipoib": "the child or its parent is shown as link/infiniband"}],
    "rdma_subnet_routes": [{"label": "'192.0.2.1/32 dev rdt0'", "dst": "the route's destination, inside an RDMA "
                                                                        "netdev's subnet and more specific",
                            "ifname": "the netdev it leaves through (no RDMA port)", "gateway": "its gateway",
                            "proto": "who added it (kernel, boot, static, dhcp ...)",
                            "subnet": "the RDMA netdev's subnet", "rdma_netdev": "that RDMA netdev",
                            "address": "the RDMA netdev's address in it"}],
    "rdma_arp_flux": [{"label": "'192.0.2.0/24'", "subnet": "an IPv4 subnet where two or more RDMA netdevs hold an "
                                                           "address",
                       "netdevs": "those netdevs with their addresses ('eth0 (192.0.2.1), rdt0 (192.0.2.3)')",
                       "answering": "those that answer ARP for any address of the host (arp_ignore 0, theirs and "
                                    "all's)",
                       "arp_ignore_all": "net.ipv4.conf.all.arp_ignore"}],
    "rdma_static_neighbours": [{"label": "'192.0.2.1 lladdr 52:54:00:de:ad:01 dev eth0'",
                                "dst": "an address an RDMA netdev's neighbour table holds as set by hand (permanent)",
                                "lladdr": "the MAC that entry sends its frames to", "ifname": "the RDMA netdev",
                                "is_peer": "the address is the peer's (--peer), or one a client of the input's "
                                           "logs connected to"}],
    "rdma_netem": [{"label": "'eth0'", "netdev": "an RDMA netdev with a netem qdisc (tc qdisc ... netem)",
                    "soft_roce": "whether a Soft-RoCE (rxe) or siw device runs on it: its RDMA packets pass the qdisc",
                    "root": "whether the netem is the netdev's root qdisc", "handle": "its handle ('8001:')",
                    "does": "what it does to each packet ('loses 5% of packets, delays each by 300 ms')",
                    "drops": "whether it loses or corrupts packets (a percentage, or a loss model)",
                    "loss_pct": "packets lost (%)", "corrupt_pct": "packets corrupted (%)",
                    "duplicate_pct": "packets duplicated (%)", "reorder_pct": "packets reordered (%)",
                    "delay_ms": "added delay (ms)", "jitter_ms": "its jitter (ms)",
                    "rate_bytes_per_s": "its rate limit (bytes a second; None: none)"}],
    "umad_class": {"listings": "how many listings of /sys/class/infiniband_mad the paste shows (the view is None "
                               "when it shows none)",
                   "umad": ["a umad entry of the last listing (umad0)"],
                   "issm": ["an issm entry of the last listing (issm0)"],
                   "umad_without_issm": ["a umad entry of the last listing whose issm entry it lacks"],
                   "issm_lost": ["an issm entry an earlier listing showed and the last one lacks, its umad entry "
                                 "still there"]},
    "peer": {"address": "the --peer address", "route_ifname": "the netdev the route to it leaves through",
             "route_src": "the source address of that route", "route_gateway": "its gateway",
             "route_error": "why there is no route", "route_type": "unicast | local | ...",
             "is_local": "the address is this host's own", "via_rdma_netdev": "the route leaves through an RDMA netdev",
             "rdma_netdevs": ["a netdev under an RDMA port"], "neighbour": "the neighbour entry's state"},
    "perftest": ["@perftest"],
    "peer_perftest": "@peer_perftest",
    "probe": "@probe",
    "agent": {"*": "the peer agent's answer to hello (version, protocol, bind address ...): under `remote` only"},
    "remote": VIEW,
    "pair": "@pair",
}

_PERFTEST = {"tool": "the perftest binary (ib_write_bw ...)", "role": "server | client",
             "options": {"*": "an option that decides whether two sides meet (canonical long name -> value)"},
             "port": "its side-channel port (-p, default 18515)", "listening": ["a TCP port it listens on"],
             "connected": "it holds an established TCP connection (a run in progress)",
             "rdma_cm": "it runs with -R or -z", "target": "the server address a client aims at",
             "parsed": "its command line parsed as perftest's", "pid": "its process id (this host only)",
             "user": "its user (this host only)", "text": "'ib_write_bw on port 18520 with -s 65536'",
             "text_zh": "the same in Chinese"}
PEER_PERFTEST: Dict[str, Any] = {
    "known": "the peer's agent reported its perftest processes",
    "asked_port": "the port this side's client connects to (the log's -p, else check's --port)",
    "peer_address": "the peer's address", "log": "a perftest log of this side was given (--log)",
    "log_tool": "the log's perftest binary", "log_target": "the address the log's client aimed at",
    "target_differs": "the log's client aimed at none of the peer's addresses (the probed one, its RDMA netdevs')",
    "servers": ["@perftest"], "clients": ["@perftest"],
    "waiting": "@perftest", "elsewhere": "@perftest",
    "differences": [{"name": "the parameter", "label": "how a person calls it", "option": "the option",
                     "peer": "the peer server's value", "here": "this side's value"}],
    "differ": "some option differs", "differences_text": "the differences, as a sentence",
    "differences_text_zh": "the same in Chinese",
    "qp_count_differs": "the number of QPs is among the differences",
    "matching": "a server with the same options waits on the asked port",
    "start_command": "a server command for the peer that matches this side",
    "summary": "what the peer runs, as a sentence", "summary_zh": "the same in Chinese",
}

PROBE: Dict[str, Any] = {
    "peer": "the probed address", "agent_port": "the agent's TCP port", "rdma_port": "the agent's rdma_cm port",
    "seconds": "how long the probe took", "source": {"address": "this host's source address", "ifname": "its netdev"},
    "tcp": [{"port": "TCP port", "role": "agent | perftest", "state": "open | refused | rejected | timeout | "
             "unreachable | error", "seconds": "time to the outcome", "errno": "the errno name",
             "no_arp": "nobody answered ARP", "error": "other error text",
             "icmp": {"origin": "icmp | local", "type": "ICMP type", "code": "ICMP code", "errno": "errno",
                      "name": "what the ICMP error means", "from": "who sent it"},
             "label": "'TCP 18600 (agent)'", "icmp_name": "the ICMP error's meaning", "icmp_from": "its sender"}],
    "tcp_filtered": ["@probe.tcp"], "tcp_rejected": ["@probe.tcp"],
    "perftest_port": "@probe.tcp[]", "tcp_works": "some TCP port answered",
    "agent_tcp": "the agent port's TCP outcome", "agent_state": "what the agent did: answered | refused | ...",
    "agent_error": "the agent's error", "agent_answered": "the agent answered",
    "arp": {"state": "answered | silent | not-run", "mac": "who answered", "why": "why it did not run",
            "seconds": "time to the answer"},
    "no_arp": "nobody answers ARP for the peer", "neighbour_known": "this host already knew the peer's MAC",
    "neighbour_mac": "that MAC", "neighbour_device": "the netdev of that entry",
    "neighbour_static": "that entry was set by hand (permanent: the kernel never resolves it again)",
    "neighbour_other_mac": "the peer answered a fresh ARP request with another MAC than that entry's",
    "alive": "the peer answered something", "alive_because": "what it answered",
    "answers_above_l2": "the peer answered above Ethernet (TCP, rdma_cm)",
    "cm_mode": "agent | bare: with or without the peer's agent", "cm_run": "the rdma_cm probe ran",
    "cm_why": "why it did not run", "cm_addr": "rdma_resolve_addr: resolved | error | timeout",
    "cm_route": "rdma_resolve_route outcome", "cm_setup": "QP and memory setup outcome",
    "cm_connect": "established | rejected | unreachable | timeout | connect-error",
    "cm_event": "the last rdma_cm event", "cm_errno": "its errno", "cm_error": "its error text",
    "cm_seconds": {"*": "seconds of that rdma_cm phase"}, "device": "the device rdma_cm used",
    "devices_read": "this host's devices were read", "soft_roce": "the device is Soft-RoCE",
    "link_gbps": "the link rate", "listener": {"*": "the agent's listener report"},
    "exchange": {"*": "the WRITE/READ/SEND exchange's report"},
    "exchange_state": "passed | failed | mismatch | timeout",
    "exchange_op": "the operation that failed", "wc_status": "its completion status number",
    "wc_status_name": "its name", "mismatch": "the data that came back wrong",
    "burst": {"*": "the burst's report"}, "burst_gbps": "the burst's rate", "burst_fraction": "of the link rate",
    "burst_failure": "why the burst failed",
    "loss": {"local_retransmits": "retransmission counters moved here", "local_out_of_sequence": "sequence errors here",
             "remote_retransmits": "on the peer", "remote_out_of_sequence": "on the peer",
             "moved": ["'counter +N'"], "remote_known": "the peer's counters were read",
             "total": "loss events (the largest counter)", "packets": "packets sent",
             "fraction": "events per packet", "significant": "more loss than a working link shows",
             "text": "the counters that moved, as a sentence"},
    "cnp": "congestion notification packets counted",
    "rungs": [{"n": "1..7", "name": "peer-port .. peer-bandwidth", "title": "the rung's title",
               "state": "passed | failed | warning | not-inspected", "word": "what it saw in one word",
               "detail": "what it saw", "seconds": "time taken", "evidence": ["an evidence line"]}],
    "rung1": "rung 1's word: passed | no-device | port-down | netdev-down | no-address | unknown",
    "rung2": "rung 2's word", "rung3": "rung 3's word", "rung4": "rung 4's word", "rung5": "rung 5's word",
    "rung6": "rung 6's word", "rung7": "rung 7's word",
}
_PAIR_ITEM = {"label": "what is compared", "local": "this host's value", "remote": "the peer's value",
              "known": "both are known", "differ": "both known and different"}
PAIR: Dict[str, Any] = {
    "local_port": "@port", "remote_port": "@port", "local_address": "this host's address towards the peer",
    "remote_address": "the peer's address towards this host",
    "netdev_mtu": _PAIR_ITEM, "active_mtu": _PAIR_ITEM, "link_layer": _PAIR_ITEM, "gid_type": _PAIR_ITEM,
    "subnet": _PAIR_ITEM, "perftest": _PAIR_ITEM, "rdma_core": _PAIR_ITEM, "pfc": _PAIR_ITEM,
    "trust": _PAIR_ITEM,
    "perftest_protocol": dict(_PAIR_ITEM, incompatible="one side older than 5.70, the other 5.92 or newer"),
    "mtu_differs": "the netdev or active MTUs differ", "mtu_text": "the difference, as a sentence",
    "v1_only": "one side has only a RoCE v1 GID for its address",
    "remote_port_active": "the peer's port is ACTIVE", "remote_listeners": [_LISTENER],
}
BENCH: Dict[str, Any] = {
    "shortfalls": [{"label": "the combination", "gbps": "its bandwidth", "rate": "the link rate",
                    "fraction": "of the link rate"}],
    "roce_mtu": "the smaller active RoCE MTU of the two hosts",
    "pcie_degraded": ["'host: device speed xwidth (can ...)'"],
    "regressions": [{"label": "the combination", "metric": "what got worse", "before": "earlier value",
                     "now": "this value", "change": "'-12%'", "threshold": "the threshold"}],
    "failed": ["the label of a failed combination"],
    "unexplained": [{"label": "a combination the agent refused or could not start", "status": "verdict status",
                     "cause": "its cause", "rule": "its rule", "summary": "what the agent said"}],
    "memlock": [{"label": "the combination", "side": "server | client", "host": "the host", "user": "its user",
                 "limit": "its memlock limit", "need": "what the combination pins"}],
    "done": "combinations run", "interrupted": "Ctrl-C stopped the sweep",
}
# Keys that only the bench view has
BENCH_VIEW: Dict[str, Any] = {"bench": BENCH, "peer_facts": VIEW}

_REFS = {"@probe": PROBE, "@pair": PAIR, "@probe.tcp": PROBE["tcp"][0], "@probe.tcp[]": PROBE["tcp"][0],
         "@port": HOST["ports"][0], "@listener": _LISTENER, "@perftest": _PERFTEST, "@peer_perftest": PEER_PERFTEST}


def root(bench: bool = False) -> Dict[str, Any]:
    return {**HOST, **BENCH_VIEW} if bench else HOST


def _deref(shape: Any, whole: Dict[str, Any]) -> Any:
    if shape == VIEW:
        return whole
    if isinstance(shape, str) and shape in _REFS:
        return _REFS[shape]
    if isinstance(shape, list) and shape and isinstance(shape[0], str) and shape[0] in _REFS:
        return [_REFS[shape[0]]]
    return shape


def resolve(path: str, bench: bool = False) -> Tuple[Optional[Any], str]:
    """(the shape at a dotted path, "") or (None, why). A list index in the path ("tcp.0") is allowed."""
    whole = root(bench)
    shape: Any = whole
    walked: List[str] = []
    for part in path.split("."):
        shape = _deref(shape, whole)
        if isinstance(shape, list) and part.isdigit():
            shape = shape[0]
        elif isinstance(shape, dict) and part in shape:
            shape = shape[part]
        elif isinstance(shape, dict) and "*" in shape:
            shape = shape["*"]
        else:
            known = sorted(k for k in shape) if isinstance(shape, dict) else []
            where = ".".join(walked) or "the view"
            return None, (f"'{part}' is not a name of {where}" + (f" (names: {', '.join(known)})" if known else ""))
        walked.append(part)
    return _deref(shape, whole), ""


def item_shape(each: str, bench: bool = False) -> Tuple[Optional[Dict[str, Any]], str]:
    """The shape of one item of the list `each` names (for `item` conditions and {item.x} templates)."""
    shape, why = resolve(each, bench)
    if shape is None:
        return None, why
    if not isinstance(shape, list):
        return None, f"'{each}' is not a list a rule can iterate"
    item = _deref(shape[0], root(bench))
    return (item if isinstance(item, dict) else {"*": item}), ""


def undeclared(value: Any, shape: Any = None, path: str = "", bench: bool = False) -> List[str]:
    """The paths of a built view that its declared shape does not have (empty: it conforms)."""
    whole = root(bench)
    shape = whole if shape is None else _deref(shape, whole)
    out: List[str] = []
    if isinstance(value, dict) and isinstance(shape, dict):
        for key, sub in value.items():
            if key.startswith("_"):
                continue
            if key in shape:
                out += undeclared(sub, shape[key], f"{path}.{key}" if path else key, bench)
            elif "*" in shape:
                out += undeclared(sub, shape["*"], f"{path}.{key}" if path else key, bench)
            else:
                out.append(f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(shape, list):
        for item in value[:5]:
            out += undeclared(item, shape[0], path + "[]", bench)
    return out


def flat(shape: Any = None, prefix: str = "", seen: Optional[set] = None) -> List[Tuple[str, str]]:
    """(path, description) for every name, for the docs page. References are listed once, where defined."""
    seen = set() if seen is None else seen
    shape = HOST if shape is None else shape
    out: List[Tuple[str, str]] = []
    if isinstance(shape, str):
        if shape == VIEW:
            return [(prefix, "the peer's facts: the same names as this host's (remote.ports, remote.memlock, ...)")]
        if shape in _REFS:
            return [(prefix, f"see {shape[1:]}")]
        return [(prefix, shape)]
    if isinstance(shape, list):
        return flat(shape[0], prefix + "[]", seen)
    for key, sub in shape.items():
        out += flat(sub, f"{prefix}.{key}" if prefix else key, seen)
    return out
