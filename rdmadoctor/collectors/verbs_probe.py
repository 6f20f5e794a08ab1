"""Read RDMA devices, ports and GIDs through pyverbs, in a child process; print one JSON document.

Run as a script (`python3 verbs_probe.py`), never imported by `check`: pyverbs is C code that can hang
holding the GIL or crash the interpreter, so the devices collector runs this file in a child process with a
deadline (sys.executable first, then the distribution's /usr/bin/python3, whose python3-pyverbs matches the
system's libibverbs). Standard library only: the child does not need rdmadoctor on its path.

Output: {"available": bool, "version"?, "error"?, "error_kind"?, "devices": [...]} where each device is
{"name", "node_type", "transport_type", "guid", "attr": {...}, "ports": [{...}], "error"?}. Values are raw
ints (ABI-stable, compared as ints, not through enum import paths); the collector names them.
"""
import json
import logging
import os
import socket
import sys
from typing import Any, Dict  # noqa: F401 - named in type comments (this file runs on the system's Python)

DEVICE_ATTRS = ("fw_version", "node_guid", "sys_image_guid", "max_mr_size", "page_size_cap", "vendor_id",
                "vendor_part_id", "hw_ver", "max_qp", "max_qp_wr", "device_cap_flags", "max_sge",
                "max_sge_rd", "max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom", "max_qp_init_rd_atom",
                "max_srq", "max_srq_wr", "max_srq_sge", "max_pkeys", "max_ah", "max_mcast_grp",
                "local_ca_ack_delay", "phys_port_cnt", "atomic_caps")
PORT_ATTRS = ("state", "max_mtu", "active_mtu", "gid_tbl_len", "port_cap_flags", "max_msg_sz", "bad_pkey_cntr",
              "qkey_viol_cntr", "pkey_tbl_len", "lid", "sm_lid", "lmc", "max_vl_num", "sm_sl", "subnet_timeout",
              "active_width", "active_speed", "phys_state", "link_layer", "flags")


def _version():
    try:
        import pyverbs
    except Exception:       # noqa: BLE001
        return None
    if _metadata_beside(pyverbs):
        try:
            from importlib import metadata
            return metadata.version("pyverbs")
        except Exception:   # noqa: BLE001 - unreadable or malformed metadata
            pass
    return getattr(pyverbs, "__version__", None)


def _metadata_beside(package):
    """Whether the directory that holds the package holds its metadata (a pip install of pyverbs puts it there).
    Debian's python3-pyverbs has none, and importing importlib.metadata to find that out costs 0.3 s in a TCG
    guest. (This file runs alone on the system's Python, so it cannot share rdmadoctor.runtime.dists.)"""
    try:
        where = os.path.dirname(list(package.__path__)[0])
        names = os.listdir(where)
    except (AttributeError, IndexError, OSError):
        return False
    return any(n.endswith((".dist-info", ".egg-info")) and n.split("-")[0].split(".")[0].lower() == "pyverbs"
               for n in names)


def _guid_text(value):
    """A __be64 read as an int (DeviceAttr.node_guid) -> 'xxxx:xxxx:xxxx:xxxx' like sysfs."""
    raw = int(value).to_bytes(8, sys.byteorder, signed=False)
    hexs = raw.hex()
    return ":".join(hexs[i:i + 4] for i in range(0, 16, 4))


def _err(exc):
    return {"type": type(exc).__name__, "message": str(exc), "errno": getattr(exc, "error_code", None)}


def probe():
    if not logging.getLogger().handlers:        # pyverbs/base.pyx calls logging.basicConfig(INFO) at import
        logging.getLogger().addHandler(logging.NullHandler())
    try:
        import pyverbs.device as d
        from pyverbs.pyverbs_error import PyverbsError
    except ImportError as exc:
        return {"available": False, "error_kind": "import", "error": str(exc), "python": sys.executable}
    out = {"available": True, "version": _version(), "python": sys.executable, "devices": []}
    try:
        devices = d.get_device_list()
    except PyverbsError as exc:                 # kernel without ib_core: 'Failed to get devices list', -1
        out.update(error_kind="device-list", error=str(exc), errno=getattr(exc, "error_code", None))
        return out
    for dev in devices:
        out["devices"].append(_device(d, dev, PyverbsError))
    return out


def _device(d, dev, PyverbsError):
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    ent = {"name": name, "node_type": int(dev.node_type), "transport_type": int(dev.transport_type),
           "guid": "%016x" % int(dev.guid), "index": getattr(dev, "index", None),
           "ports": []}  # type: Dict[str, Any]
    try:
        ctx = d.Context(name=name)
    except PyverbsError as exc:             # EACCES on /dev/infiniband/uverbsN, ...
        ent["error"] = dict(_err(exc), op="open")
        return ent
    try:
        try:
            attr = ctx.query_device()
        except PyverbsError as exc:
            ent["error"] = dict(_err(exc), op="query_device")
            return ent
        ent["attr"] = _attributes(attr)
        ent["ports"] = [_port(ctx, port, PyverbsError) for port in range(1, int(attr.phys_port_cnt) + 1)]
        total = sum(p["gid_tbl_len"] for p in ent["ports"] if "error" not in p)
        _gids(ctx, ent, total, PyverbsError)
    finally:
        ctx.close()
    return ent


def _attributes(attr):
    a = {}
    for key in DEVICE_ATTRS:
        value = getattr(attr, key, None)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        a[key] = value if value is None or isinstance(value, str) else int(value)
    a["node_guid"] = _guid_text(attr.node_guid)
    a["sys_image_guid"] = _guid_text(attr.sys_image_guid)
    return a


def _port(ctx, port, PyverbsError):
    p = {"port": port}
    try:
        pa = ctx.query_port(port)
    except PyverbsError as exc:
        p["error"] = dict(_err(exc), op="query_port")
        return p
    for key in PORT_ATTRS:
        value = getattr(pa, key, None)
        p[key] = None if value is None else int(value)
    p["active_speed_ex"] = int(getattr(pa, "active_speed_ex", 0) or 0)
    p["gids"] = []
    return p


def _gids(ctx, ent, total, PyverbsError):
    ports = {p["port"]: p for p in ent["ports"] if "error" not in p}
    try:
        table = ctx.query_gid_table(total) if total else []
    except (PyverbsError, AttributeError) as exc:
        ent["gid_table_error"] = _err(exc)
        table = None
    if table is None:                   # old kernels/libraries: one GID at a time
        for port in ports.values():
            _gids_one_by_one(ctx, port, PyverbsError)
        return
    for g in table:
        port = ports.get(int(g.port_num))
        if port is None:
            continue
        ifindex = int(g.ndev_ifindex)
        try:
            ndev = socket.if_indextoname(ifindex) if ifindex else None
        except OSError:
            ndev = None
        port["gids"].append({"index": int(g.gid_index), "gid": g.gid_str(), "gid_type": int(g.gid_type),
                             "ndev_ifindex": ifindex, "netdev": ndev})


def _gids_one_by_one(ctx, port, PyverbsError):
    """Zero GIDs are empty entries."""
    for idx in range(port.get("gid_tbl_len") or 0):
        try:
            gid = str(ctx.query_gid(port["port"], idx))
        except PyverbsError:
            continue
        if gid.replace(":", "").strip("0") == "":
            continue
        entry = {"index": idx, "gid": gid}
        try:
            entry["sysfs_gid_type"] = int(ctx.query_gid_type(port["port"], idx))   # 0 IB/RoCE v1, 1 RoCE v2
        except (PyverbsError, AttributeError):
            pass
        port["gids"].append(entry)


if __name__ == "__main__":
    try:
        result = probe()
    except Exception as exc:    # noqa: BLE001 - report, never a traceback instead of JSON
        result = {"available": False, "error_kind": "crash", "error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)
