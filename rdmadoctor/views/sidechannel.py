"""The port a test program's server listens on and its client connects to, where the two command lines disagree.

ucx_perftest sets its test up over a TCP connection on -p (13337 when not given: UCX src/tools/perf/perftest.c); rping
connects through rdma_cm to -p (7174: rdma-core librdmacm/examples/rping.c main()). A client aimed at another port
than its server's finds nobody there (connect() refused, an rdma_cm REJECTED) while the server waits.
(ibv_*_pingpong's -p is read with its -s in views/stackfeatures.py.)
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from rdmadoctor.model import Run

DEFAULT_PORTS = {"ucx_perftest": 13337, "rping": 7174}


def _port(run: Run) -> Optional[Tuple[int, bool]]:
    """(port, given with -p) of a run of one of DEFAULT_PORTS' programs; None when it is not one, or its -p is no
    number."""
    if run.command is None or run.command.tool not in DEFAULT_PORTS:
        return None
    given = run.command.options.get("-p")
    if given is None:
        return DEFAULT_PORTS[run.command.tool], False
    text = str(given)
    return (int(text), True) if text.isdigit() else None


def program_port_differs(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """For a client: the input's server of the same program listens on another port than this client connects to."""
    mine = _port(run)
    if mine is None or run.command is None or run.side != "client":
        return None
    tool = run.command.tool
    for other in ctx.get("runs") or []:
        theirs = _port(other) if other is not run and other.side == "server" else None
        if theirs is None or other.command is None or other.command.tool != tool or theirs[0] == mine[0]:
            continue
        shown = [f"{side}: {f'-p {port}' if given else f'{port} (no -p: the default)'}"
                 for side, (port, given) in (("server", theirs), ("client", mine))]
        return {"value": mine[0], "peer_value": theirs[0], "line": other.command.line, "source": other.source,
                "quote": "; ".join(shown)}
    return None


FEATURES = {"program_port_differs": program_port_differs}
FIELDS_OF = {"program_port_differs": ("value", "peer_value", "line", "source", "quote")}
