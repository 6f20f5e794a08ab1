"""The options a test program's server and client must give alike, as their command lines give them: the port the
server listens on and the client connects to, the message size, the number of connections.

Ports: ucx_perftest sets its test up over a TCP connection on -p (13337 when not given: UCX src/tools/perf/perftest.c);
rping connects through rdma_cm to -p (7174: rdma-core librdmacm/examples/rping.c main()); the ibv_*_pingpong examples
exchange their QP addresses over TCP on -p/--port (18515: libibverbs/examples/*_pingpong.c main(), read with
strtol(.., 0)). A client aimed at another port than its server's finds nobody there (connect() refused, an rdma_cm
REJECTED) while the server waits; a server on a port below 1024 needs root.

Sizes: the ibv_*_pingpong examples post -s/--size bytes (4096, 1024 for ibv_ud_pingpong; strtoul(.., 0)) into
buffers of their own -s; rping's server reads the client's buffer, as long as the client advertises it, into one of
its own -S (64: rping.c main(), atoi); fabtests' fi_pingpong sends -S bytes into receive buffers of its own -S (without
-S both sides walk every size together: fabtests common/shared.c). A larger message than the peer's buffer fails its
completion.

Connections: ucmatose's server accepts -c connections (1) before it starts its data transfers, and its client opens
-c of them (librdmacm/examples/cmatose.c run_server(), run_client()): a server waiting for more connections than its
client opens never starts, and the client waits for data that never comes.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from rdmadoctor.model import Run


class _Option:
    def __init__(self, tools: str, default: Optional[int], options: Tuple[str, ...], base: int,
                 defaults: Optional[Dict[str, int]] = None):
        self.tools = re.compile(tools)
        self.default = default
        self.defaults = defaults or {}
        self.options = options
        self.base = base


_PINGPONGS = r"^ibv_(?:rc|uc|ud|srq|xsrq)_pingpong$"
PORTS = (
    _Option(r"^ucx_perftest$", 13337, ("-p",), 10),
    _Option(r"^rping$", 7174, ("-p",), 10),
    _Option(_PINGPONGS, 18515, ("-p", "--port"), 0),
)
SIZES = (
    _Option(_PINGPONGS, 4096, ("-s", "--size"), 0, {"ibv_ud_pingpong": 1024}),
    _Option(r"^rping$", 64, ("-S",), 10),
    # without -S fi_pingpong walks every size in step with its peer: no one size to compare
    _Option(r"^fi_pingpong$", None, ("-S",), 10),
)
CONNECTIONS = (
    _Option(r"^(?:ucmatose|cmatose)$", 1, ("-c",), 10),
)


def _option(run: Run, table: Tuple[_Option, ...]) -> Optional[_Option]:
    tool = run.command.tool if run.command is not None else None
    return next((o for o in table if tool and o.tools.match(tool)), None)


def _value(run: Run, table: Tuple[_Option, ...]) -> Optional[Tuple[int, bool]]:
    """(value, given on the command line) of a run of one of the table's programs; None when it is not one, or its
    option is no number."""
    option = _option(run, table)
    if option is None or run.command is None:
        return None
    for name in option.options:
        if name in run.command.options:
            try:
                return int(str(run.command.options[name]), option.base), True
            except ValueError:
                return None
    default = option.defaults.get(run.command.tool or "", option.default)
    return (default, False) if default is not None else None


def program_port(run: Run, ctx: Dict[str, Any]) -> Optional[int]:
    """The port the run's program listens on or connects to: its -p, or the program's default; without its command
    line, the port a message of the run names ("Couldn't listen to port 80")."""
    port = _value(run, PORTS)
    if port is not None:
        return port[0]
    if run.command is not None and _option(run, PORTS) is not None:
        return None             # (a port option that is no number)
    named = next((m.fields["port"] for m in run.messages if str(m.fields.get("port", "")).isdigit()), None)
    return int(named) if named is not None else None


def shown_option(option: str, value: Tuple[int, bool]) -> str:
    """A (value, given) pair as the evidence quotes it: "-p 18600", or "18515 (no -p: the default)"."""
    return f"{option} {value[0]}" if value[1] else f"{value[0]} (no {option}: the default)"


def _differs(run: Run, ctx: Dict[str, Any], table: Tuple[_Option, ...]) -> Optional[Dict[str, Any]]:
    """The input's run of the same program on the other side gives the option another value than this run."""
    mine, option = _value(run, table), _option(run, table)
    if mine is None or option is None or run.command is None or run.side not in ("server", "client"):
        return None
    tool, shown = run.command.tool, option.options[0]
    for other in ctx.get("runs") or []:
        if other is run or other.side in (run.side, "unknown") or other.command is None or other.command.tool != tool:
            continue
        theirs = _value(other, table)
        if theirs is not None and theirs[0] != mine[0]:
            return {"value": mine[0], "peer_value": theirs[0], "line": other.command.line, "source": other.source,
                    "quote": f"{other.side}: {shown_option(shown, theirs)}; {run.side}: {shown_option(shown, mine)}"}
    return None


def program_port_differs(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The other side's run of the same program listens on (or connects to) another port than this one."""
    return _differs(run, ctx, PORTS)


def program_size_differs(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The other side's run of the same program uses another message size than this one."""
    return _differs(run, ctx, SIZES)


def program_connections_differs(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The other side's ucmatose asks for another number of connections (-c) than this one."""
    return _differs(run, ctx, CONNECTIONS)


FEATURES = {"program_port": program_port, "program_port_differs": program_port_differs,
            "program_size_differs": program_size_differs, "program_connections_differs": program_connections_differs}
FIELDS_OF = {name: ("value", "peer_value", "line", "source", "quote")
             for name in ("program_port_differs", "program_size_differs", "program_connections_differs")}
