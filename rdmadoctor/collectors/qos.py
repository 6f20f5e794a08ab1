"""The lossless-Ethernet settings of each RDMA netdev, read-only: which priorities have PFC (iproute2's `dcb`),
whether link-level pause is on (`ethtool -a`), and NVIDIA's trust state (`mlnx_qos -i`, where installed).

RoCE without PFC (or a lossy-mode configuration the NIC handles) loses packets under congestion; the two ends
of a link must agree on which priority is lossless. What a tool does not report, or a netdev does not support
(virtio, Soft-RoCE's netdev), is listed as not readable, never as "off".
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from rdmadoctor.collectors.base import CollectContext, Unavailable

NAME = "qos"
TIMEOUT = 8.0
IB = "/sys/class/infiniband"


def rdma_netdevs(ctx: CollectContext) -> List[str]:
    """The netdevs under RDMA ports (gid_attrs/ndevs), in order, once each."""
    out: List[str] = []
    for dev in ctx.listdir(IB):
        for port in ctx.listdir(f"{IB}/{dev}/ports"):
            for entry in ctx.listdir(f"{IB}/{dev}/ports/{port}/gid_attrs/ndevs"):
                netdev = ctx.read_text(f"{IB}/{dev}/ports/{port}/gid_attrs/ndevs/{entry}")
                if netdev and netdev not in out:
                    out.append(netdev)
    return out


def _output(ctx: CollectContext, argv: List[str], what: str) -> Optional[str]:
    """What the tool printed, or None with the reason noted as unreadable (missing, timed out, failed)."""
    try:
        res = ctx.run(argv, timeout=3.0)
    except Unavailable as exc:
        ctx.unreadable(what, str(exc))
        return None
    if res.rc != 0:
        ctx.unreadable(what, (res.stderr.strip() or f"{argv[0]} exited {res.rc}")[:200])
        return None
    return res.stdout


def _pfc(ctx: CollectContext, netdev: str) -> Optional[Dict[str, Any]]:
    """`dcb -j pfc show dev X`: {"enabled": [priorities], "mbc": ..., "delay": ...}, or None (not readable)."""
    stdout = _output(ctx, ["dcb", "-j", "pfc", "show", "dev", netdev], f"PFC of {netdev}")
    if stdout is None:
        return None
    try:
        doc = json.loads(stdout or "{}")
    except ValueError:
        ctx.unreadable(f"PFC of {netdev}", "dcb printed no JSON")
        return None
    enabled = doc.get("prio_pfc") or doc.get("prio-pfc") or []
    prios = sorted(int(p["prio"]) for p in enabled if isinstance(p, dict) and p.get("enabled") and "prio" in p)
    return {"enabled": prios, "raw": {k: v for k, v in doc.items() if k in ("mbc", "delay", "pfc_cap")}}


def _pause(ctx: CollectContext, netdev: str) -> Optional[Dict[str, Any]]:
    """`ethtool -a X`: link-level (global) pause, {"rx": bool, "tx": bool, "autoneg": bool}."""
    stdout = _output(ctx, ["ethtool", "-a", netdev], f"pause of {netdev}")
    if stdout is None:
        return None
    out: Dict[str, Any] = {}
    for key, name in (("Autonegotiate", "autoneg"), ("RX", "rx"), ("TX", "tx")):
        m = re.search(rf"^{key}:\s*(on|off)\b", stdout, re.M | re.I)
        if m:
            out[name] = m.group(1).lower() == "on"
    return out or None


def _trust(ctx: CollectContext, netdev: str) -> Optional[str]:
    """`mlnx_qos -i X`'s "Priority trust state" (pcp | dscp), where NVIDIA's tool is installed."""
    if ctx.which("mlnx_qos") is None:
        return None
    try:
        res = ctx.run(["mlnx_qos", "-i", netdev], timeout=5.0)
    except Unavailable as exc:
        ctx.unreadable(f"trust state of {netdev}", str(exc))
        return None
    m = re.search(r"Priority trust state:\s*(\w+)", res.stdout)
    return m.group(1).lower() if m else None


def collect(ctx: CollectContext) -> Dict[str, Any]:
    if not ctx.live:
        raise Unavailable("not read: a saved tree has no QoS settings (they come from dcb, ethtool, mlnx_qos)")
    netdevs = rdma_netdevs(ctx)
    if not netdevs:
        raise Unavailable("no netdev under an RDMA port (InfiniBand, or no RDMA device)")
    links = []
    for netdev in netdevs:
        links.append({"netdev": netdev, "pfc": _pfc(ctx, netdev), "pause": _pause(ctx, netdev),
                      "trust": _trust(ctx, netdev)})
    return {"links": links}
