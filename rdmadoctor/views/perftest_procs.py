"""A host's perftest processes as rules read them: which binary, the options that decide whether two sides
can meet, and the port each listens on or connects to.

collectors/perftest_procs.py lists the processes with their command lines (this host's facts keep those, as
they keep an RDMA test program's command line). describe() parses one with perftest's own option table and
keeps only the options in PUBLIC_OPTIONS, each value checked against a narrow pattern: paths, keys, payload
files and anything else a command line may carry are dropped. A client's server address is kept (it is what
the client aims at), checked the same way. The pid and the user are this host's business: public() drops
them, and the agent answers a peer with public() only.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, Iterable, List, Optional

from rdmadoctor.knowledge.perftest import DEFAULT_PORT, TOOLS
from rdmadoctor.logparse.command import parse_command

# The options a diagnosis compares between two sides (docs/perftest-messages.md, "Options that must match"),
# and the device and GID a server uses. Flags are True; values must match VALUE.
PUBLIC_OPTIONS = ("ib-dev", "ib-port", "gid-index", "port", "size", "all", "qp", "iters", "duration", "connection",
                  "bidirectional", "rdma_cm", "comm_rdma_cm", "atomic_type", "mtu", "report_gbits", "run_infinitely",
                  "write_with_imm", "send_with_imm", "ipv6", "use_cuda", "use_cuda_dmabuf", "inline_size",
                  "tx-depth", "rx-depth", "use-srq", "odp", "data_validation", "report-per-port")
VALUE = re.compile(r"[A-Za-z0-9_.:-]{1,64}", re.ASCII)
HOST = re.compile(r"[A-Za-z0-9_.:%-]{1,253}", re.ASCII)
PUBLIC_KEYS = ("tool", "role", "options", "port", "listening", "connected", "rdma_cm", "target")


def _option_value(value: Any) -> Optional[Any]:
    if value is True:
        return True
    text = str(value)
    return text if VALUE.fullmatch(text) else None


def describe(cmdline: List[str], listening: Iterable[int] = (), connected: bool = False) -> Optional[Dict[str, Any]]:
    """One perftest process from its command line (argv) and its sockets, or None when it is not perftest."""
    if not cmdline:
        return None
    tool = cmdline[0].rsplit("/", 1)[-1]
    if tool not in TOOLS:
        return None
    parsed = parse_command(" ".join(shlex.quote(a) for a in [tool, *cmdline[1:]]))
    if parsed is None:
        return {"tool": tool, "role": None, "options": {}, "port": None, "listening": sorted(set(listening)),
                "connected": connected, "rdma_cm": None, "target": None, "parsed": False}
    _, _, options, host, _ = parsed
    kept = {}
    for name in PUBLIC_OPTIONS:
        if name in options:
            value = _option_value(options[name])
            if value is not None:
                kept[name] = value
    server = options.get("server") is True or (host is None and options.get("client") is not True)
    port = kept.get("port")
    return {
        "tool": tool, "role": "server" if server else "client", "options": kept,
        "port": int(port) if isinstance(port, str) and port.isdigit() else DEFAULT_PORT,
        "listening": sorted(set(listening)), "connected": connected,
        "rdma_cm": bool(options.get("rdma_cm") or options.get("comm_rdma_cm")),
        "target": host if host is not None and HOST.fullmatch(host) else None, "parsed": True,
    }


def described(entries: Any) -> Optional[List[Dict[str, Any]]]:
    """The collector's processes (tool, cmdline, listening, connected, pid, user) described; entries without a
    command line (a peer's, already public) are taken as they are."""
    if not isinstance(entries, list):
        return None
    out = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("cmdline"), list):
            d = describe([str(a) for a in e["cmdline"]], [p for p in e.get("listening") or [] if isinstance(p, int)],
                         bool(e.get("connected")))
            if d is not None:
                d.update(pid=e.get("pid"), user=e.get("user"))
                out.append(d)
        elif e.get("tool") in TOOLS:
            out.append(e)
    return out


def public(entries: Any) -> Optional[List[Dict[str, Any]]]:
    """What a peer may learn of them: the PUBLIC_KEYS of each, the options re-checked; never a command line,
    pid or user."""
    entries = described(entries)
    if entries is None:
        return None
    out = []
    for e in entries:
        if e.get("tool") not in TOOLS:
            continue
        item = {k: e.get(k) for k in PUBLIC_KEYS}
        options = e.get("options") if isinstance(e.get("options"), dict) else {}
        item["options"] = {k: v for k, v in options.items()
                           if k in PUBLIC_OPTIONS and (v is True or (isinstance(v, str) and VALUE.fullmatch(v)))}
        item["listening"] = [p for p in (e.get("listening") or []) if isinstance(p, int) and 0 < p < 65536]
        if not (isinstance(item["target"], str) and HOST.fullmatch(item["target"])):
            item["target"] = None
        if not (isinstance(item["port"], int) and 0 < item["port"] < 65536):
            item["port"] = None
        out.append(item)
    return out
