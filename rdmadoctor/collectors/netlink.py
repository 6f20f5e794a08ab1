"""Interfaces, addresses, routes, neighbours, queueing disciplines and the route to the peer, through rtnetlink
(pyroute2).

Read-only kernel queries, no packets sent (`route get` asks the kernel's FIB). Works as non-root. Without
pyroute2, or when reading a fixture tree, the links come from /sys/class/net and the rest is listed as
unreadable. The queries go over a netlink socket of the standard library and pyroute2's message classes
decode the answers (0.7.2, Debian 12, to 0.9.x; attributes are read through get_attr() and msg.get()):
pyroute2's IPRoute is built on asyncio from 0.7 on, and importing it took 4.1 s of check's 7.5 s in a lab
guest.
"""
from __future__ import annotations

import importlib.util
import ipaddress
import os
import socket
import struct
import sys
import threading
import types
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from rdmadoctor.collectors import tc
from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.runtime.dists import installed_version
from rdmadoctor.runtime.net import same_address

NAME = "netlink"
TIMEOUT = 15.0

NUD = {0: "none", 1: "incomplete", 2: "reachable", 4: "stale", 8: "delay", 16: "probe", 32: "failed",
       64: "noarp", 128: "permanent"}
RTN_TYPE = {0: "unspec", 1: "unicast", 2: "local", 3: "broadcast", 4: "anycast", 5: "multicast",
            6: "blackhole", 7: "unreachable", 8: "prohibit", 9: "throw", 10: "nat", 11: "xresolve"}
RT_SCOPE = {0: "universe", 200: "site", 253: "link", 254: "host", 255: "nowhere"}
RT_PROTO = {0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 16: "dhcp", 186: "bgp",
            188: "ospf", 9: "ra"}
IFF_UP = 0x1
RT_TABLE_MAIN = 254


class Pyroute2(NamedTuple):
    """pyroute2's rtnetlink message classes (each decodes one message: ifinfmsg(data).decode()), its exception
    and its version."""
    ifinfmsg: Any
    ifaddrmsg: Any
    rtmsg: Any
    ndmsg: Any
    NetlinkError: Any
    version: Optional[str]


_PYROUTE2: List[Pyroute2] = []
_PYROUTE2_LOCK = threading.Lock()


def pyroute2_api() -> Pyroute2:
    """The message classes, NetlinkError and the version; ImportError without pyroute2.

    pyroute2's package __init__ imports every family it knows (IPDB, NDB, conntrack, nl80211, wireguard...):
    40% of its import time, 2 of `check`'s 10 seconds on a lab VM. Only the rtnetlink messages and the
    exceptions are needed, so they are imported under a bare stand-in for the package, which is dropped
    afterwards: a later `import pyroute2` runs the real __init__ and reuses the modules already loaded. A
    layout this does not fit falls back to the plain import.
    """
    with _PYROUTE2_LOCK:        # the collectors run in threads; sys.modules must not see two stand-ins
        if not _PYROUTE2:
            _PYROUTE2.append(_import_pyroute2())
        return _PYROUTE2[0]


def _import_pyroute2() -> Pyroute2:
    if "pyroute2" not in sys.modules:
        spec = importlib.util.find_spec("pyroute2")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("No module named 'pyroute2'")
        stand_in = types.ModuleType("pyroute2")
        stand_in.__path__ = list(spec.submodule_search_locations)
        stand_in.__spec__ = spec
        sys.modules["pyroute2"] = stand_in
        try:
            try:
                from pyroute2.config.version import __version__ as version
            except ImportError:
                version = None
            return _message_classes(version)
        except Exception:       # noqa: BLE001 - another layout: forget the partial import, do the plain one
            for name in [n for n in sys.modules if n == "pyroute2" or n.startswith("pyroute2.")]:
                del sys.modules[name]
        finally:
            if sys.modules.get("pyroute2") is stand_in:
                del sys.modules["pyroute2"]
    import pyroute2
    return _message_classes(getattr(pyroute2, "__version__", None))


def _message_classes(version: Optional[str]) -> Pyroute2:
    from pyroute2.netlink.exceptions import NetlinkError
    from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
    from pyroute2.netlink.rtnl.ndmsg import ndmsg
    from pyroute2.netlink.rtnl.rtmsg import rtmsg
    return Pyroute2(ifinfmsg, ifaddrmsg, rtmsg, ndmsg, NetlinkError, version)


# linux/netlink.h and linux/rtnetlink.h
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
RTM_GETLINK, RTM_GETADDR, RTM_GETROUTE, RTM_GETNEIGH, RTM_GETQDISC = 18, 22, 26, 30, 38
RTA_DST = 1
_NLMSGHDR = struct.Struct("=IHHII")       # length, type, flags, sequence number, port id
RECEIVE_BYTES = 1 << 20                   # the kernel sends a dump in datagrams of a few pages each


class Rtnetlink:
    """The queries this collector makes (links, addresses, routes, neighbours, the route to one address) on a
    NETLINK_ROUTE socket, each request built as linux/rtnetlink.h lays it out, each answer decoded by pyroute2's
    message class; every receive is bounded by TIMEOUT."""

    def __init__(self, api: Pyroute2):
        self.api = api
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
        try:
            self.sock.settimeout(TIMEOUT)
            self.sock.bind((0, 0))
        except BaseException:
            self.sock.close()
            raise
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Rtnetlink":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_links(self) -> List[Any]:
        return self._ask(self.api.ifinfmsg, RTM_GETLINK, NLM_F_DUMP, struct.pack("=BxHiII", 0, 0, 0, 0, 0))

    def get_addr(self) -> List[Any]:
        return self._ask(self.api.ifaddrmsg, RTM_GETADDR, NLM_F_DUMP, struct.pack("=BBBBI", 0, 0, 0, 0, 0))

    def get_routes(self, family: int) -> List[Any]:
        return self._ask(self.api.rtmsg, RTM_GETROUTE, NLM_F_DUMP, struct.pack("=8BI", family, 0, 0, 0, 0, 0, 0, 0, 0))

    def get_neighbours(self) -> List[Any]:
        return self._ask(self.api.ndmsg, RTM_GETNEIGH, NLM_F_DUMP, struct.pack("=BxxxiHBB", 0, 0, 0, 0, 0))

    def get_qdiscs(self) -> List[bytes]:
        """The qdisc dump, each message's payload as the kernel sent it (collectors/tc.py decodes them)."""
        return self._ask(None, RTM_GETQDISC, NLM_F_DUMP, tc.TCMSG.pack(0, 0, 0, 0, 0, 0, 0))

    def route_to(self, address: "ipaddress.IPv4Address | ipaddress.IPv6Address") -> List[Any]:
        """What `ip route get ADDRESS` asks: the kernel's FIB lookup for one destination."""
        family = socket.AF_INET if address.version == 4 else socket.AF_INET6
        dst = address.packed
        body = struct.pack("=8BI", family, address.max_prefixlen, 0, 0, 0, 0, 0, 0, 0)
        body += struct.pack("=HH", 4 + len(dst), RTA_DST) + dst        # an attribute of 4 or 16 bytes: aligned
        return self._ask(self.api.rtmsg, RTM_GETROUTE, 0, body)

    def _ask(self, message_class: Any, kind: int, flags: int, body: bytes) -> List[Any]:
        """The answers to one request: a dump's messages up to NLMSG_DONE, or a request's one answer; each decoded
        by `message_class`, or its payload as bytes when that is None."""
        self.seq += 1
        seq = self.seq
        self.sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | flags, seq, 0) + body)
        out: List[Any] = []
        while True:
            data = self.sock.recv(RECEIVE_BYTES)
            if not data:
                raise OSError("rtnetlink sent an empty datagram")
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, mtype, _, mseq, _ = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size or offset + length > len(data):
                    raise OSError(f"rtnetlink sent a message of {length} bytes in a datagram of {len(data)}")
                if mseq == seq:        # (an answer to an earlier request that timed out is skipped)
                    if mtype == NLMSG_DONE:
                        return out
                    if mtype == NLMSG_ERROR:
                        code = -struct.unpack_from("=i", data, offset + _NLMSGHDR.size)[0]
                        if code:
                            raise self.api.NetlinkError(code, os.strerror(code))
                        return out     # an acknowledgement
                    out.append(_message(message_class, data[offset:offset + length]))
                    if not flags & NLM_F_DUMP:
                        return out
                offset += (length + 3) & ~3


def _message(message_class: Any, raw: bytes) -> Any:
    """One answer decoded by `message_class`, or its payload (after the header) as bytes when that is None."""
    if message_class is None:
        return raw[_NLMSGHDR.size:]
    message = message_class(raw)
    message.decode()
    return message


PREFIX = {"ifinfmsg": "IFLA_", "ifaddrmsg": "IFA_", "rtmsg": "RTA_", "ndmsg": "NDA_"}


def _get(msg: Any, name: str) -> Any:
    """An NLA by its short name, through get_attr('RTA_OIF') (works from 0.7.2 to 0.9.x; msg.get('oif') does
    not resolve route attributes in 0.7.2)."""
    prefix = PREFIX.get(type(msg).__name__)
    if prefix:
        try:
            value = msg.get_attr(prefix + name.upper())
            if value is not None:
                return value
        except Exception:    # noqa: BLE001
            pass
    try:
        return msg.get(name)
    except Exception:        # noqa: BLE001 - pyroute2 raises on odd NLA names in some versions
        return None


def _attr(msg: Any, nla: str) -> Any:
    try:
        return msg.get_attr(nla)
    except Exception:        # noqa: BLE001
        return None


def _kind(link: Any) -> Optional[str]:
    info = _attr(link, "IFLA_LINKINFO")
    if info is None:
        return None
    try:
        return info.get_attr("IFLA_INFO_KIND")
    except Exception:        # noqa: BLE001
        return None


def sysfs_links(ctx: CollectContext) -> List[Dict[str, Any]]:
    out = []
    for name in ctx.listdir("/sys/class/net"):
        base = f"/sys/class/net/{name}"
        flags = ctx.read_text(f"{base}/flags")
        try:
            flag_bits = int(flags, 16) if flags else None
        except ValueError:
            flag_bits = None
        carrier = ctx.read_text(f"{base}/carrier")
        out.append({"index": ctx.read_int(f"{base}/ifindex"), "ifname": name,
                    "operstate": (ctx.read_text(f"{base}/operstate") or "").upper() or None,
                    "admin_up": bool(flag_bits & IFF_UP) if flag_bits is not None else None,
                    "carrier": int(carrier) if carrier and carrier.isdigit() else None,
                    "mtu": ctx.read_int(f"{base}/mtu"), "kind": None,
                    "address": ctx.read_text(f"{base}/address"),
                    "master": ctx.link_name(f"{base}/master")})
    return sorted(out, key=lambda link: (link["index"] is None, link["index"] or 0))


def _links(ipr: Rtnetlink) -> List[Dict[str, Any]]:
    links = list(ipr.get_links())
    names = {link["index"]: _get(link, "ifname") for link in links}
    out = []
    for link in links:
        master = _get(link, "master")
        out.append({"index": link["index"], "ifname": _get(link, "ifname"), "operstate": _get(link, "operstate"),
                    "admin_up": bool(link["flags"] & IFF_UP), "carrier": _get(link, "carrier"),
                    "mtu": _get(link, "mtu"), "kind": _kind(link), "address": _get(link, "address"),
                    "master": names.get(master) if master else None})
    return out


def _addresses(ipr: Rtnetlink, names: Dict[int, str]) -> List[Dict[str, Any]]:
    out = []
    for a in ipr.get_addr():
        fam = 4 if a["family"] == socket.AF_INET else 6
        out.append({"ifname": names.get(a["index"]), "index": a["index"], "family": fam,
                    "address": _get(a, "address"), "prefixlen": a["prefixlen"],
                    "scope": RT_SCOPE.get(a["scope"], a["scope"])})
    return out


def _arp_ignore(ctx: CollectContext, addresses: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Optional[int]]]:
    """net.ipv4.conf.<name>.arp_ignore for "all" and each netdev that holds an IPv4 address (None: unreadable; the
    kernel answers with the larger of "all" and the netdev's own, IN_DEV_ARP_IGNORE). At 0, every interface answers ARP
    for every address of the host: two RDMA netdevs in one subnet answer for each other (librdmacm.md, "Using multiple
    interfaces"). None when the addresses were not read."""
    if addresses is None:
        return None
    names = sorted({a["ifname"] for a in addresses if a.get("family") == 4 and isinstance(a.get("ifname"), str)
                    and "/" not in a["ifname"] and a["ifname"] not in (".", "..", "all", "default")})
    return {name: ctx.read_int(f"/proc/sys/net/ipv4/conf/{name}/arp_ignore") for name in ["all", *names]}


def _route_table(r: Any) -> Optional[int]:
    table = _attr(r, "RTA_TABLE")
    return table if table is not None else r["table"]


def _routes(ipr: Rtnetlink, names: Dict[int, str]) -> List[Dict[str, Any]]:
    out = []
    for fam in (socket.AF_INET, socket.AF_INET6):
        try:
            routes = list(ipr.get_routes(family=fam))
        except Exception:    # noqa: BLE001 - no IPv6 in this kernel
            continue
        for r in routes:
            if _route_table(r) != RT_TABLE_MAIN:
                continue
            dst = _get(r, "dst")
            oif = _get(r, "oif")
            out.append({"family": 4 if fam == socket.AF_INET else 6,
                        "dst": f"{dst}/{r['dst_len']}" if dst else "default",
                        "gateway": _get(r, "gateway"), "oif": oif, "ifname": names.get(oif),
                        "prefsrc": _get(r, "prefsrc"), "type": RTN_TYPE.get(r["type"], r["type"]),
                        "proto": RT_PROTO.get(r["proto"], r["proto"]),
                        "scope": RT_SCOPE.get(r["scope"], r["scope"]), "metric": _get(r, "priority")})
    return out


def _neighbours(ipr: Rtnetlink, names: Dict[int, str]) -> List[Dict[str, Any]]:
    out = []
    for n in ipr.get_neighbours():
        out.append({"ifname": names.get(n["ifindex"]), "index": n["ifindex"], "dst": _get(n, "dst"),
                    "lladdr": _get(n, "lladdr"), "state": NUD.get(n["state"], n["state"])})
    return out


def _qdiscs(ipr: Rtnetlink, names: Dict[int, str]) -> List[Dict[str, Any]]:
    """Each netdev's root qdisc and every netem or tbf one (collectors/tc.py)."""
    return [q for q in (tc.qdisc(payload, names) for payload in ipr.get_qdiscs()) if q is not None]


def _peer(ipr: Rtnetlink, peer: str, names: Dict[int, str], neighbours: List[Dict[str, Any]]) -> Dict[str, Any]:
    NetlinkError = pyroute2_api().NetlinkError
    out: Dict[str, Any] = {"address": peer}
    try:
        addr = ipaddress.ip_address(peer)
    except ValueError:
        out["route"] = {"error": f"not an IP address: {peer!r}"}
        return out
    try:
        r = ipr.route_to(addr)[0]
    except NetlinkError as exc:
        out["route"] = {"error": f"{exc.code}: {exc.args[1] if len(exc.args) > 1 else exc}", "errno": exc.code}
        return out
    oif = _get(r, "oif")
    gw = _get(r, "gateway")
    out["route"] = {"oif": oif, "ifname": names.get(oif), "src": _get(r, "prefsrc"), "gateway": gw,
                    "type": RTN_TYPE.get(r["type"], r["type"]), "error": None}
    hop = gw or str(addr)
    found = [n for n in neighbours if n["dst"] and n["index"] == oif and same_address(n["dst"], hop)]
    out["neighbour"] = ({"dst": hop, "state": found[0]["state"], "lladdr": found[0]["lladdr"]} if found
                        else {"dst": hop, "state": "absent", "lladdr": None})
    return out


def collect(ctx: CollectContext) -> Dict[str, Any]:
    if not ctx.live:
        return _sysfs_only(ctx, "not read: a saved tree without /sys/class/net",
                           ("addresses", "routes", "neighbours", "qdiscs"),
                           "needs rtnetlink on the live host (saved tree: only /sys/class/net)")
    try:
        api = pyroute2_api()
    except ImportError as exc:
        return _sysfs_only(ctx, f"pyroute2 is not installed ({exc}) and /sys/class/net is unreadable",
                           ("addresses", "routes", "neighbours", "qdiscs") + (("peer route",) if ctx.peer else ()),
                           f"pyroute2 is not installed: {exc}")
    data: Dict[str, Any] = {"pyroute2": _pyroute2_version(api)}
    try:
        ipr = Rtnetlink(api)
    except Exception as exc:     # noqa: BLE001 - EPERM in a sandbox, no AF_NETLINK off Linux
        raise Unavailable(f"cannot open rtnetlink: {type(exc).__name__}: {exc}")
    try:
        _read_rtnetlink(ctx, ipr, data)
    finally:
        ipr.close()
    ctx.source = "rtnetlink (pyroute2)"
    return data


def _sysfs_only(ctx: CollectContext, unavailable: str, unread: Tuple[str, ...], why: str) -> Dict[str, Any]:
    """The links as /sys/class/net shows them; what only rtnetlink gives is listed as unreadable."""
    links = sysfs_links(ctx)
    if not links:
        raise Unavailable(unavailable)
    ctx.source = "sysfs"
    for what in unread:
        ctx.unreadable(what, why)
    return {"links": links, "addresses": None, "routes": None, "neighbours": None, "qdiscs": None}


def _pyroute2_version(api: Any) -> Optional[str]:
    version = api.version
    if version in (None, "unknown"):                # Debian's 0.7.2 package says "unknown"
        version = installed_version("pyroute2") or version
    return version


def _read_rtnetlink(ctx: CollectContext, ipr: Rtnetlink, data: Dict[str, Any]) -> None:
    """Links, then addresses, routes and neighbours (each may fail alone), then the route to the peer."""
    data["links"] = _links(ipr)
    names = {link["index"]: link["ifname"] for link in data["links"]}
    for key, fn in (("addresses", _addresses), ("routes", _routes), ("neighbours", _neighbours),
                    ("qdiscs", _qdiscs)):
        try:
            data[key] = fn(ipr, names)
        except Exception as exc:     # noqa: BLE001
            data[key] = None
            ctx.unreadable(key, f"{type(exc).__name__}: {exc}")
    data["arp_ignore"] = _arp_ignore(ctx, data.get("addresses"))
    if ctx.peer:
        try:
            data["peer"] = _peer(ipr, ctx.peer, names, data.get("neighbours") or [])
        except Exception as exc:     # noqa: BLE001
            ctx.unreadable("peer route", f"{type(exc).__name__}: {exc}")
