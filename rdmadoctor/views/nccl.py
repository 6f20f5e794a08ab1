"""Observations about an NCCL run (NCCL itself, or nccl-tests around it) that rules ask for by name.

What an NCCL log says between its lines: which release printed it (the shape of its messages changed
from release to release: knowledge/messages/nccl.toml `versions`), what that release does when the user
does not say (the GID index before 2.21, nvidia_peermem detection before 2.23.4), which link layer the
run is on, which GIDs it used, whether the hosts' QPs report different MTUs, whether GPUDirect RDMA is in
use, and whether the out-of-band interface is one NCCL only picks as a last resort. Each is a pure
function of the run and of the other runs of the input (ctx["runs"]); none knows about causes.

A feature that stands for a yes is a record with the line it rests on ({"line": ...}), so that a rule's
evidence quotes that line; a no is None.
"""
from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rdmadoctor.knowledge import devices
from rdmadoctor.logparse import pasted
from rdmadoctor.model import Message, Run
from rdmadoctor.views import bysource
from rdmadoctor.views.completions import statuses
NEWEST = 99_99_99            # an open upper bound: "this release or any later one"

# Releases as NCCL numbers them (NCCL_VERSION_CODE of 2.9 and later): major*10000 + minor*100 + patch.
AUTO_GID_INDEX = 2_21_00     # src/transport/net_ib: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0) up to 2.20, -1 from 2.21
PEERMEM_DETECTED = 2_23_04   # ncclIbGdrSupport() also checks /sys/module/nvidia_peermem/version from 2.23.4


def code(version: str) -> Optional[int]:
    """'2.21.5+cuda12.4' -> 22105."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    return int(m.group(1)) * 10000 + int(m.group(2)) * 100 + int(m.group(3) or 0)


def _name(c: int) -> str:
    return f"{c // 10000}.{c // 100 % 100}" + (f".{c % 100}" if c % 100 else "")


def _nccl_messages(run: Run) -> List[Message]:
    return [m for m in run.messages if m.id.startswith("NCCL.")]


def _at(m: Message, **extra: Any) -> Dict[str, Any]:
    """A yes, resting on message `m` (which may be in another run or file of the input)."""
    return {"line": m.line, "source": m.source, "quote": m.text, **extra}


def _input_runs(run: Run, ctx: Dict[str, Any]) -> List[Run]:
    """Every NCCL run of the input: the ranks and hosts of one job, pasted together or in several files."""
    runs = [r for r in ctx.get("runs") or [] if r.producer == run.producer]
    return runs if any(r is run for r in runs) else [run, *runs]


# -- which release printed the run -----------------------------------------------------------------------

Releases = Tuple[int, int]     # the oldest and the newest release (NCCL version codes) that print a line


def _wc_error_releases(f: Dict[str, Any], text: str) -> Releases:
    if "peer" not in f:
        return 2_03_05, 2_09_99                      # "Got completion with error N, opcode ..." (from 2.3.5)
    if "status_name" in f:
        return 2_28_07, NEWEST                       # "status=IBV_WC_...(N)"
    if "status=" in text:
        return 2_20_00, 2_28_06                      # "with status=N opcode=N len=N"
    if "gid" in f:
        return 2_18_00, 2_19_99                      # ... "(Send) localGid G remoteGid G"
    return 2_10_00, 2_19_99                          # "from peer ... with error N, opcode"


def _modify_qp_releases(f: Dict[str, Any], text: str) -> Releases:
    if "device" in f:
        return 2_24_00, NEWEST                       # "failed with 110 Connection timed out, on dev ..."
    if "errno" in f:
        return 2_19_00, 2_23_99                      # "failed with error <text> errno <n>"
    return 2_07_00, 2_18_99                          # "failed with error <text>"


def _ibv_call_releases(f: Dict[str, Any], text: str) -> Optional[Releases]:
    # without its errno the line is printed alike by every release
    return (2_19_00, NEWEST) if "errno" in f else None


def _async_event_releases(f: Dict[str, Any], text: str) -> Releases:
    if "event_type" in f and "non-fatal" in text:
        return 2_28_07, NEWEST
    if "async error event" in text:
        return 2_23_00, 2_28_06
    if "device" in f:
        return 2_20_00, 2_22_99
    return 2_07_00, 2_19_99


def _gdr_hca_releases(f: Dict[str, Any], text: str) -> Releases:
    return (2_07_00, 2_12_99) if f.get("no_module") else (2_13_00, NEWEST)


def _bootstrap_releases(f: Dict[str, Any], text: str) -> Releases:
    return (2_07_00, 2_23_99) if re.search(r"Bootstrap\s+:", text) else (2_24_00, NEWEST)


# the messages whose shape tells releases apart, each read from its fields and text
_RELEASES_BY_SHAPE: Dict[str, Callable[[Dict[str, Any], str], Optional[Releases]]] = {
    "NCCL.IB_WC_ERROR": _wc_error_releases,
    "NCCL.IB_MODIFY_QP_FAILED": _modify_qp_releases,
    "NCCL.IBV_CALL_FAILED": _ibv_call_releases,
    "NCCL.IB_ASYNC_EVENT": _async_event_releases,
    "NCCL.GDR_HCA": _gdr_hca_releases,
    "NCCL.BOOTSTRAP_USING": _bootstrap_releases,
}
# the messages only releases from one on print, in any shape
_RELEASES_SINCE: Dict[str, Releases] = {
    "NCCL.IB_ASYNC_FATAL": (2_23_00, NEWEST),
    "NCCL.IB_CQE_ERROR": (2_29_00, NEWEST),
    "NCCL.IB_RESILIENCY_FATAL": (2_29_00, NEWEST),
}
_HINTS_SINCE = 2_30_00          # the NCCL.HINT_* lines


def _shape(m: Message) -> Optional[Releases]:
    """The releases whose source prints a message in this shape (nccl.toml `versions`)."""
    by_shape = _RELEASES_BY_SHAPE.get(m.id)
    if by_shape is not None:
        return by_shape(m.fields, m.text)
    if m.id in _RELEASES_SINCE:
        return _RELEASES_SINCE[m.id]
    if m.id.startswith("NCCL.HINT_"):
        return _HINTS_SINCE, NEWEST
    return None


def nccl_release(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """Which NCCL release printed the run: its "NCCL version" line, else the releases whose message shapes
    all of its lines fit (low, high as NCCL version codes; text "2.21.5" or "2.10-2.19")."""
    messages = _nccl_messages(run)
    for m in messages:
        if m.id == "NCCL.VERSION":
            c = code(m.fields.get("version", ""))
            if c:
                return _at(m, low=c, high=c, name=m.fields["version"].split("+")[0], exact=True)
    low, high, first = 0, NEWEST, None
    for m in messages:
        shape = _shape(m)
        if shape is None:
            continue
        first = first or m
        low, high = max(low, shape[0]), min(high, shape[1])
    if first is None or low > high:              # no clue, or ranks of different releases pasted together
        return None
    name = f"{_name(low)} or later" if high == NEWEST else f"{_name(low)}-{_name(high // 100 * 100)}"
    return _at(first, low=low, high=high, name=name, exact=False)


def nccl_release_high(run: Run, ctx) -> Optional[int]:
    """The newest release that can have printed the run (an NCCL version code), when its lines tell."""
    release = nccl_release(run, ctx)
    return release["high"] if release else None


def nccl_release_low(run: Run, ctx) -> Optional[int]:
    """The oldest release that can have printed the run (an NCCL version code), when its lines tell."""
    release = nccl_release(run, ctx)
    return release["low"] if release else None


def nccl_default_gid_index_zero(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The release that printed the run is older than 2.21: without NCCL_IB_GID_INDEX it uses GID index 0."""
    release = nccl_release(run, ctx)
    if release and release["high"] < AUTO_GID_INDEX:
        return {**release, "release": release["name"]}
    return None


def nccl_ignores_nvidia_peermem(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The release that printed the run is older than 2.23.4: its GPUDirect check looks only for
    /sys/kernel/mm/memory_peers/nv_mem*, not for the nvidia_peermem module itself."""
    release = nccl_release(run, ctx)
    if release and release["high"] < PEERMEM_DETECTED:
        return {**release, "release": release["name"]}
    return None


def nccl_detects_nvidia_peermem(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The release that printed the run is 2.23.4 or later: it sees nvidia_peermem however it is loaded."""
    release = nccl_release(run, ctx)
    if release and release["low"] >= PEERMEM_DETECTED:
        return {**release, "release": release["name"]}
    return None


# -- link layer and GIDs -----------------------------------------------------------------------------------

def _link_layers(run: Run) -> Iterable[Tuple[str, Message]]:
    for m in _nccl_messages(run):
        if m.id == "NCCL.IB_USING":
            for layer in re.findall(r":\d+[:\d]*/(IB|RoCE)\b", m.fields.get("devices", "")) or \
                    [m.fields.get("link_layer")]:
                if layer in ("IB", "RoCE"):
                    yield layer, m
        elif m.id == "NCCL.IB_WC_ERROR" and m.fields.get("gid"):
            yield "RoCE", m                        # NCCL prints the GIDs of a failed completion on RoCE only
        elif m.id == "NCCL.IB_QP_INFO":
            if m.fields.get("gid_index") is not None:
                yield "RoCE", m                    # the QP line names a GID on RoCE, a LID on InfiniBand
            elif m.fields.get("lid") is not None:
                yield "IB", m


def nccl_on_roce(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run's NCCL uses a RoCE port (its device list, a GID in a completion error or a QP line)."""
    for layer, m in _link_layers(run):
        if layer == "RoCE":
            return _at(m)
    return None


# a device of a driver that runs iWARP, in NCCL's list of the devices it uses; NCCL calls each port of theirs "RoCE",
# the link layer being Ethernet
_IWARP_CAPABLE = re.compile(rf"\](?P<device>{devices.IWARP_CAPABLE_NAME}):\d+")


def nccl_iwarp_capable_device(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run's NCCL uses a device whose driver runs iWARP (irdma, i40iw, cxgb4, siw, qedr, or an "iwp..." name)."""
    for m in _nccl_messages(run):
        if m.id == "NCCL.IB_USING":
            found = _IWARP_CAPABLE.search(m.fields.get("devices") or "")
            if found:
                return _at(m, device=found.group("device"))
    return None


def nccl_on_ib(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run's NCCL uses InfiniBand ports only (no RoCE port shown)."""
    layers = list(_link_layers(run))
    if layers and all(layer == "IB" for layer, _ in layers):
        return _at(layers[0][1])
    return None


def gid_family(gid: Optional[str]) -> Optional[str]:
    if not gid or gid in ("N/A",):
        return None
    g = gid.lower().split("%")[0]
    if g.startswith("::ffff:"):
        return "ipv4"
    if g.startswith("fe80:"):
        return "link-local"
    if g in ("::", "0:0:0:0:0:0:0:0"):
        return "empty"
    return "ipv6"


def qp_info_gid(prefix: Optional[str], iid: Optional[str]) -> Optional[str]:
    """The GID of a QP line's "GID 3 (80FE/2A13DFFFFE123456)": NCCL prints the two 64-bit halves as numbers
    read on a little-endian host ("%lX"), so fe80:: shows as 80FE and ::ffff:10.0.0.1 as 0/100000AFFFF0000."""
    try:
        raw = int(prefix or "", 16).to_bytes(8, "little") + int(iid or "", 16).to_bytes(8, "little")
    except (ValueError, OverflowError):
        return None
    address = ipaddress.IPv6Address(raw)
    return f"::ffff:{address.ipv4_mapped}" if address.ipv4_mapped else str(address)


def _roce_gids(run: Run) -> Iterable[Tuple[str, str, Message]]:
    """(which, gid, line) of every GID the run shows for a RoCE connection."""
    on_ib = nccl_on_ib(run, {}) is not None
    for m in _nccl_messages(run):
        if m.id == "NCCL.IB_WC_ERROR" or (m.id in ("NCCL.IB_MODIFY_QP_FAILED", "NCCL.IB_MODIFY_QP_RETRY")
                                          and not on_ib):
            for which in ("gid", "remote_gid"):
                if gid_family(m.fields.get(which)):
                    yield which, m.fields[which], m
        elif m.id == "NCCL.IB_QP_INFO" and m.fields.get("gid_index") is not None:
            gid = qp_info_gid(m.fields.get("subnet_prefix"), m.fields.get("interface_id"))
            if gid:
                yield "gid", gid, m


def nccl_link_local_gid(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """A RoCE connection of the run uses a link-local GID (fe80::...): NCCL picked a GID that carries no
    routable address."""
    for which, gid, m in _roce_gids(run):
        if gid_family(gid) == "link-local":
            return _at(m, gid=gid, which="local" if which == "gid" else "remote")
    return None


def nccl_gid_shown(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run shows which GIDs its RoCE connections use."""
    for _which, gid, m in _roce_gids(run):
        return _at(m, gid=gid, family=gid_family(gid))
    return None


# -- MTU -----------------------------------------------------------------------------------------------------

IBV_MTU = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


def nccl_mtu_differs(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The QP lines of the input (every rank's "NET/IB: ... mtu N") report different port MTUs."""
    if not any(r is run for r in ctx.get("runs") or []):
        return _mtus_differ(_input_runs(run, ctx))
    # every run of the input and producer gets the same answer: read their lines once, not once per run that asks
    return bysource.once_per_input(ctx, "nccl_mtu_differs:" + run.producer,
                                   lambda: _mtus_differ(_input_runs(run, ctx)))


def _mtus_differ(runs: List[Run]) -> Optional[Dict[str, Any]]:
    seen: Dict[int, Message] = {}
    for r in runs:
        for m in _nccl_messages(r):
            if m.id == "NCCL.IB_QP_INFO" and str(m.fields.get("mtu", "")).isdigit():
                seen.setdefault(int(m.fields["mtu"]), m)
    if len(seen) < 2:
        return None
    values = sorted(seen)
    return _at(seen[values[-1]], mtus=" and ".join(f"{IBV_MTU.get(v, v)}" for v in values))


# -- completions ---------------------------------------------------------------------------------------------

def nccl_completion(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run's first failed completion that is not a flush (status 5 only follows another error), else its
    first: status, name, vendor_err, peer, gid, remote_gid, device, line."""
    errors = [m for m in run.messages if m.id == "NCCL.IB_WC_ERROR" and str(m.fields.get("status", "")).isdigit()]
    if not errors:
        return None
    first = next((m for m in errors if int(m.fields["status"]) != 5), errors[0])
    status = int(first.fields["status"])
    info = {k: first.fields.get(k) for k in ("vendor_err", "peer", "gid", "remote_gid", "device")}
    name = first.fields.get("status_name") or (statuses().get(status) or {}).get("name", f"status {status}")
    info.update({"status": status, "name": name,
                 "line": first.line, "source": first.source, "quote": first.text, "count": len(errors)})
    return info


# -- nccl-tests ----------------------------------------------------------------------------------------------

def nccl_tests_unfinished(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """nccl-tests printed result rows and, after them, not the summary it prints once a test has gone through
    every size (src/util.cu: "# Out of bounds values" and "# Avg bus bandwidth"): the run stopped at its last row
    (it hung or died there) or the paste ends there. The summary is looked for after the last row in every run of
    the same file, for a line between them may have opened another run."""
    rows = [m for m in run.messages if m.id == "NCCL.TEST_RESULT"]
    if not rows:
        return None
    last = max(rows, key=lambda m: m.line)
    if bysource.last_message_line(run, ctx, last.source, "NCCL.TEST_SUMMARY") > last.line:
        return None
    return _at(last, size=last.fields.get("size"))


# -- GPUDirect RDMA ------------------------------------------------------------------------------------------

def nccl_gdr_in_use(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run shows GPUDirect RDMA in use: a channel "via NET/IB/0/GDRDMA" or "GPU Direct RDMA Enabled"."""
    for m in _nccl_messages(run):
        if (m.id == "NCCL.CHANNEL_VIA_NET" and m.fields.get("gdr")) or \
                (m.id in ("NCCL.GDR_HCA", "NCCL.GDR_PATH") and m.fields.get("gdr_state") == "Enabled"):
            return _at(m)
    return None


def nccl_gdr_disabled(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """NCCL said GPUDirect RDMA is disabled for a NIC (and showed no channel using it)."""
    if nccl_gdr_in_use(run, ctx):
        return None
    for m in _nccl_messages(run):
        if m.id in ("NCCL.GDR_HCA", "NCCL.GDR_PATH") and m.fields.get("gdr_state") == "Disabled":
            return _at(m, device=m.fields.get("device") or m.fields.get("hca"))
    return None


# -- sockets -------------------------------------------------------------------------------------------------

# NCCL's last resorts when NCCL_SOCKET_IFNAME is not set (src/misc/socket.cc ncclFindInterfaces()): after
# ib*, the NCCL_COMM_ID subnet and any other interface, it takes docker*, then lo, then virbr*.
_LAST_RESORT = re.compile(r"^(?:\[\d+\])?(docker\d*|lo|virbr\d*)$")


def nccl_oob_last_resort(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """NCCL's out-of-band (bootstrap or socket transport) interface is docker*, lo or virbr*: host-local
    interfaces the other hosts cannot reach. A rank that connects to a loopback address shows it too: the address
    is one some rank advertised (in the unique id or the bootstrap ring), which only its lo carries."""
    for m in _nccl_messages(run):
        if m.id in ("NCCL.BOOTSTRAP_USING", "NCCL.SOCKET_USING", "NCCL.IB_USING"):
            netdev = m.fields.get("netdev") or ""
            hit = _LAST_RESORT.match(netdev)
            if hit:
                return _at(m, netdev=hit.group(1), address=_host(m.fields.get("address")))
    old = _old_last_resort(_nccl_messages(run))
    if old:
        return old
    for m in _nccl_messages(run):
        if m.id in _CONNECT_FAILURES:
            address = _loopback(m.fields.get("peer"))
            if address:
                return _at(m, netdev="lo", address=address)
    return None


# NCCL 2.3 printed a process's interfaces one a line ("NET : Using interface lo:127.0.0.1<0>") and again with
# their GPU distances ("CUDA Dev 0, IP Interfaces : lo(SOC) eth0(SOC)"); the line prefix's host:pid tells
# whose list a line belongs to. Only a list of nothing but last resorts counts, as NCCL's own choice would.
_PROCESS = re.compile(r"^\s*(?P<process>[^\s:]+:\d+):\d+\s")
_DISTANCE_ENTRY = re.compile(r"([\w.@-]+)\([A-Z]+\)")


def _old_interfaces(m: Message) -> List[Tuple[str, Optional[str]]]:
    """The (netdev, address) pairs one 2.3 line lists."""
    if m.id == "NCCL.NET_USING_INTERFACE":
        return [(m.fields.get("netdev") or "", m.fields.get("address"))]
    return [(name, None) for name in _DISTANCE_ENTRY.findall(m.fields.get("interfaces") or "")]


def _old_last_resort(messages: List[Message]) -> Optional[Dict[str, Any]]:
    """A process whose 2.3 interface list holds only docker*, lo or virbr*: (the first such line, netdev)."""
    lists: Dict[str, List[Tuple[str, Optional[str], Message]]] = {}
    for m in messages:
        if m.id in ("NCCL.NET_USING_INTERFACE", "NCCL.SOCKET_IF_DISTANCES"):
            found = _PROCESS.match(m.text)
            key = found.group("process") if found else m.source
            lists.setdefault(key, []).extend((n, a, m) for n, a in _old_interfaces(m))
    for entries in lists.values():
        if entries and all(_LAST_RESORT.match(n) for n, _, _ in entries):
            netdev, address, m = next(((n, a, m) for n, a, m in entries if a), entries[0])
            return _at(m, netdev=netdev, address=_host(address) if address else "")
    return None


_CONNECT_FAILURES = ("NCCL.SOCKET_CONNECT_FAILED", "NCCL.SOCKET_CONNECT_POLL_FAILED")

# an interface of NCCL's list ("[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>") whose address is IPv6
# link-local: it reaches only the hosts of that one link (a container's veth, a tunnel)
_LINK_LOCAL = re.compile(
    r"(?:\[\d+\]|Using\s+)(?P<netdev>[\w.@-]+):(?P<address>fe[89ab][0-9a-f]:[0-9a-f:]*)(?:%[\w.@-]+)?<", re.IGNORECASE)


def nccl_oob_link_local(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """NCCL's bootstrap or socket transport lists an interface whose address is IPv6 link-local (fe80::/10):
    NCCL connects other hosts' ranks to it, and it reaches only the hosts on that link."""
    for m in _nccl_messages(run):
        if m.id in ("NCCL.BOOTSTRAP_USING", "NCCL.SOCKET_USING"):
            found = _LINK_LOCAL.search(m.text)
            if found:
                return _at(m, netdev=found.group("netdev"), address=found.group("address"))
    return None


def _host(address: Optional[str]) -> str:
    """NCCL's '<address><port>' form without the port: '10.0.0.1<45069>' -> '10.0.0.1'."""
    return (address or "").split("<")[0]


def _loopback(peer: Optional[str]) -> Optional[str]:
    """'127.0.0.1<45069>' -> '127.0.0.1' (and ::1); None for any other address."""
    text = _host(peer).strip("[]")
    try:
        return text if ipaddress.ip_address(text.split("%")[0]).is_loopback else None
    except ValueError:
        return None


# -- what else the input shows ---------------------------------------------------------------------------------

def _of_input(compute: Callable[[Run, Dict[str, Any]], Optional[Dict[str, Any]]]):
    """A feature that reads every run of the input, never the run that asks (unless the input has no runs):
    computed once per diagnosis, each run getting its own copy of the record."""
    @functools.wraps(compute)
    def feature(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if not ctx.get("runs"):
            return compute(run, ctx)
        found = bysource.once_per_input(ctx, compute.__name__, lambda: compute(run, ctx))
        return dict(found) if found is not None else None
    return feature


# rdma-core's udev names a device by its link layer (kernel-boot/rdma_rename.c: "ib", "roce", "iw" prefixes)
_ROCE_NAME = re.compile(r"^roce")


@_of_input
def nccl_roce_port_lid(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """A device listing of the input (ibstat, ibv_devinfo) shows a non-zero LID on an Ethernet port: its link
    layer says Ethernet, or rdma-core named the device "roce...". NCCL up to 2.11 takes a port with a LID for
    InfiniBand (no GRH), which the kernel refuses on RoCE; some drivers (irdma) report LID 1 on RoCE ports."""
    runs = ctx.get("runs") or [run]
    sources = [s.name for s in ctx.get("sources", [])] or sorted({m.source for r in runs for m in r.messages})
    for device, port, shown in pasted.listed_ports(runs, sources):
        ethernet = port["link_layer"] == "Ethernet" or (port["link_layer"] is None and _ROCE_NAME.match(device))
        if port["lid"] and ethernet and "lid" in shown:
            return _at(shown["lid"], device=device, lid=port["lid"])
    return None


@_of_input
def nccl_one_host(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """Every rank of the job runs on one host, so nothing of it crosses the network.

    The evidence: NCCL's "nNodes 1" (2.20 and later; every such line of the input says 1), or nccl-tests' device list
    naming one host for ranks 0 to n-1, each once, with the log going on after it (a list cut short could hide the
    other hosts' ranks)."""
    runs = ctx.get("runs") or [run]
    messages = [m for r in runs for m in _nccl_messages(r)]
    nodes = [m for m in messages if m.id == "NCCL.COMM_NODES"]
    if nodes:
        return _at(nodes[0]) if all(str(m.fields.get("nnodes")) == "1" for m in nodes) else None
    ranks = [m for m in messages if m.id == "NCCL.TEST_RANK_DEVICE" and str(m.fields.get("rank", "")).isdigit()]
    hosts = {m.fields.get("host") for m in ranks}
    if len(hosts) != 1 or sorted(int(m.fields["rank"]) for m in ranks) != list(range(len(ranks))):
        return None
    source, last = ranks[0].source, max(m.line for m in ranks)
    if not any(m.source == source and m.line > last for r in runs for m in r.messages):
        return None
    return _at(ranks[0])


@_of_input
def _job_on_many_hosts(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The job's ranks run on two hosts or more: nccl-tests' device list names them, or NCCL's nNodes says so."""
    messages = [m for r in (ctx.get("runs") or [run]) for m in _nccl_messages(r)]
    hosts = {str(m.fields["host"]) for m in messages if m.id == "NCCL.TEST_RANK_DEVICE" and m.fields.get("host")}
    if len(hosts) > 1 or any(str(m.fields.get("nnodes", "1")) not in ("", "1")
                             for m in messages if m.id == "NCCL.COMM_NODES"):
        return {"hosts": ", ".join(sorted(hosts))}
    return None


def nccl_one_ifname_many_hosts(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """NCCL_SOCKET_IFNAME names one interface (no list, no '^' exclusion) for a job whose ranks run on two hosts or
    more: every host must then have an interface of that name (or starting with it), which hosts whose interfaces
    are named differently lack (NVIDIA/nccl-tests#219)."""
    setting = run.settings.get("NCCL_SOCKET_IFNAME")
    if setting is None or not setting.value or any(c in setting.value for c in ",^"):
        return None
    many = _job_on_many_hosts(run, ctx)
    if many is None:
        return None
    return {"line": setting.line, "source": run.source, "quote": f"NCCL_SOCKET_IFNAME={setting.value}",
            "ifname": setting.value, "hosts": many["hosts"]}


@_of_input
def nccl_memlock_clue(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The input shows a small locked-memory limit: libibverbs' "RLIMIT_MEMLOCK is N bytes" warning in any
    run, or the facts (check's, or those the paste shows) of a limit below 1 GiB that applies."""
    for r in ctx.get("runs") or [run]:
        for m in r.messages:
            # libibverbs' check_memlock_limit() warning, in the verbs catalogue or in perftest's (D13)
            size = m.fields.get("size") or m.fields.get("bytes")
            if m.id in ("VERBS.MEMLOCK_LOW", "D13") and size:
                return _at(m, limit=f"{size} bytes")
    memlock = ((ctx.get("facts_view") or {}).get("memlock") or {})
    soft = memlock.get("soft")
    # NCCL pins buffers per channel and per peer: hundreds of MiB on a large job; a limit of 1 GiB or more is
    # not the clue
    if memlock.get("known") and not memlock.get("unlimited") and not memlock.get("exempt") and soft and soft < 1 << 30:
        return {"line": None, "source": "facts", "quote": f"memlock.soft = {soft}", "limit": f"{soft} bytes"}
    return None


@_of_input
def nccl_verbs_driver_warning(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """libibverbs warned in this input that it could not load a provider library ("couldn't load driver")
    or found no provider for a device."""
    for r in ctx.get("runs") or [run]:
        for m in r.messages:
            # libibverbs' provider warnings, in the verbs catalogue or in perftest's (D14, D15)
            if m.id in ("VERBS.DRIVER_LOAD_FAILED", "VERBS.NO_USERSPACE_DRIVER", "D14", "D15"):
                driver = m.fields.get("driver") or m.fields.get("device") or m.fields.get("path") or ""
                return _at(m, driver=driver.strip("'"))
    return None


FEATURES: Dict[str, Callable[[Run, Dict[str, Any]], Any]] = {
    f.__name__: f for f in (nccl_release, nccl_release_high, nccl_release_low, nccl_default_gid_index_zero,
                            nccl_ignores_nvidia_peermem, nccl_detects_nvidia_peermem, nccl_on_roce, nccl_on_ib,
                            nccl_iwarp_capable_device, nccl_roce_port_lid,
                            nccl_link_local_gid, nccl_gid_shown, nccl_mtu_differs, nccl_completion, nccl_gdr_in_use,
                            nccl_gdr_disabled, nccl_oob_last_resort, nccl_oob_link_local, nccl_one_host,
                            nccl_memlock_clue, nccl_one_ifname_many_hosts,
                            nccl_verbs_driver_warning, nccl_tests_unfinished)
}

FIELDS_OF: Dict[str, Tuple[str, ...]] = {
    "nccl_release": ("low", "high", "name", "line", "exact"),
    "nccl_default_gid_index_zero": ("line", "release"),
    "nccl_ignores_nvidia_peermem": ("line", "release"),
    "nccl_detects_nvidia_peermem": ("line", "release"),
    "nccl_on_roce": ("line",),
    "nccl_on_ib": ("line",),
    "nccl_iwarp_capable_device": ("line", "device"),
    "nccl_roce_port_lid": ("line", "device", "lid", "quote"),
    "nccl_link_local_gid": ("line", "gid", "which"),
    "nccl_gid_shown": ("line", "gid", "family"),
    "nccl_mtu_differs": ("line", "mtus"),
    "nccl_completion": ("status", "name", "vendor_err", "peer", "gid", "remote_gid", "device", "line", "count"),
    "nccl_gdr_in_use": ("line",),
    "nccl_oob_link_local": ("line", "netdev", "address"),
    "nccl_one_host": ("line",),
    "nccl_gdr_disabled": ("line", "device"),
    "nccl_oob_last_resort": ("line", "netdev", "address"),
    "nccl_memlock_clue": ("line", "limit"),
    "nccl_one_ifname_many_hosts": ("line", "ifname", "hosts"),
    "nccl_verbs_driver_warning": ("line", "driver"),
    "nccl_tests_unfinished": ("line", "size"),
}
