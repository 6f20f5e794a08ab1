"""Kernel side of RDMA: loaded modules, /dev/infiniband, the netns mode, RDMA lines of the kernel log, config.

The kernel log is read from /dev/kmsg (root, or dmesg_restrict=0), then `journalctl -k`, then
/var/log/kern.log; when none is readable the section says so and why (never "no errors").
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.collectors.base import CollectContext, Unavailable, errno_text
from rdmadoctor.knowledge.perftest import TOOLS as PERFTEST_TOOLS

NAME = "kernel"
TIMEOUT = 12.0

CORE_MODULES = ("ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm", "ib_umad", "ib_cm", "iw_cm", "ib_ipoib")
PROVIDER_MODULES = ("mlx5_ib", "mlx4_ib", "rdma_rxe", "siw", "irdma", "i40iw", "bnxt_re", "efa", "hfi1", "qedr",
                    "ocrdma", "vmw_pvrdma", "hns_roce_hw_v2", "erdma", "mana_ib", "ionic_rdma", "cxgb4",
                    "iw_cxgb4", "usnic_verbs", "qib", "rdmavt", "mthca", "nvidia_peermem", "nv_peer_mem",
                    "gdrdrv", "mlx5_core", "mlx4_core")
CONFIG_KEYS = ("CONFIG_INFINIBAND", "CONFIG_INFINIBAND_USER_ACCESS", "CONFIG_INFINIBAND_USER_MAD",
               "CONFIG_INFINIBAND_ADDR_TRANS", "CONFIG_INFINIBAND_IPOIB", "CONFIG_RDMA_RXE", "CONFIG_RDMA_SIW",
               "CONFIG_MLX5_INFINIBAND", "CONFIG_MLX4_INFINIBAND", "CONFIG_INFINIBAND_IRDMA",
               "CONFIG_INFINIBAND_BNXT_RE", "CONFIG_INFINIBAND_EFA", "CONFIG_SECURITY_DMESG_RESTRICT")
# (the names that start at a word's start share one \b: tried only where a word starts, three times faster over a
# kernel log than each alternative with its own). "ib_" names the RDMA stack's modules (ib_core, ib_uverbs, ib_srpt
# ...) and perftest's programs; a line of another subsystem that names one of those programs (the memory accounting
# refusing ib_write_bw's buffer, the OOM killer) says nothing of the RDMA stack, so they are left out of it.
_PERFTEST_PROGRAMS = "|".join(tool for tool in PERFTEST_TOOLS if tool.startswith("ib_"))
LOG_PATTERN = re.compile(
    r"\b(?:rdma|rxe\d*\b|mlx[45]|(?!(?:" + _PERFTEST_PROGRAMS + r")\b)ib_\w+|ib\d+\b|roce(?:v[12])?\b|irdma|"
    r"bnxt_re|efa\b|siw\b|ipoib\b|hfi1\b|qedr\b|ocrdma|erdma\b|mana_ib|ionic_rdma)|infiniband|uverbs|pvrdma|hns_roce|"
    r"nvidia.peermem|nv_peer_mem",
    re.IGNORECASE)
_CONFIG_LINE = re.compile(r"(?m)^(" + "|".join(map(re.escape, CONFIG_KEYS)) + r")=(.*)$")
LOG_KEEP = 300
LEVELS = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


def parse_modules(text: str) -> List[Dict[str, Any]]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            used_by = [] if len(parts) < 4 or parts[3] == "-" else [m for m in parts[3].split(",") if m]
            out.append({"name": parts[0], "size": int(parts[1]) if parts[1].isdigit() else None,
                        "refcount": int(parts[2]) if parts[2].isdigit() else None, "used_by": used_by,
                        "state": parts[4] if len(parts) > 4 else None})
    return out


def parse_kmsg(data: str) -> List[Dict[str, Any]]:
    """Records of /dev/kmsg ('prio,seq,usec,flag;text' + ' KEY=value' continuation lines)."""
    recs: List[Dict[str, Any]] = []
    for line in data.splitlines():
        if line.startswith(" "):
            if recs and "=" in line:
                k, _, v = line[1:].partition("=")
                recs[-1].setdefault("props", {})[k] = v
            continue
        head, sep, text = line.partition(";")
        if not sep:
            continue
        fields = head.split(",")
        try:
            prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
        except (ValueError, IndexError):
            continue
        recs.append({"ts": round(usec / 1e6, 6), "level": LEVELS[prio & 7], "facility": prio >> 3, "seq": seq,
                     "text": text})
    return recs


def _read_kmsg(ctx: CollectContext, deadline: float) -> List[Dict[str, Any]]:
    """All records in the ring buffer. Raises OSError (EPERM under dmesg_restrict without CAP_SYSLOG)."""
    path = ctx.path("/dev/kmsg")
    if not ctx.live:                            # a fixture's dev/kmsg is a text file of records
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_kmsg(f.read())
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: List[str] = []
    try:
        while time.monotonic() < deadline and len(chunks) < 200000:
            try:
                raw = os.read(fd, 16384)        # one record per read
            except BlockingIOError:
                break                           # EAGAIN: the end of the buffer
            except BrokenPipeError:
                continue                        # EPIPE: records were overwritten; the next read resyncs
            except InterruptedError:
                continue
            if not raw:
                break
            chunks.append(raw.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return parse_kmsg("".join(c if c.endswith("\n") else c + "\n" for c in chunks))


def _journal(ctx: CollectContext) -> List[Dict[str, Any]]:
    res = ctx.run(["journalctl", "-k", "-b", "-o", "json", "--no-pager", "-n", "5000"], timeout=6.0)
    recs = []
    for line in res.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        msg = j.get("MESSAGE")
        if isinstance(msg, list):               # not valid UTF-8: a list of byte values
            msg = bytes(msg).decode("utf-8", "replace")
        try:
            ts = int(j.get("_SOURCE_MONOTONIC_TIMESTAMP") or 0) / 1e6 or None
        except ValueError:
            ts = None
        prio = j.get("PRIORITY")
        recs.append({"ts": ts, "level": LEVELS[int(prio) & 7] if str(prio).isdigit() else None,
                     "text": msg or "", "realtime": j.get("__REALTIME_TIMESTAMP")})
    if not recs:
        why = (res.stderr.strip().splitlines() or [f"exit {res.rc}, no kernel records"])[-1]
        raise Unavailable(f"journalctl -k: {why}")
    return recs


def read_log(ctx: CollectContext) -> Dict[str, Any]:
    deadline = time.monotonic() + 4.0
    tried: List[str] = []
    recs: Optional[List[Dict[str, Any]]] = None
    source = None
    try:
        recs, source = _read_kmsg(ctx, deadline), "kmsg"
    except OSError as exc:
        tried.append(f"/dev/kmsg: {errno_text(exc)}")
    if recs is None:
        try:
            recs, source = _journal(ctx), "journalctl"
        except Unavailable as exc:
            tried.append(str(exc))
    if recs is None:
        for path in ("/var/log/kern.log", "/var/log/messages"):
            text, why = ctx.read(path, limit=8 << 20)
            if text is None:
                tried.append(f"{path}: {why}")
                continue
            recs = [{"ts": None, "level": None, "text": line} for line in text.splitlines()[-50000:]]
            source = f"file {path}"
            break
    if recs is None:
        return {"source": None, "lines": [], "readable": False, "unreadable": "; ".join(tried)}
    rdma = [r for r in recs if LOG_PATTERN.search(r.get("text") or "")]
    return {"source": source, "readable": True, "total_records": len(recs), "rdma_records": len(rdma),
            "lines": [{k: r.get(k) for k in ("ts", "level", "text")} for r in rdma[-LOG_KEEP:]],
            "truncated": len(rdma) > LOG_KEEP}


def read_config(ctx: CollectContext, release: Optional[str]) -> Tuple[Optional[Dict[str, Optional[str]]], str]:
    candidates = []
    if release:
        candidates.append(f"/boot/config-{release}")
        candidates.append(f"/lib/modules/{release}/build/.config")
    tried = []
    for path in candidates:
        text, why = ctx.read(path, limit=4 << 20)
        if text is not None:
            return _config_values(text), path
        tried.append(f"{path}: {why}")
    try:
        with open(ctx.path("/proc/config.gz"), "rb") as f:
            text = gzip.GzipFile(fileobj=io.BytesIO(f.read(8 << 20))).read().decode("utf-8", "replace")
        return _config_values(text), "/proc/config.gz"
    except (OSError, EOFError) as exc:
        tried.append(f"/proc/config.gz: {errno_text(exc) if isinstance(exc, OSError) else exc}")
    return None, "; ".join(tried)


def _config_values(text: str) -> Dict[str, Optional[str]]:
    values: Dict[str, Optional[str]] = {k: None for k in CONFIG_KEYS}
    values.update((m.group(1), m.group(2).strip('"')) for m in _CONFIG_LINE.finditer(text))
    return values


def dev_infiniband(ctx: CollectContext) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str]]:
    names, why = ctx.listdir_or_why("/dev/infiniband")
    if names is None:
        return None, why
    out = []
    for n in names:
        if n.startswith("."):
            continue
        rel = f"dev/infiniband/{n}"
        try:
            st = ctx.stat(rel)
        except OSError as exc:
            ctx.unreadable(f"/{rel}", errno_text(exc))
            continue
        out.append({"path": f"/{rel}", "mode": "%04o" % st["mode"], "uid": st["uid"], "gid": st["gid"],
                    "type": st.get("type"), "readable": st["readable"], "writable": st["writable"]})
    return out, None


def netns_mode(ctx: CollectContext) -> Tuple[Optional[str], Optional[Dict[str, Any]], Optional[str]]:
    """('shared'|'exclusive', other settings, None) or (None, None, why)."""
    try:
        res = ctx.run(["rdma", "system", "show"], timeout=3.0)
    except Unavailable as exc:
        return None, None, str(exc)
    text = res.stdout.strip()
    m = re.search(r"netns\s+(\w+)", text)
    if res.rc != 0 or not m:
        return None, None, f"rdma system show: {(res.stderr.strip() or text or 'exit %d' % res.rc)[:200]}"
    extra = {}
    for k, v in re.findall(r"([a-z][a-z-]+)\s+(on|off)\b", text):
        extra[k] = v == "on"
    return m.group(1), extra, None


def collect(ctx: CollectContext) -> Dict[str, Any]:
    text, why = ctx.read("/proc/modules")
    if text is None and not ctx.isdir("/proc/sys"):
        raise Unavailable(f"cannot read /proc ({why}): not Linux, or procfs is not mounted")
    data: Dict[str, Any] = {"modules_supported": True}
    modules = parse_modules(text) if text is not None else None
    if modules is None and (why or "").startswith("ENOENT") and ctx.isdir("/proc/sys"):
        modules = []                            # no /proc/modules: a kernel built without module support
        data["modules_supported"] = False
    elif modules is None:
        ctx.unreadable("/proc/modules", why or "unreadable")
    names = {m["name"] for m in modules or []}
    data["modules"] = sorted(names) if modules is not None else None
    data["rdma_modules"] = rdma = _rdma_modules(ctx, names, modules is not None)
    data["rdma_module_details"] = [m for m in modules or [] if m["name"] in CORE_MODULES + PROVIDER_MODULES]
    release = ctx.read_text("/proc/sys/kernel/osrelease")
    data["release"] = release
    _netns(ctx, data, rdma)
    devs, why = dev_infiniband(ctx)
    data["dev_infiniband"] = devs if devs is not None else []
    if devs is None:
        data["dev_infiniband_missing"] = why
    restrict = ctx.read_int("/proc/sys/kernel/dmesg_restrict")
    data["dmesg_restrict"] = restrict
    data["log"] = log = _log(ctx, restrict)
    config, where = read_config(ctx, release)
    data["config"] = config
    data["config_source"] = where if config is not None else None
    if config is None:
        ctx.unreadable("kernel config", where)
    ctx.source = "procfs+sysfs" + (f"+{log['source']}" if log.get("source") else "")
    return data


def _rdma_modules(ctx: CollectContext, names: set, listed: bool) -> Dict[str, bool]:
    """Core modules loaded or built in (without a module list, present in /sys/module); providers present."""
    rdma = {}
    for m in CORE_MODULES:
        loaded = m in names
        builtin = not loaded and ctx.isdir(f"/sys/module/{m}") and not ctx.exists(f"/sys/module/{m}/initstate")
        rdma[m] = loaded or builtin or (ctx.isdir(f"/sys/module/{m}") if not listed else False)
    for m in PROVIDER_MODULES:
        if m in names or ctx.isdir(f"/sys/module/{m}"):
            rdma[m] = True
    return rdma


def _netns(ctx: CollectContext, data: Dict[str, Any], rdma: Dict[str, bool]) -> None:
    mode, extra, why = (netns_mode(ctx) if ctx.live else (None, None, "not run: reading a saved tree"))
    data["rdma_netns_mode"] = mode
    if extra:
        data["rdma_system"] = extra
    if mode is None:
        if not rdma.get("ib_core") and "NETLINK_RDMA" in (why or ""):
            data["rdma_netns_mode_note"] = "no RDMA netlink: ib_core is not in this kernel"
        else:
            ctx.unreadable("rdma netns mode", why or "unknown")


def _log(ctx: CollectContext, restrict: Optional[int]) -> Dict[str, Any]:
    log = read_log(ctx)
    if not log["readable"]:
        reason = log["unreadable"]
        if restrict == 1 and not ctx.is_root:
            reason = f"dmesg_restrict=1 and no CAP_SYSLOG (run as root, or join group systemd-journal/adm): {reason}"
        log["unreadable"] = reason
        ctx.unreadable("kernel log", reason)
    return log
