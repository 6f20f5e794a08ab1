"""The port a test program's server listens on and its client connects to, as the command lines give it.

ucx_perftest sets its test up over a TCP connection on -p (13337 when not given: UCX src/tools/perf/perftest.c);
rping connects through rdma_cm to -p (7174: rdma-core librdmacm/examples/rping.c main()); the ibv_*_pingpong examples
exchange their QP addresses over TCP on -p/--port (18515: libibverbs/examples/*_pingpong.c main(), read with
strtol(.., 0)). A client aimed at another port than its server's finds nobody there (connect() refused, an rdma_cm
REJECTED) while the server waits; a server on a port below 1024 needs root.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from rdmadoctor.model import Run


class _Program:
    def __init__(self, tools: str, default: int, options: Tuple[str, ...], base: int):
        self.tools = re.compile(tools)
        self.default = default
        self.options = options
        self.base = base


PROGRAMS = (
    _Program(r"^ucx_perftest$", 13337, ("-p",), 10),
    _Program(r"^rping$", 7174, ("-p",), 10),
    _Program(r"^ibv_(?:rc|uc|ud|srq|xsrq)_pingpong$", 18515, ("-p", "--port"), 0),
)


def _program(run: Run) -> Optional[_Program]:
    tool = run.command.tool if run.command is not None else None
    return next((p for p in PROGRAMS if tool and p.tools.match(tool)), None)


def _port(run: Run) -> Optional[Tuple[int, bool]]:
    """(port, given on the command line) of a run of one of PROGRAMS; None when it is not one, or its port option is
    no number."""
    program = _program(run)
    if program is None or run.command is None:
        return None
    for option in program.options:
        if option in run.command.options:
            try:
                return int(str(run.command.options[option]), program.base), True
            except ValueError:
                return None
    return program.default, False


def program_port(run: Run, ctx: Dict[str, Any]) -> Optional[int]:
    """The port the run's program listens on or connects to: its -p, or the program's default; without its command
    line, the port a message of the run names ("Couldn't listen to port 80")."""
    port = _port(run)
    if port is not None:
        return port[0]
    if run.command is not None and _program(run) is not None:
        return None             # (a port option that is no number)
    named = next((m.fields["port"] for m in run.messages if str(m.fields.get("port", "")).isdigit()), None)
    return int(named) if named is not None else None


def shown_option(option: str, value: Tuple[int, bool]) -> str:
    """A (value, given) pair as the evidence quotes it: "-p 18600", or "18515 (no -p: the default)"."""
    return f"{option} {value[0]}" if value[1] else f"{value[0]} (no {option}: the default)"


def program_port_differs(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The input's run of the same program on the other side listens on (or connects to) another port than this one."""
    mine, program = _port(run), _program(run)
    if mine is None or program is None or run.command is None or run.side not in ("server", "client"):
        return None
    tool, option = run.command.tool, program.options[0]
    for other in ctx.get("runs") or []:
        if other is run or other.side in (run.side, "unknown") or other.command is None or other.command.tool != tool:
            continue
        theirs = _port(other)
        if theirs is not None and theirs[0] != mine[0]:
            return {"value": mine[0], "peer_value": theirs[0], "line": other.command.line, "source": other.source,
                    "quote": f"{other.side}: {shown_option(option, theirs)}; {run.side}: {shown_option(option, mine)}"}
    return None


FEATURES = {"program_port": program_port, "program_port_differs": program_port_differs}
FIELDS_OF = {"program_port_differs": ("value", "peer_value", "line", "source", "quote")}
