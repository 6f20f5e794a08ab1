"""The parameters a perftest run actually used, each with where it was read.

A run shows its parameters in three places, in decreasing authority: the header box perftest printed
(what it really ran with), the command line the user pasted (what was asked), and perftest's defaults
(perftest-errors.md §6.1) when the command line is known and does not set the option. Values read
from nowhere stay unknown: two sides are only compared on values both sides actually show.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import DEFAULT_PORT, is_real_row
from rdmadoctor.model import Run



@dataclass(frozen=True)
class Value:
    value: Any
    source: str              # "header" | "command" | "default" | "results" | "message"
    line: Optional[int]
    text: str                # what to quote as evidence


def _int(text: Any) -> Optional[int]:
    try:
        return int(str(text).split("[")[0])
    except (TypeError, ValueError):
        return None


def _size(text: Any) -> Optional[int]:
    """perftest accepts -s 65536 and also suffixes in new versions (-s 64K)."""
    s = str(text).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    try:
        return int(s[:-1] if mult != 1 else s) * mult
    except ValueError:
        return None


def real_rows(run: Run) -> list:
    """The rows that measured something (knowledge.perftest.is_real_row)."""
    return [r for r in run.results if is_real_row(r.size, r.iterations)]


def _opt(run: Run, *names: str) -> Optional[Tuple[str, Any]]:
    if run.command is None:
        return None
    for name in names:
        if name in run.command.options:
            return name, run.command.options[name]
    return None


def _from_command(run: Run, value: Any, name: str) -> Value:
    return Value(value, "command", run.command.line, run.command.text)


def _default(run: Run, value: Any, why: str) -> Value:
    return Value(value, "default", run.command.line, f"{run.command.text}  (no {why}: perftest's default)")


def _header(run: Run, key: str) -> Optional[Tuple[str, int]]:
    field = run.header.get(key)
    return (field.value, field.line) if field else None


def verb(run: Run) -> Optional[Value]:
    if run.test:
        v = run.test["verb"].upper().replace("RDMA_", "")
        return Value(v, "header", run.test_name.line, run.test_name.value)
    if run.command:
        base = run.command.tool.split("_")[1].upper()
        if base == "WRITE" and "write_with_imm" in run.command.options:
            base = "WRITE_IMM"
        if base == "SEND" and "send_with_imm" in run.command.options:
            base = "SEND_IMM"
        return _from_command(run, base, "tool")
    return None


def test_kind(run: Run) -> Optional[Value]:
    if run.test:
        return Value("BW" if run.test["tst"] == "BW" else "LAT", "header", run.test_name.line, run.test_name.value)
    if run.command:
        return _from_command(run, "BW" if run.command.tool.endswith("_bw") else "LAT", "tool")
    return None


def tool(run: Run) -> Optional[Value]:
    if run.command:
        return _from_command(run, run.command.tool, "tool")
    if run.test and run.tool:
        return Value(run.tool, "header", run.test_name.line, run.test_name.value)
    return None


def num_qps(run: Run) -> Optional[Value]:
    h = _header(run, "num_qps")
    if h and _int(h[0]) is not None:
        return Value(_int(h[0]), "header", h[1], f"Number of qps   : {h[0]}")
    o = _opt(run, "qp")
    if o and _int(o[1]) is not None:
        return _from_command(run, _int(o[1]), "qp")
    if run.command:
        return _default(run, 1, "-q/--qp")
    return None


def connection(run: Run) -> Optional[Value]:
    h = _header(run, "connection")
    if h:
        return Value(h[0].upper(), "header", h[1], f"Connection type : {h[0]}")
    o = _opt(run, "connection")
    if o:
        return _from_command(run, str(o[1]).upper(), "connection")
    if run.command:
        return _default(run, "RC", "-c/--connection")
    return None


def all_sizes(run: Run) -> Optional[Value]:
    o = _opt(run, "all")
    if o:
        return _from_command(run, True, "all")
    rows = real_rows(run)
    if len({r.size for r in rows}) > 1:
        return Value(True, "results", rows[1].line, f"result rows for {len({r.size for r in rows})} sizes")
    if run.command:
        return _default(run, False, "-a/--all")
    return None


def _default_size(run: Run) -> int:
    v = verb(run)
    k = test_kind(run)
    if v and v.value == "ATOMIC":
        return 8
    return 2 if (k and k.value == "LAT") else 65536


def size(run: Run) -> Optional[Value]:
    a = all_sizes(run)
    if a and a.value:
        return None                    # -a sweeps sizes: compared as test_method, not as a size
    o = _opt(run, "size")
    if o and _size(o[1]) is not None:
        return _from_command(run, _size(o[1]), "size")
    rows = real_rows(run)
    if rows:
        return Value(rows[0].size, "results", rows[0].line, f"result row: #bytes {rows[0].size}")
    if run.command:
        return _default(run, _default_size(run), "-s/--size")
    return None


def _default_iters(run: Run) -> int:
    v, k = verb(run), test_kind(run)
    return 5000 if (v and v.value in ("WRITE", "WRITE_IMM") and k and k.value == "BW") else 1000


def duration(run: Run) -> Optional[Value]:
    o = _opt(run, "duration")
    if o:
        return _from_command(run, _int(o[1]), "duration")
    if run.command:
        return _default(run, None, "-D/--duration")
    return None


def iters(run: Run) -> Optional[Value]:
    d = duration(run)
    if d and d.value:
        return None
    o = _opt(run, "iters")
    if o and _int(o[1]) is not None:
        return _from_command(run, _int(o[1]), "iters")
    rows = real_rows(run)
    if rows:
        return Value(rows[0].iterations, "results", rows[0].line, f"result row: #iterations {rows[0].iterations}")
    if run.command:
        return _default(run, _default_iters(run), "-n/--iters")
    return None


def bidirectional(run: Run) -> Optional[Value]:
    if run.test:
        return Value(bool(run.test["bidirectional"]), "header", run.test_name.line, run.test_name.value)
    o = _opt(run, "bidirectional")
    if o:
        return _from_command(run, True, "bidirectional")
    if run.command:
        return _default(run, False, "-b/--bidirectional")
    return None


def rdma_cm_qps(run: Run) -> Optional[Value]:
    h = _header(run, "rdma_cm_qps")
    if h:
        return Value(h[0].upper() == "ON", "header", h[1], f"rdma_cm QPs : {h[0]}")
    if _opt(run, "rdma_cm"):
        return _from_command(run, True, "rdma_cm")
    if run.command:
        return _default(run, False, "-R/--rdma_cm")
    return None


def exchange_method(run: Run) -> Optional[Value]:
    h = _header(run, "data_ex_method")
    if h:
        return Value("rdma_cm" if "rdma" in h[0].lower() else "Ethernet", "header", h[1],
                     f"Data ex. method : {h[0]}")
    if _opt(run, "rdma_cm", "comm_rdma_cm"):
        return _from_command(run, "rdma_cm", "rdma_cm")
    if run.command:
        return _default(run, "Ethernet", "-R/-z")
    return None


def report_units(run: Run) -> Optional[Value]:
    units = {r.unit for r in run.results if r.unit}
    if run.result_header_line and units:
        unit = units.pop()
        return Value("Gb/sec" if unit == "Gb/sec" else "MB/sec", "results", run.result_header_line,
                     f"result table in {unit}")
    if _opt(run, "report_gbits"):
        return _from_command(run, "Gb/sec", "report_gbits")
    if run.command:
        return _default(run, "MB/sec", "--report_gbits")
    return None


def port(run: Run) -> Optional[Value]:
    o = _opt(run, "port")
    if o and _int(o[1]) is not None:
        return _from_command(run, _int(o[1]), "port")
    for m in run.messages:
        if m.id in ("C02", "C03") and "port" in m.fields:
            return Value(int(m.fields["port"]), "message", m.line, m.text)
    if run.command:
        return _default(run, DEFAULT_PORT, "-p/--port")
    return None


def atomic_type(run: Run) -> Optional[Value]:
    if run.test and run.test.get("atomic"):
        return Value(run.test["atomic"].upper(), "header", run.test_name.line, run.test_name.value)
    o = _opt(run, "atomic_type")
    if o:
        return _from_command(run, str(o[1]).upper(), "atomic_type")
    return None


def transport(run: Run) -> Optional[Value]:
    h = _header(run, "transport")
    return Value(h[0].upper(), "header", h[1], f"Transport type : {h[0]}") if h else None


def link_type(run: Run) -> Optional[Value]:
    h = _header(run, "link_type")
    return Value(h[0], "header", h[1], f"Link type       : {h[0]}") if h else None


def gid_mode(run: Run) -> Optional[Value]:
    """On InfiniBand, whether the run exchanges GIDs (-x given): the key record size depends on it."""
    lt = link_type(run)
    if lt is None or lt.value.upper() != "IB":
        return None
    h = _header(run, "gid_index")
    if h:
        return Value(True, "header", h[1], f"GID index       : {h[0]}")
    if run.header.get("data_ex_method"):
        return Value(False, "header", run.header["data_ex_method"].line, "no 'GID index' line in the header")
    return None


def ip_version(run: Run) -> Optional[Value]:
    if _opt(run, "ipv6"):
        return _from_command(run, 6, "ipv6")
    if run.command:
        return _default(run, 4, "--ipv6")
    return None


def mtu(run: Run) -> Optional[Value]:
    h = _header(run, "mtu")
    if h and _int(h[0]):
        return Value(_int(h[0]), "header", h[1], f"Mtu             : {h[0]}")
    return None


def device(run: Run) -> Optional[Value]:
    h = _header(run, "device")
    if h:
        return Value(h[0], "header", h[1], f"Device : {h[0]}")
    o = _opt(run, "ib-dev")
    if o:
        return _from_command(run, o[1], "ib-dev")
    return None


def gid_index(run: Run) -> Optional[Value]:
    o = _opt(run, "gid-index")
    if o and _int(o[1]) is not None:
        return _from_command(run, _int(o[1]), "gid-index")
    h = _header(run, "gid_index")
    if h and _int(h[0]) is not None:
        return Value(_int(h[0]), "header", h[1], f"GID index : {h[0]}")
    return None


def host(run: Run) -> Optional[Value]:
    if run.command and run.command.host:
        return _from_command(run, run.command.host, "host")
    for m in run.messages:
        if m.id == "C02" and "host" in m.fields:
            return Value(m.fields["host"], "message", m.line, m.text)
    return None


def generation(run: Run) -> Optional[Value]:
    from rdmadoctor.views.generation import infer
    g = infer(run)
    if not g.known or not g.consistent:
        return None
    clue, line = g.clues[0]
    return Value(g, "header", line, f"{g.describe()}: {clue}")


def version_low(run: Run) -> Optional[Value]:
    v = generation(run)
    return Value(v.value.low, v.source, v.line, v.text) if v and v.value.low > 0 else None


def version_high(run: Run) -> Optional[Value]:
    v = generation(run)
    return Value(v.value.high, v.source, v.line, v.text) if v and v.value.high < 99 else None


def _flag(option: str, label: str) -> Callable[[Run], Optional[Value]]:
    def read(run: Run) -> Optional[Value]:
        if _opt(run, option):
            return _from_command(run, True, option)
        if run.command:
            return _default(run, False, label)
        return None
    read.__name__ = option.replace("-", "_")
    return read


# name -> (reader, how a person calls it, the option that sets it)
PARAMETERS: Dict[str, Tuple[Callable[[Run], Optional[Value]], str, str]] = {
    "tool": (tool, "test binary", ""),
    "verb": (verb, "RDMA operation", "test binary"),
    "test_kind": (test_kind, "bandwidth or latency test", "_bw vs _lat binary"),
    "num_qps": (num_qps, "number of QPs", "--qp"),
    "connection": (connection, "connection type", "-c"),
    "all_sizes": (all_sizes, "all message sizes", "-a"),
    "size": (size, "message size", "-s"),
    "iters": (iters, "iterations", "-n"),
    "duration": (duration, "duration", "-D"),
    "bidirectional": (bidirectional, "bidirectional traffic", "-b"),
    "rdma_cm_qps": (rdma_cm_qps, "QPs connected by rdma_cm", "-R"),
    "exchange_method": (exchange_method, "data exchange method", "-R/-z"),
    "report_units": (report_units, "report units", "--report_gbits"),
    "report_per_port": (_flag("report-per-port", "--report-per-port"), "per-port report", "--report-per-port"),
    "run_infinitely": (_flag("run_infinitely", "--run_infinitely"), "run infinitely", "--run_infinitely"),
    "data_validation": (_flag("data_validation", "--data_validation"), "data validation", "--data_validation"),
    "port": (port, "TCP port", "-p"),
    "atomic_type": (atomic_type, "atomic operation", "-A"),
    "gid_mode": (gid_mode, "GID exchange on InfiniBand", "-x"),
    "ip_version": (ip_version, "IP version of the GIDs", "--ipv6"),
    "link_type": (link_type, "link layer", ""),
    "transport": (transport, "transport type", ""),
    "mtu": (mtu, "MTU", "-m"),
    "device": (device, "device", "-d"),
    "gid_index": (gid_index, "GID index", "-x"),
    "host": (host, "server address", ""),
    "generation": (generation, "perftest generation", ""),
    "version_low": (version_low, "oldest perftest VERSION it can be", ""),
    "version_high": (version_high, "newest perftest VERSION it can be", ""),
}


def read(run: Run, name: str) -> Optional[Value]:
    """A perftest parameter of a perftest run (None for another producer's run: these are perftest's options)."""
    if run.producer != "perftest":
        return None
    return PARAMETERS[name][0](run)


def label(name: str) -> str:
    return PARAMETERS[name][1]


def option(name: str) -> str:
    return PARAMETERS[name][2]


def table(run: Run) -> Dict[str, Optional[Value]]:
    return {name: reader(run) for name, (reader, _, _) in PARAMETERS.items()}


def differences(server: Run, client: Run, names: List[str]) -> List[Tuple[str, Value, Value]]:
    out = []
    for name in names:
        a, b = read(server, name), read(client, name)
        if a is None or b is None or (a.source == "default" and b.source == "default"):
            continue
        if hasattr(a.value, "overlaps"):        # generations are ranges: they differ when disjoint
            if not a.value.overlaps(b.value):
                out.append((name, a, b))
        elif a.value != b.value:
            out.append((name, a, b))
    return out
