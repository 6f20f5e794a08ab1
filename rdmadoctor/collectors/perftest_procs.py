"""The perftest processes of this host, with their command lines and sockets (views/perftest_procs.py reads
them; the agent tells a peer only what views/perftest_procs.public() keeps).

Only perftest's own binaries (knowledge/perftest.TOOLS) are listed: their command lines are what a diagnosis
reads, as collectors/ports.py keeps an RDMA test program's. Processes that vanish or deny access are skipped.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import TOOLS


COMM_LENGTH = 15        # what the kernel keeps of a program's name (TASK_COMM_LEN less its NUL): /proc/PID/comm


def processes_named(names: Collection[str], process_iter: Optional[Callable[..., Iterable[Any]]] = None
                    ) -> Iterator[Tuple[Any, Dict[str, Any]]]:
    """(process, its pid, name, cmdline and username) for each process of one of those names. Only the names of all
    are read: a command line and a user's name (a lookup through NSS, LDAP on some clusters) for each of a busy
    host's thousands of processes would make `check` wait on its slowest collector."""
    for p in (process_iter(["name"]) if process_iter is not None else _candidates(names)):
        if p.info.get("name") not in names:
            continue
        import psutil       # (here: a host that runs none of them need not import it, about 11 ms of `check`)
        try:
            info = p.as_dict(["pid", "name", "cmdline", "username"], ad_value=None)
        except psutil.NoSuchProcess:
            continue
        yield p, info


def _candidates(names: Collection[str]) -> Iterator[Any]:
    """The processes that can be one of `names`, each with its psutil name in `info` as process_iter gives it: only
    those whose /proc/PID/comm is a name's first COMM_LENGTH characters (psutil completes a cut name from the
    command line) are handed to psutil. One small read a process instead of psutil's reading of each process's
    stat: half the time on a node of thousands of processes. Without /proc, psutil's own walk."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        import psutil
        yield from psutil.process_iter(["name"])
        return
    heads = {name[:COMM_LENGTH] for name in names}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm", "rb") as f:
                comm = f.read().rstrip(b"\n").decode("utf-8", "surrogateescape")
        except OSError:
            continue            # (gone, or another namespace's)
        if comm not in heads:
            continue
        import psutil
        try:
            process = psutil.Process(int(entry))
            process.info = {"name": process.name()}
        except psutil.Error:
            continue
        yield process


def collect(found: Iterable[Tuple[Any, Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Every perftest process among `found` (processes_named's answer for names that include TOOLS: the caller walks
    the process table once for all it lists): tool, cmdline, the TCP ports it listens on, whether it holds an
    established connection (a run in progress), pid and user."""
    out = []
    for p, info in found:
        if info.get("name") not in TOOLS:
            continue
        import psutil
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
