"""Locked-memory limits: this process's RLIMIT_MEMLOCK, CAP_IPC_LOCK, limits.conf and systemd defaults.

The limit that matters is the one of the process that runs the RDMA program; this is rdmadoctor's own,
which is the user's login/session limit when run from the same shell. Read from /proc/self/limits (so a
fixture tree can carry it), falling back to resource.getrlimit.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Any, Dict, List, Optional

from rdmadoctor.collectors.base import CollectContext, Unavailable

NAME = "limits"
TIMEOUT = 5.0

CAP_IPC_LOCK = 14
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21
CAP_SYSLOG = 34


def _limit(value: str) -> Optional[int]:
    return None if value == "unlimited" else int(value)


def parse_proc_limits(text: str) -> Optional[Dict[str, Any]]:
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            parts = line[len("Max locked memory"):].split()
            if len(parts) >= 2:
                try:
                    return {"soft": _limit(parts[0]), "hard": _limit(parts[1]),
                            "unit": parts[2] if len(parts) > 2 else "bytes"}
                except ValueError:
                    return None
    return None


def capabilities(text: str) -> Dict[str, Any]:
    caps: Dict[str, Any] = {}
    for line in text.splitlines():
        for key in ("CapEff", "CapPrm", "CapBnd"):
            if line.startswith(key + ":"):
                try:
                    caps[key] = int(line.split()[1], 16)
                except (IndexError, ValueError):
                    pass
    return caps


def parse_limits_conf(text: str, path: str) -> List[Dict[str, Any]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        parts = body.split()
        if len(parts) >= 4 and parts[2] == "memlock":
            out.append({"file": path, "line": n, "domain": parts[0], "type": parts[1], "item": parts[2],
                        "value": parts[3]})
    return out


def systemd_memlock(ctx: CollectContext) -> List[Dict[str, Any]]:
    found = []
    files = ["/etc/systemd/system.conf"] + sorted(
        "/" + os.path.relpath(p, ctx.root) for p in glob.glob(str(ctx.path("/etc/systemd/system.conf.d/*.conf"))))
    for path in files:
        text = ctx.read_text(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = re.match(r"^\s*DefaultLimitMEMLOCK\s*=\s*(\S+)", line)
            if m:
                found.append({"file": path, "line": n, "value": m.group(1)})
    return found


def collect(ctx: CollectContext) -> Dict[str, Any]:
    data: Dict[str, Any] = {}
    text, why = ctx.read("/proc/self/limits")
    memlock = parse_proc_limits(text) if text else None
    if memlock is None and ctx.live:
        try:
            import resource
            soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
            inf = resource.RLIM_INFINITY
            memlock = {"soft": None if soft == inf else soft, "hard": None if hard == inf else hard,
                       "unit": "bytes", "source": "getrlimit"}
        except (ImportError, AttributeError, OSError) as exc:
            why = f"{why}; getrlimit: {exc}"
    if memlock is None:
        ctx.unreadable("memlock limit", why or "unknown")
    data["memlock"] = memlock
    status, swhy = ctx.read("/proc/self/status")
    if status:
        caps = capabilities(status)
        eff = caps.get("CapEff")
        data["cap_ipc_lock"] = bool(eff >> CAP_IPC_LOCK & 1) if eff is not None else None
        data["cap_net_admin"] = bool(eff >> CAP_NET_ADMIN & 1) if eff is not None else None
        data["cap_syslog"] = bool(eff >> CAP_SYSLOG & 1) if eff is not None else None
        data["cap_eff"] = "%016x" % eff if eff is not None else None
    else:
        data["cap_ipc_lock"] = None
        ctx.unreadable("capabilities (/proc/self/status)", swhy or "unreadable")
    entries: List[Dict[str, Any]] = []
    files = ["/etc/security/limits.conf"] + sorted(
        "/" + os.path.relpath(p, ctx.root) for p in glob.glob(str(ctx.path("/etc/security/limits.d/*.conf"))))
    read_any = False
    for path in files:
        text, why = ctx.read(path)
        if text is None:
            if not (why or "").startswith("ENOENT"):
                ctx.unreadable(path, why or "unreadable")
            continue
        read_any = True
        entries.extend(parse_limits_conf(text, path))
    data["limits_conf"] = entries
    data["limits_conf_read"] = read_any
    sysd = systemd_memlock(ctx)
    data["systemd_default_memlock"] = sysd[-1]["value"] if sysd else None
    data["systemd_default_memlock_entries"] = sysd
    if memlock is None and data.get("cap_ipc_lock") is None:
        raise Unavailable("neither /proc/self/limits nor /proc/self/status is readable: not Linux?")
    ctx.source = "procfs+/etc"
    return data
