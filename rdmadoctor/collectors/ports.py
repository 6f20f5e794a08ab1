"""Who listens on the perftest side-channel port (TCP 18515 by default) in this network namespace.

psutil lists the sockets; without the rights to see another user's process, pid is null (psutil gives
pid=None, fd=-1 to non-root users) and the owner is reported as not visible, not as "nobody". A process's
command line is kept only for the RDMA test programs (RDMA_TOOLS: their options are what a diagnosis reads);
any other program's may hold a password and never goes into the facts. perftest's processes are also listed
with the TCP ports they listen on (`perftest`): the agent tells a peer only their binary, the options that
must match and those ports (views/perftest_procs.public()). Without psutil,
/proc/net/tcp{,6} give the listeners without their owners. rdma_cm listeners (ib_*_bw -R, rping -s) are not
TCP sockets: they are listed from `rdma resource show cm_id` when the rdma tool can read them.
"""
from __future__ import annotations

import json
import socket
import struct
from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.collectors import perftest_procs
from rdmadoctor.collectors.base import CollectContext, Unavailable

NAME = "ports"
TIMEOUT = 10.0
RDMA_TOOLS = ("ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat",
              "ib_atomic_bw", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat", "rping", "ibv_rc_pingpong",
              "ibv_ud_pingpong", "ibv_uc_pingpong", "ibv_srq_pingpong", "ucmatose", "udaddy", "rdma_server",
              "rdma_client", "qperf")
TCP_LISTEN = "0A"


def _asked_ports(ctx: CollectContext) -> List[int]:
    ports = [ctx.port]
    if ctx.probe_port and ctx.probe_port != ctx.port:
        ports.append(ctx.probe_port)
    return ports


def proc_net_listeners(ctx: CollectContext, ports: List[int]) -> Optional[List[Dict[str, Any]]]:
    out: List[Dict[str, Any]] = []
    read_any = False
    for path, fam in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        text = ctx.read_text(path)
        if text is None:
            continue
        read_any = True
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) < 4 or parts[3] != TCP_LISTEN:
                continue
            addr, _, port_hex = parts[1].partition(":")
            port = int(port_hex, 16)
            if port not in ports:
                continue
            raw = bytes.fromhex(addr)
            if fam == 4:
                ip = socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
            else:
                words = struct.unpack(">4I", raw)
                ip = socket.inet_ntop(socket.AF_INET6, b"".join(struct.pack("<I", w) for w in words))
            out.append({"ip": ip, "port": port, "family": fam, "pid": None, "process": None, "cmdline": None,
                        "user": None, "uid": int(parts[7]) if len(parts) > 7 and parts[7].isdigit() else None})
    return out if read_any else None


def psutil_listeners(ports: List[int]) -> List[Dict[str, Any]]:
    import psutil
    out = []
    for c in psutil.net_connections(kind="tcp"):
        if c.status != psutil.CONN_LISTEN or not c.laddr or c.laddr.port not in ports:
            continue
        ent: Dict[str, Any] = {"ip": c.laddr.ip, "port": c.laddr.port,
                               "family": 4 if c.family == socket.AF_INET else 6,
                               "pid": c.pid, "process": None, "cmdline": None, "user": None}
        if c.pid is not None:
            try:
                p = psutil.Process(c.pid)
                name = p.name()
                ent.update(process=name, cmdline=p.cmdline() if name in RDMA_TOOLS else None, user=p.username())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, KeyError) as exc:
                ent["process_error"] = type(exc).__name__
        out.append(ent)
    return out


def rdma_processes(found: List[Tuple[Any, Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """The RDMA test programs among `found` (perftest_procs.processes_named's answer)."""
    return [{"pid": info["pid"], "process": info["name"], "cmdline": info.get("cmdline"), "user": info.get("username")}
            for _, info in found if info.get("name") in RDMA_TOOLS]


def cm_ids(ctx: CollectContext) -> Optional[List[Dict[str, Any]]]:
    res = ctx.run(["rdma", "-j", "resource", "show", "cm_id"], timeout=3.0)
    if res.rc != 0:
        raise Unavailable(f"rdma resource show cm_id: {(res.stderr.strip() or 'exit %d' % res.rc)[:200]}")
    text = res.stdout.strip()
    if not text:
        return []
    doc = json.loads(text)
    return doc if isinstance(doc, list) else [doc]


def processes(ctx: CollectContext) -> Dict[str, Any]:
    """The RDMA test programs running here, and perftest's with the ports they listen on
    (collectors/perftest_procs.py); None for what cannot be listed (no /proc and no psutil, or no rights). The
    process table is walked once for both (a cluster node runs thousands of processes)."""
    readers = (("rdma_processes", "RDMA test processes", rdma_processes),
               ("perftest", "perftest processes", perftest_procs.collect))
    try:
        found = list(perftest_procs.processes_named(frozenset(RDMA_TOOLS) | frozenset(perftest_procs.TOOLS)))
    except ImportError:
        return {name: None for name, _, _ in readers}
    except Exception as exc:     # noqa: BLE001 - psutil.AccessDenied and the like
        for _, what, _ in readers:
            ctx.unreadable(what, f"{type(exc).__name__}: {exc}")
        return {name: None for name, _, _ in readers}
    out: Dict[str, Any] = {}
    for name, what, reader in readers:
        try:
            out[name] = reader(found)
        except Exception as exc:     # noqa: BLE001 - psutil.AccessDenied and the like
            out[name] = None
            ctx.unreadable(what, f"{type(exc).__name__}: {exc}")
    return out


def collect(ctx: CollectContext) -> Dict[str, Any]:
    ports = _asked_ports(ctx)
    data: Dict[str, Any] = {"port": ctx.port, "ports_asked": ports}
    notes = ["only this network namespace is visible",
             "rdma_cm listeners (ib_*_bw -R, rping -s) are not TCP sockets: see cm_ids"]
    listeners = _tcp_listeners(ctx, ports, notes)
    if any(l["pid"] is None for l in listeners):
        why = ("the owning process is not visible to this user (run as root to see it)" if not ctx.is_root
               else "the owning process is not visible (another namespace, or hidepid)")
        if ctx.live:
            ctx.unreadable("owner of a listening socket", why)
        notes.append("pid null: " + why)
    data["tcp_listeners"] = listeners
    if ctx.live:
        data.update(processes(ctx))
    data["cm_ids"] = _cm_ids_or_none(ctx, notes)
    data["notes"] = notes
    return data


def _tcp_listeners(ctx: CollectContext, ports: List[int], notes: List[str]) -> List[Dict[str, Any]]:
    """The TCP listeners on the ports asked about: from psutil on a live host (it names their processes), else
    from /proc/net/tcp. psutil finds a socket's process by reading the descriptors of every process; where
    /proc/net/tcp (which psutil reads for the sockets) shows nobody listening on those ports, it is not asked."""
    if ctx.live:
        if proc_net_listeners(ctx, ports) == []:
            ctx.source = "/proc/net/tcp"
            return []
        try:
            listeners = psutil_listeners(ports)
            ctx.source = "psutil"
            return listeners
        except ImportError:
            notes.append("psutil is not installed: listeners from /proc/net/tcp, without their processes")
        except Exception as exc:     # noqa: BLE001 - psutil.AccessDenied on some platforms
            notes.append(f"psutil failed ({type(exc).__name__}: {exc}); listeners from /proc/net/tcp")
    from_proc = proc_net_listeners(ctx, ports)
    ctx.source = "/proc/net/tcp"
    if from_proc is None:
        raise Unavailable("cannot list TCP sockets: psutil unusable and /proc/net/tcp unreadable")
    return from_proc


def _cm_ids_or_none(ctx: CollectContext, notes: List[str]) -> Optional[List[Dict[str, Any]]]:
    """The rdma_cm ids, or None: a kernel without an RDMA subsystem is noted, any other failure is unreadable."""
    try:
        return cm_ids(ctx)
    except (Unavailable, ValueError) as exc:
        if "NETLINK_RDMA" in str(exc) and not ctx.exists("/sys/module/ib_core"):
            notes.append("no rdma_cm ids: this kernel has no RDMA subsystem (no ib_core)")
        else:
            ctx.unreadable("rdma_cm ids", str(exc))
        return None
