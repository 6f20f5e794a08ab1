"""The perftest processes of this host, with their command lines and sockets (views/perftest_procs.py reads
them; the agent tells a peer only what views/perftest_procs.public() keeps).

Only perftest's own binaries (knowledge/perftest.TOOLS) are listed: their command lines are what a diagnosis
reads, as collectors/ports.py keeps an RDMA test program's. Processes that vanish or deny access are skipped.
"""
from __future__ import annotations

from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import TOOLS


def processes_named(names: Collection[str], process_iter: Optional[Callable[..., Iterable[Any]]] = None
                    ) -> Iterator[Tuple[Any, Dict[str, Any]]]:
    """(process, its pid, name, cmdline and username) for each process of one of those names. Only the names of all
    are read: a command line and a user's name (a lookup through NSS, LDAP on some clusters) for each of a busy
    host's thousands of processes would make `check` wait on its slowest collector."""
    import psutil
    for p in (process_iter or psutil.process_iter)(["name"]):
        if p.info.get("name") not in names:
            continue
        try:
            info = p.as_dict(["pid", "name", "cmdline", "username"], ad_value=None)
        except psutil.NoSuchProcess:
            continue
        yield p, info


def collect(process_iter: Optional[Callable[..., Iterable[Any]]] = None) -> List[Dict[str, Any]]:
    """Every perftest process: tool, cmdline, the TCP ports it listens on, whether it holds an established
    connection (a run in progress), pid and user."""
    import psutil
    out = []
    for p, info in processes_named(TOOLS, process_iter):
        listening, connected = [], False
        try:
            conns = p.net_connections(kind="tcp") if hasattr(p, "net_connections") else p.connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            conns = []
        for c in conns:
            if c.status == psutil.CONN_LISTEN and c.laddr:
                listening.append(c.laddr.port)
            elif c.status == psutil.CONN_ESTABLISHED:
                connected = True
        out.append({"tool": info["name"], "cmdline": list(info.get("cmdline") or [info["name"]]),
                    "listening": sorted(set(listening)), "connected": connected, "pid": info.get("pid"),
                    "user": info.get("username")})
    return out
