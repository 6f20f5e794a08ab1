"""RDMA devices, ports and GIDs: what `ibv_devinfo -v` and `show_gids` print.

Two readers give the same facts: sysfs (/sys/class/infiniband, readable by any user, always run) and
pyverbs (run in a child process with a deadline, see verbs_probe.py). Sysfs alone gives everything except
the device capabilities (max_qp, ...) and the port MTUs, which only verbs can query; those fields stay null
and are listed as unreadable when pyverbs is not usable. When both work, pyverbs' values win and any
disagreement with sysfs is listed (a device that sysfs shows but libibverbs does not is itself a finding:
missing userspace provider, ib_uverbs not loaded, /dev/infiniband not in the container).

Port counters and hw_counters are sampled twice (`ctx.sample_seconds` apart) for deltas.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.runtime import proc

NAME = "devices"
TIMEOUT = 25.0

IB = "/sys/class/infiniband"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# ABI-stable values (rdma-core libibverbs/verbs.h, devinfo.c): compare ints, not enum import paths. The keys
# are whatever the pyverbs child's JSON holds: an unknown value is kept as it came.
PORT_STATE: Dict[Any, str] = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATE: Dict[Any, str] = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
                              6: "LinkErrorRecovery", 7: "PhyTest"}
LINK_LAYER: Dict[Any, str] = {0: "Unspecified", 1: "InfiniBand", 2: "Ethernet"}
MTU: Dict[Any, int] = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
WIDTH: Dict[Any, int] = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
SPEED_GBPS: Dict[Any, float] = {1: 2.5, 2: 5.0, 4: 10.0, 8: 10.0, 16: 14.0, 32: 25.0, 64: 50.0, 128: 100.0, 256: 200.0}
NODE_TYPE: Dict[Any, str] = {1: "CA", 2: "Switch", 3: "Router", 4: "RNIC", 5: "usNIC", 6: "usNIC UDP", 7: "unspecified"}
TRANSPORT: Dict[Any, str] = {0: "InfiniBand", 1: "iWARP", 2: "usNIC", 3: "usNIC UDP", 4: "unspecified"}
GID_ENTRY_TYPE: Dict[Any, str] = {0: "IB", 1: "IB/RoCE v1", 2: "RoCE v2"}    # GIDEntry.gid_type (ibv_gid_type)
SYSFS_GID_TYPE: Dict[Any, str] = {0: "IB/RoCE v1", 1: "RoCE v2"}    # ibv_query_gid_type (ibv_gid_type_sysfs)
# node_type (sysfs "1: CA") -> transport, as libibverbs derives it (ibv_node_type_str / transport)
NODE_TRANSPORT = {"CA": "InfiniBand", "Switch": "InfiniBand", "Router": "InfiniBand", "RNIC": "iWARP",
                  "usNIC": "usNIC", "usNIC UDP": "usNIC UDP"}
# devices without a PCI parent, named by the sysfs hints they leave
SOFT_DRIVERS = (("rxe", "rxe"), ("siw", "siw"))
CAPS = ("max_qp", "max_qp_wr", "max_cqe", "max_mr_size", "max_sge", "max_cq", "max_mr", "max_pd",
        "max_srq", "max_qp_rd_atom", "max_qp_init_rd_atom", "max_pkeys", "page_size_cap", "device_cap_flags",
        "local_ca_ack_delay", "atomic_caps")
BDF = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
VERBS_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verbs_probe.py")


def _split_code(text: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """'4: ACTIVE' -> (4, 'ACTIVE')."""
    if not text:
        return None, None
    code, _, name = text.partition(":")
    try:
        return int(code), name.strip() or None
    except ValueError:
        return None, text.strip()


def rate_gbps(rate: Optional[str]) -> Optional[float]:
    """'100 Gb/sec (4X EDR)' -> 100.0; '2.5 Gb/sec (1X SDR)' -> 2.5."""
    if not rate:
        return None
    m = re.match(r"\s*([0-9.]+)\s*Gb/sec", rate)
    return float(m.group(1)) if m else None


def canonical_gid(text: str) -> Tuple[str, Optional[str]]:
    """('fe80::5054:ff:fe00:101', None) / ('::ffff:192.0.2.1', '192.0.2.1')."""
    addr = ipaddress.IPv6Address(text)
    v4 = addr.ipv4_mapped
    if v4:                                      # RFC 5952 §5, the same on every Python version
        return f"::ffff:{v4}", str(v4)
    return addr.compressed, None


def _hex_int(ctx: CollectContext, path: str) -> Optional[int]:
    text = ctx.read_text(path)
    if text is None:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text, 0)
    except ValueError:
        return None


def _numbers(ctx: CollectContext, path: str, skip=("lifespan",)) -> Tuple[Dict[str, int], Dict[str, str]]:
    values: Dict[str, int] = {}
    errors: Dict[str, str] = {}
    for name in ctx.listdir(path):
        if name in skip or name.startswith("."):
            continue
        text, why = ctx.read(f"{path}/{name}")
        if text is None:
            errors[name] = why or "unreadable"
            continue
        try:
            values[name] = int(text.split()[0])
        except (ValueError, IndexError):
            errors[name] = f"not a number: {text[:40]!r}"
    return values, errors


# -- sysfs ---------------------------------------------------------------------------------------------

def sysfs_device(ctx: CollectContext, name: str) -> Dict[str, Any]:
    base = f"{IB}/{name}"
    code, node_type = _split_code(ctx.read_text(f"{base}/node_type"))
    real = ctx.realpath(f"{base}/device")
    pci = os.path.basename(real) if real and BDF.match(os.path.basename(real)) else None
    parent = ctx.read_text(f"{base}/parent")
    dev: Dict[str, Any] = {
        "name": name,
        "node_type": node_type, "node_type_code": code,
        "transport": NODE_TRANSPORT.get(node_type or ""),
        "driver": _driver(ctx, base, name, parent),
        "node_guid": ctx.read_text(f"{base}/node_guid"),
        "sys_image_guid": ctx.read_text(f"{base}/sys_image_guid"),
        "fw_ver": ctx.read_text(f"{base}/fw_ver") or None,
        "board_id": ctx.read_text(f"{base}/board_id"),
        "hca_type": ctx.read_text(f"{base}/hca_type"),
        "hw_rev": ctx.read_text(f"{base}/hw_rev"),
        "node_desc": ctx.read_text(f"{base}/node_desc"),
        "vendor_id": None, "vendor_part_id": None, "hw_ver": None,
        **{cap: None for cap in CAPS},
        "pci": pci,
        "parent": parent,
        "numa_node": ctx.read_int(f"{base}/device/numa_node") if pci else None,
        "netdevs": [],
        "uverbs": None,
        "source": "sysfs",
        "ports": [],
    }
    dev["ports"], dev["netdevs"] = _sysfs_ports(ctx, name, pci, parent)
    if not dev["ports"]:
        ctx.unreadable(f"{name} ports", f"{base}/ports: {ctx.listdir_or_why(base + '/ports')[1] or 'empty'}")
    dev["hw_counters"], errs = _numbers(ctx, f"{base}/hw_counters")
    if errs:
        ctx.unreadable(f"{name} hw_counters", _summarise(errs))
    for uv in ctx.listdir("/sys/class/infiniband_verbs"):
        if ctx.read_text(f"/sys/class/infiniband_verbs/{uv}/ibdev") == name:
            dev["uverbs"] = uv
    return dev


def _driver(ctx: CollectContext, base: str, name: str, parent: Optional[str]) -> Optional[str]:
    """The PCI driver; for a device without one, the software driver its name and parent netdev show."""
    driver = ctx.link_name(f"{base}/device/driver")
    if driver is not None or parent is None:
        return driver
    for prefix, drv in SOFT_DRIVERS:
        if name.startswith(prefix):
            driver = drv
    return driver or "parent"           # a software device bound to a netdev, kind unknown


def _sysfs_ports(ctx: CollectContext, name: str, pci: Optional[str],
                 parent: Optional[str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The device's ports, and its netdevs: the PCI function's net/ directory, rxe/siw's parent, every
    GID's and port's netdev."""
    base = f"{IB}/{name}"
    ports: List[Dict[str, Any]] = []
    netdevs: List[str] = []
    if pci:
        netdevs.extend(ctx.listdir(f"{base}/device/net"))
    if parent:
        netdevs.append(parent)
    for port in sorted(ctx.listdir(f"{base}/ports"), key=lambda p: int(p) if p.isdigit() else 0):
        if not port.isdigit():
            continue
        p = sysfs_port(ctx, name, int(port), pci_netdevs=ctx.listdir(f"{base}/device/net") if pci else [],
                       parent=parent)
        ports.append(p)
        netdevs.extend(g["netdev"] for g in p["gids"] if g.get("netdev"))
        if p.get("netdev"):
            netdevs.append(p["netdev"])
    return ports, sorted(set(netdevs))


def _summarise(errs: Dict[str, str]) -> str:
    whys = sorted(set(errs.values()))
    names = sorted(errs)
    shown = ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
    return f"{shown}: {'; '.join(whys)}"


def _port_netdev(ctx: CollectContext, pci_netdevs: List[str], port: int, gids: List[Dict[str, Any]],
                 parent: Optional[str]) -> Optional[str]:
    for g in gids:                              # the kernel's own mapping (RoCE)
        if g.get("netdev"):
            return g["netdev"]
    if parent:
        return parent
    if len(pci_netdevs) == 1:
        return pci_netdevs[0]
    for nd in pci_netdevs:                      # ibdev2netdev: dev_port (or dev_id) == port - 1
        dev_port = _hex_int(ctx, f"/sys/class/net/{nd}/dev_port")
        if dev_port is None:
            dev_port = _hex_int(ctx, f"/sys/class/net/{nd}/dev_id")
        if dev_port == port - 1:
            return nd
    return None


def sysfs_port(ctx: CollectContext, dev: str, port: int, pci_netdevs: List[str],
               parent: Optional[str]) -> Dict[str, Any]:
    base = f"{IB}/{dev}/ports/{port}"
    state_code, state = _split_code(ctx.read_text(f"{base}/state"))
    phys_code, phys = _split_code(ctx.read_text(f"{base}/phys_state"))
    for attr, value in (("state", state), ("phys_state", phys)):
        if value is None:
            ctx.unreadable(f"{dev}/{port} {attr}", ctx.read(f"{base}/{attr}")[1] or "empty")
    link_layer = ctx.read_text(f"{base}/link_layer")
    rate = ctx.read_text(f"{base}/rate")
    gid_names = [n for n in ctx.listdir(f"{base}/gids") if n.isdigit()]
    gids = sysfs_gids(ctx, dev, port, link_layer, gid_names)
    p: Dict[str, Any] = {
        "port": port,
        "state": state, "state_code": state_code,
        "phys_state": phys, "phys_state_code": phys_code,
        "link_layer": link_layer,
        "active_mtu": None, "max_mtu": None,
        "lid": _hex_int(ctx, f"{base}/lid"),
        "sm_lid": _hex_int(ctx, f"{base}/sm_lid"),
        "sm_sl": ctx.read_int(f"{base}/sm_sl"),
        "lid_mask_count": ctx.read_int(f"{base}/lid_mask_count"),
        "cap_mask": ctx.read_text(f"{base}/cap_mask"),
        "rate": rate,
        "rate_gbps": rate_gbps(rate),
        "gid_tbl_len": len(gid_names) if gid_names else None,
        "gids": gids,
        "netdev": None,
        "netdev_mtu": None,
    }
    p["netdev"] = _port_netdev(ctx, pci_netdevs, port, gids, parent)
    if p["netdev"]:
        p["netdev_mtu"] = ctx.read_int(f"/sys/class/net/{p['netdev']}/mtu")
    p["counters"], errs = _numbers(ctx, f"{base}/counters")
    if errs:
        ctx.unreadable(f"{dev}/{port} counters", _summarise(errs))
    p["hw_counters"], errs = _numbers(ctx, f"{base}/hw_counters")
    if errs:
        ctx.unreadable(f"{dev}/{port} hw_counters", _summarise(errs))
    return p


def sysfs_gids(ctx: CollectContext, dev: str, port: int, link_layer: Optional[str],
               names: List[str]) -> List[Dict[str, Any]]:
    """Non-empty GIDs. Empty entries read as the zero GID; their gid_attrs fail with EINVAL."""
    base = f"{IB}/{dev}/ports/{port}"
    out = []
    for name in sorted(names, key=int):
        text = ctx.read_text(f"{base}/gids/{name}")
        if not text or text == ZERO_GID:
            continue
        try:
            gid, v4 = canonical_gid(text)
        except ValueError:
            ctx.unreadable(f"{dev}/{port} gid {name}", f"not a GID: {text!r}")
            continue
        gtype, why = ctx.read(f"{base}/gid_attrs/types/{name}")
        if link_layer == "InfiniBand":
            gtype = "IB"
        elif gtype is None and why and why.startswith("ENOENT") and not ctx.isdir(f"{base}/gid_attrs"):
            gtype = "IB/RoCE v1"                # kernels before gid_attrs: v1 only (libibverbs does the same)
        ndev = ctx.read_text(f"{base}/gid_attrs/ndevs/{name}")
        entry = {"index": int(name), "gid": gid, "type": gtype, "netdev": ndev or None}
        if v4:
            entry["ipv4"] = v4
        out.append(entry)
    return out


def read_sysfs(ctx: CollectContext) -> List[Dict[str, Any]]:
    names = [n for n in ctx.listdir(IB) if not n.startswith(".")]
    return [sysfs_device(ctx, n) for n in names]


# -- pyverbs (child process) -----------------------------------------------------------------------------

def run_verbs_probe(ctx: CollectContext, timeout: float = 15.0) -> Dict[str, Any]:
    """The child's JSON, or {'available': False, 'error': why}. Tries each of runtime.proc.pythons()."""
    last: Dict[str, Any] = {"available": False, "error": "no Python interpreter to run pyverbs"}
    for exe in proc.pythons():
        try:
            res = ctx.run([exe, "-I", VERBS_PROBE], timeout=timeout)
        except Unavailable as exc:
            last = {"available": False, "error_kind": "run", "error": str(exc), "python": exe}
            if "did not finish" in str(exc):
                return last                     # a hang is not cured by another interpreter
            continue
        try:
            doc = json.loads(res.stdout)
        except ValueError:
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
            last = {"available": False, "error_kind": "crash", "python": exe,
                    "error": f"pyverbs probe exited {res.rc} without a result: {tail[:300]}"}
            continue
        if doc.get("available") or doc.get("error_kind") != "import":
            return doc
        last = doc
    return last


def _merge(dev: Dict[str, Any], v: Dict[str, Any], ctx: CollectContext) -> None:
    """Overlay one pyverbs device onto its sysfs record, listing disagreements."""
    if "error" in v:
        dev["verbs_error"] = v["error"]
        ctx.unreadable(f"{dev['name']} via verbs", f"{v['error'].get('op')}: {v['error'].get('message')}")
        return
    disagree = _merge_attributes(dev, v)
    sys_ports = {p["port"]: p for p in dev["ports"]}
    for vp in v.get("ports", []):
        p = sys_ports.get(vp["port"])
        if p is None:
            p = {"port": vp["port"], "gids": [], "counters": {}, "hw_counters": {}, "netdev": None}
            dev["ports"].append(p)
            disagree.append(f"port {vp['port']}: seen by verbs only")
        if "error" in vp:
            p["verbs_error"] = vp["error"]
            ctx.unreadable(f"{dev['name']}/{vp['port']} via verbs", vp["error"].get("message", ""))
            continue
        disagree += _merge_port(p, vp)
        disagree += _merge_gids(p, vp)
    if disagree:
        dev["disagreements"] = disagree


def _merge_attributes(dev: Dict[str, Any], v: Dict[str, Any]) -> List[str]:
    disagree = []
    a = v.get("attr") or {}
    dev["source"] = "pyverbs"
    dev["transport"] = TRANSPORT.get(v.get("transport_type"), dev.get("transport"))
    for key, vkey in (("node_guid", "node_guid"), ("sys_image_guid", "sys_image_guid"), ("fw_ver", "fw_version")):
        value = a.get(vkey)
        if value in ("", None):
            continue
        if dev.get(key) not in (None, "") and str(dev[key]) != str(value):
            disagree.append(f"{key}: sysfs {dev[key]!r}, verbs {value!r}")
        dev[key] = value
    for key in ("vendor_id", "vendor_part_id", "hw_ver", *CAPS):
        if key in a:
            dev[key] = a[key]
    dev["phys_port_cnt"] = a.get("phys_port_cnt")
    return disagree


def _merge_port(p: Dict[str, Any], vp: Dict[str, Any]) -> List[str]:
    disagree = []
    named = {"state": PORT_STATE.get(vp.get("state"), vp.get("state")),
             "phys_state": PHYS_STATE.get(vp.get("phys_state"), vp.get("phys_state")),
             "link_layer": LINK_LAYER.get(vp.get("link_layer"), vp.get("link_layer")),
             "lid": vp.get("lid"), "sm_lid": vp.get("sm_lid"), "gid_tbl_len": vp.get("gid_tbl_len")}
    for key, value in named.items():
        if p.get(key) is not None and value is not None and p[key] != value:
            disagree.append(f"port {vp['port']} {key}: sysfs {p[key]!r}, verbs {value!r}")
        p[key] = value
    p["state_code"], p["phys_state_code"] = vp.get("state"), vp.get("phys_state")
    p["active_mtu"], p["max_mtu"] = MTU.get(vp.get("active_mtu")), MTU.get(vp.get("max_mtu"))
    speed = vp.get("active_speed_ex") or vp.get("active_speed")
    p["active_width"] = WIDTH.get(vp.get("active_width"))
    p["active_speed_gbps_per_lane"] = SPEED_GBPS.get(speed)
    p["port_cap_flags"] = vp.get("port_cap_flags")
    p["max_msg_sz"] = vp.get("max_msg_sz")
    p["pkey_tbl_len"] = vp.get("pkey_tbl_len")
    return disagree


def _verbs_gid(g: Dict[str, Any], link_layer: Any) -> Optional[Dict[str, Any]]:
    try:
        gid, v4 = canonical_gid(g["gid"])
    except (ValueError, KeyError):
        return None
    if "gid_type" in g:
        gtype = GID_ENTRY_TYPE.get(g["gid_type"], g["gid_type"])
    else:
        gtype = SYSFS_GID_TYPE.get(g.get("sysfs_gid_type"))
    if link_layer == "InfiniBand":
        gtype = "IB"
    entry = {"index": g["index"], "gid": gid, "type": gtype, "netdev": g.get("netdev")}
    if v4:
        entry["ipv4"] = v4
    return entry


def _merge_gids(p: Dict[str, Any], vp: Dict[str, Any]) -> List[str]:
    disagree = []
    vgids = [e for e in (_verbs_gid(g, p.get("link_layer")) for g in vp.get("gids", [])) if e is not None]
    old = {(g["index"], g["gid"], g["type"]) for g in p.get("gids", [])}
    new = {(g["index"], g["gid"], g["type"]) for g in vgids}
    if old != new and p.get("gids"):
        disagree.append(f"port {vp['port']} gids: sysfs {sorted(old - new)}, verbs {sorted(new - old)}")
    by_index = {g["index"]: g for g in p.get("gids", [])}
    for g in vgids:                          # verbs gives the ifindex; sysfs the name: keep what we have
        if not g.get("netdev") and by_index.get(g["index"], {}).get("netdev"):
            g["netdev"] = by_index[g["index"]]["netdev"]
    p["gids"] = sorted(vgids, key=lambda g: g["index"])
    return disagree


# -- counters --------------------------------------------------------------------------------------------

def _sample(ctx: CollectContext, devices: List[Dict[str, Any]]) -> Dict[Tuple[str, int], Dict[str, Dict[str, int]]]:
    out = {}
    for d in devices:
        for p in d["ports"]:
            base = f"{IB}/{d['name']}/ports/{p['port']}"
            out[(d["name"], p["port"])] = {"counters": _numbers(ctx, f"{base}/counters")[0],
                                           "hw_counters": _numbers(ctx, f"{base}/hw_counters")[0]}
    return out


def _deltas(ctx: CollectContext, devices: List[Dict[str, Any]], first: Dict, t0: float) -> None:
    second = _sample(ctx, devices)
    seconds = round(time.monotonic() - t0, 3)
    for d in devices:
        for p in d["ports"]:
            a, b = first.get((d["name"], p["port"])), second.get((d["name"], p["port"]))
            if not a or not b:
                continue
            deltas = {}
            for kind in ("counters", "hw_counters"):
                for k, v in b[kind].items():
                    if k in a[kind]:
                        deltas[k] = v - a[kind][k]
                p[kind] = b[kind]           # the newest values
            p["counter_deltas"] = deltas
            p["delta_seconds"] = seconds


# -- the collector ---------------------------------------------------------------------------------------

def collect(ctx: CollectContext) -> Dict[str, Any]:
    subsystem = ctx.isdir(IB) or ctx.exists("/sys/module/ib_core")
    names, why = ctx.listdir_or_why(IB)
    if names is None and not ctx.isdir("/sys/class"):
        raise Unavailable(f"cannot read /sys/class ({why}): not Linux, or sysfs is not mounted")
    t0 = time.monotonic()
    devices = read_sysfs(ctx)
    first = _sample(ctx, devices) if devices else {}
    sample_from = time.monotonic()
    pyverbs = _pyverbs(ctx)
    if pyverbs.get("available") and "devices" in pyverbs and not pyverbs.get("error"):
        _overlay_verbs(devices, pyverbs["devices"], ctx)
    verbs_ok = any(d.get("source") == "pyverbs" for d in devices)
    for dev in devices:
        dev.setdefault("verbs_visible", None)
        if dev.get("source") != "pyverbs":
            why_not = pyverbs.get("error") or "libibverbs did not list the device"
            ctx.unreadable(f"{dev['name']}: device capabilities and port MTUs",
                           f"only verbs can query them; pyverbs: {why_not}")
    _counter_deltas(ctx, devices, first, sample_from)
    ctx.source = "pyverbs+sysfs" if verbs_ok else "sysfs"
    uverbs = [u for u in ctx.listdir("/sys/class/infiniband_verbs") if u.startswith("uverbs")]
    summary: Dict[str, Any] = {k: pyverbs[k] for k in ("available", "version", "python", "error_kind", "error",
                                                       "errno") if k in pyverbs}
    if "devices" in pyverbs:
        summary["devices"] = [v.get("name") for v in pyverbs["devices"]]
    data: Dict[str, Any] = {
        "devices": devices,
        "pyverbs": summary,
        "uverbs_devices": uverbs,
        "rdma_subsystem": bool(subsystem),
        "seconds_sysfs": round(sample_from - t0, 3),
    }
    if not devices:
        data["note"] = ("no RDMA subsystem in this kernel: /sys/class/infiniband and /sys/module/ib_core are absent"
                        if not subsystem else "the RDMA subsystem is loaded but has no device "
                        "(no provider driver bound, no 'rdma link add' for rxe/siw, or another network namespace)")
    return data


def _pyverbs(ctx: CollectContext) -> Dict[str, Any]:
    if not ctx.use_pyverbs:
        return {"available": False, "error": "not used (sysfs only was asked for)"}
    if not ctx.live:
        return {"available": False, "error": "not run: reading a saved tree, not this host"}
    return run_verbs_probe(ctx)


def _overlay_verbs(devices: List[Dict[str, Any]], verbs_devices: List[Dict[str, Any]], ctx: CollectContext) -> None:
    by_name = {d["name"]: d for d in devices}
    for v in verbs_devices:
        dev = by_name.get(v["name"])
        if dev is None:                     # in verbs but not in sysfs: unusual (another SYSFS_PATH?)
            dev = {"name": v["name"], "ports": [], "netdevs": [], "source": "pyverbs", "pci": None,
                   "driver": None, "node_type": NODE_TYPE.get(v.get("node_type")), "counters": {}}
            devices.append(dev)
        dev["verbs_visible"] = True
        _merge(dev, v, ctx)
    for dev in devices:
        if "verbs_visible" not in dev:
            dev["verbs_visible"] = False     # sysfs has it, libibverbs does not list it


def _counter_deltas(ctx: CollectContext, devices: List[Dict[str, Any]], first: Dict, sample_from: float) -> None:
    """Live: wait out the sample interval and take the second sample. A saved tree has no deltas."""
    if devices and ctx.live and ctx.sample_seconds > 0:
        left = ctx.sample_seconds - (time.monotonic() - sample_from)
        if left > 0:
            time.sleep(left)
        _deltas(ctx, devices, first, sample_from)
        return
    for d in devices:
        for p in d["ports"]:
            p["counter_deltas"], p["delta_seconds"] = None, None
