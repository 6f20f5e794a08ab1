"""The PCIe link of each RDMA device that has a PCI parent: speed and width, current against capable.

Virtual devices (rxe, siw) have no PCI function; they are listed under `virtual`.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional

from rdmadoctor.collectors.base import CollectContext, Unavailable

NAME = "pci"
TIMEOUT = 5.0
BDF = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def gts(text: Optional[str]) -> Optional[float]:
    """'8.0 GT/s PCIe' / '16.0 GT/s' / '2.5 GT/s' -> 8.0; 'Unknown' -> None."""
    if not text:
        return None
    m = re.match(r"\s*([0-9.]+)\s*GT/s", text)
    return float(m.group(1)) if m else None


def width(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    m = re.match(r"\s*x?(\d+)", text)
    return int(m.group(1)) if m else None


def collect(ctx: CollectContext) -> Dict[str, Any]:
    names, why = ctx.listdir_or_why("/sys/class/infiniband")
    if names is None:
        if not ctx.isdir("/sys/class"):
            raise Unavailable(f"cannot read /sys/class ({why})")
        names = []
    out = []
    virtual = []
    for dev in names:
        if dev.startswith("."):
            continue
        real = ctx.realpath(f"/sys/class/infiniband/{dev}/device")
        bdf = os.path.basename(real) if real else None
        if not real or not BDF.match(bdf or ""):
            virtual.append(dev)
            continue
        base = f"/sys/class/infiniband/{dev}/device"
        rec: Dict[str, Any] = {"device": dev, "bdf": bdf}
        for key in ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width"):
            text, why = ctx.read(f"{base}/{key}")
            rec[key] = text
            if text is None:
                ctx.unreadable(f"{dev} {key}", why or "unreadable")
        rec["current_gts"], rec["max_gts"] = gts(rec["current_link_speed"]), gts(rec["max_link_speed"])
        rec["current_width"], rec["max_width"] = width(rec["current_link_width"]), width(rec["max_link_width"])
        rec["numa_node"] = ctx.read_int(f"{base}/numa_node")
        rec["local_cpulist"] = ctx.read_text(f"{base}/local_cpulist")
        rec["vendor"] = ctx.read_text(f"{base}/vendor")
        rec["device_id"] = ctx.read_text(f"{base}/device")
        rec["driver"] = ctx.link_name(f"{base}/driver")
        out.append(rec)
    ctx.source = "sysfs"
    data: Dict[str, Any] = {"devices": out, "virtual": virtual}
    if not out:
        data["note"] = "no RDMA device with a PCI function" + (f" (virtual: {', '.join(virtual)})" if virtual else "")
    return data
