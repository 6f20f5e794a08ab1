"""Does the peer answer? TCP connects that tell refused, rejected, timed out and unreachable apart; ARP.

A TCP connect ends one of these ways, and each means something different:
    open         the port accepted (someone listens)
    refused      a TCP RST came back: the host is up, nothing listens on the port
    rejected     an ICMP "port unreachable" / "administratively prohibited" came back instead of a RST:
                 a packet filter's reject rule (a closed port answers with a RST, never with ICMP)
    unreachable  ICMP host/net unreachable, or the kernel's own: no ARP answer for the address
    timeout      nothing came back before the deadline: a filter drops the SYN, or the host is gone
With IP_RECVERR set, the kernel queues the ICMP error on the socket, so its type, code and sender (the peer
itself, a router, or this host for a failed ARP) can be read back: that is how a firewall's reject is told
from a closed port. Both give ECONNREFUSED to a plain connect().

ARP (RoCE, IPv4): /proc/net/arp says whether this host already knew the peer's MAC. With CAP_NET_RAW, one
ARP request on the egress netdev says within a second whether anything answers for the address now, which
tells "the host (or its link) is gone" from "a firewall drops everything" without waiting for the kernel's
neighbour timers (5 s + 3 probes).
"""
from __future__ import annotations

import errno as _errno
import ipaddress
import os
import select
import socket
import struct
import time
from typing import Any, Dict, Optional, Tuple, Union

IP_RECVERR = 11
SO_EE_ORIGIN_LOCAL, SO_EE_ORIGIN_ICMP = 1, 2
ICMP_UNREACH_CODES = {0: "net unreachable", 1: "host unreachable", 2: "protocol unreachable",
                      3: "port unreachable", 9: "net administratively prohibited",
                      10: "host administratively prohibited", 13: "communication administratively prohibited"}
FILTER_CODES = (3, 9, 10, 13)        # what a reject rule sends (icmp port-unreachable is nft's default)


def _icmp_error(sock: socket.socket) -> Optional[Dict[str, Any]]:
    """The ICMP error queued on the socket (IP_RECVERR), without blocking."""
    try:
        sock.setblocking(False)             # with a timeout set, Python would first wait for POLLIN
        _, ancillary, _, _ = sock.recvmsg(512, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
    except OSError:
        return None
    for level, _kind, data in ancillary:
        if level != socket.IPPROTO_IP or len(data) < 16:
            continue
        ee_errno, origin, icmp_type, icmp_code, _, _, _ = struct.unpack("=IBBBBII", data[:16])
        offender = None
        if len(data) >= 24:                      # struct sockaddr_in after sock_extended_err
            family = struct.unpack("=H", data[16:18])[0]
            if family == socket.AF_INET:
                offender = socket.inet_ntoa(data[20:24])
        return {"origin": {SO_EE_ORIGIN_ICMP: "icmp", SO_EE_ORIGIN_LOCAL: "local"}.get(origin, str(origin)),
                "type": icmp_type, "code": icmp_code, "errno": _errno.errorcode.get(ee_errno, ee_errno),
                "name": ICMP_UNREACH_CODES.get(icmp_code, f"type {icmp_type} code {icmp_code}")
                if icmp_type == 3 else f"type {icmp_type} code {icmp_code}",
                "from": offender}
    return None


def tcp_connect(host: str, port: int, timeout: float, source: Optional[str] = None,
                keep: bool = False) -> Tuple[Optional[socket.socket], Dict[str, Any]]:
    """(the connected socket if keep and open, else None; the outcome). Never raises for the network."""
    started = time.monotonic()
    out: Dict[str, Any] = {"port": port, "state": "error"}
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return None, dict(out, error=f"not an IP address: {host!r}", seconds=0.0)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        if source:
            try:
                sock.bind((source, 0))
            except OSError:
                pass                              # an address not (or no longer) on this host: let the kernel pick
        sock.settimeout(timeout)
        try:
            sock.connect((host, port))
            out["state"] = "open"
        except socket.timeout:
            out["state"] = "timeout"
        except OSError as exc:
            out.update(_failed_connect(sock, exc, source))
    finally:
        out["seconds"] = round(time.monotonic() - started, 3)
        if not (keep and out["state"] == "open"):
            sock.close()
            sock = None  # type: ignore[assignment]
    return sock, out


def _failed_connect(sock: socket.socket, exc: OSError, source: Optional[str]) -> Dict[str, Any]:
    """What a failed connect says: refused by the peer, rejected by an ICMP error (a filter, often), no
    route or no ARP answer, a timeout; the ICMP error queued on the socket, when there is one."""
    out: Dict[str, Any] = {"errno": _errno.errorcode.get(exc.errno or 0, exc.errno)}
    icmp = _icmp_error(sock)
    if icmp is not None:
        out["icmp"] = icmp
    by_icmp = bool(icmp and icmp["origin"] == "icmp")
    if exc.errno == _errno.ECONNREFUSED:
        out["state"] = "rejected" if by_icmp else "refused"
    elif exc.errno in (_errno.EHOSTUNREACH, _errno.ENETUNREACH, _errno.EACCES, _errno.EPERM):
        if by_icmp and icmp is not None and icmp["code"] in FILTER_CODES:
            out["state"] = "rejected"
        else:
            out["state"] = "unreachable"
            local = (icmp is None or icmp.get("from") in (None, source) or _is_local_address(icmp.get("from")))
            out["no_arp"] = exc.errno == _errno.EHOSTUNREACH and local
    elif exc.errno == _errno.ETIMEDOUT:
        out["state"] = "timeout"
    else:
        out["error"] = os.strerror(exc.errno) if exc.errno else str(exc)
    return out


def _is_local_address(address: Optional[str]) -> bool:
    if not address:
        return False
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.bind((address, 0))
            return True
        finally:
            probe.close()
    except OSError:
        return False


# -- ARP ----------------------------------------------------------------------------------------------------

def arp_entry(address: str, path: str = "/proc/net/arp") -> Dict[str, Any]:
    """This host's ARP entry for the address: {"known": bool, "mac", "device", "flags"}."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()[1:]
    except OSError as exc:
        return {"known": None, "error": exc.strerror}
    for line in lines:
        cols = line.split()
        if len(cols) >= 6 and cols[0] == address:
            flags = int(cols[2], 16)
            mac = cols[3]
            complete = bool(flags & 0x2) and mac != "00:00:00:00:00:00"
            return {"known": complete, "mac": mac if complete else None, "device": cols[5], "flags": cols[2]}
    return {"known": False, "mac": None}


def _mac_of(ifname: str) -> Optional[bytes]:
    try:
        with open(f"/sys/class/net/{ifname}/address") as f:
            text = f.read().strip()
        raw = bytes(int(x, 16) for x in text.split(":"))
        return raw if len(raw) == 6 else None
    except (OSError, ValueError):
        return None


def arp_probe(ifname: str, source: str, target: str, timeout: float = 1.0) -> Dict[str, Any]:
    """One broadcast ARP request for target on ifname; {"state": "answered"|"silent"|"not-run", ...}."""
    started = time.monotonic()
    ready = _arp_ready(ifname, source, target)
    if isinstance(ready, dict):
        return ready
    mac, src_ip, dst_ip = ready
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    except OSError as exc:
        return {"state": "not-run", "why": f"no raw socket ({exc.strerror}): needs root or CAP_NET_RAW"}
    try:
        sock.bind((ifname, 0x0806))
        frame = (b"\xff" * 6 + mac + struct.pack("!H", 0x0806)
                 + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + src_ip + b"\0" * 6 + dst_ip)
        sock.send(frame)
        return _arp_reply(sock, dst_ip, started, started + timeout)
    except OSError as exc:
        return {"state": "not-run", "why": f"ARP probe failed: {exc.strerror or exc}"}
    finally:
        sock.close()


def _arp_ready(ifname: str, source: str, target: str) -> Union[Dict[str, Any], Tuple[bytes, bytes, bytes]]:
    """(this link's MAC, source and target addresses as bytes), or why no ARP request can be sent."""
    if not hasattr(socket, "AF_PACKET"):
        return {"state": "not-run", "why": "no AF_PACKET sockets on this platform"}
    mac = _mac_of(ifname)
    if ifname == "lo" or mac == b"\0" * 6:
        return {"state": "not-run", "why": f"{ifname} is not an Ethernet link"}
    if mac is None:
        return {"state": "not-run", "why": f"{ifname} has no Ethernet address (not an Ethernet netdev)"}
    try:
        return mac, socket.inet_aton(source), socket.inet_aton(target)
    except OSError:
        return {"state": "not-run", "why": "not IPv4 addresses"}


def _arp_reply(sock: socket.socket, dst_ip: bytes, started: float, deadline: float) -> Dict[str, Any]:
    """Waits for the target's ARP reply until the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return {"state": "silent", "seconds": round(time.monotonic() - started, 3)}
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            continue
        data = sock.recv(128)
        if len(data) < 42 or data[12:14] != b"\x08\x06":
            continue
        op = struct.unpack("!H", data[20:22])[0]
        if op == 2 and data[28:32] == dst_ip:
            sender = ":".join("%02x" % b for b in data[22:28])
            return {"state": "answered", "mac": sender, "seconds": round(time.monotonic() - started, 3)}
