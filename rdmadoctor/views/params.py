"""The parameters a perftest run actually used, each with where it was read.

A run shows its parameters in decreasing authority: what it printed (the header box, the test-name line,
the result table: what it really ran with), the command line the user pasted (what was asked), what else
the run shows (result rows, messages), and perftest's defaults (src/perftest_parameters.c) when the command
line is known and does not set the option. Values read from nowhere stay unknown: two sides are only
compared on values both sides actually show.

PARAMETERS is the table: one Parameter a name. Most are read in that order from the places the entry
names; a few are derived from others or from the test binary, and name a function instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import DEFAULT_PORT, SHORT, is_real_row
from rdmadoctor.model import Run


@dataclass(frozen=True)
class Value:
    value: Any
    source: str              # "header" | "command" | "default" | "results" | "message"
    line: Optional[int]
    text: str                # what to quote as evidence


Reader = Callable[[Run], Optional[Value]]
Convert = Callable[[Any], Any]      # text -> value; None when the text gives no value


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


def _same(value: Any) -> Any:
    return value


def _upper(value: Any) -> str:
    return str(value).upper()


def _const(value: Any) -> Convert:
    return lambda _: value


def real_rows(run: Run) -> list:
    """The rows that measured something (knowledge.perftest.is_real_row)."""
    return [r for r in run.results if is_real_row(r.size, r.iterations)]


# -- the places a run shows a value ---------------------------------------------------------------------------

def _opt(run: Run, *names: str) -> Optional[Tuple[str, Any]]:
    if run.command is None:
        return None
    for name in names:
        if name in run.command.options:
            return name, run.command.options[name]
    return None


def _from_command(run: Run, value: Any) -> Value:
    assert run.command is not None
    return Value(value, "command", run.command.line, run.command.text)


def _default(run: Run, value: Any, why: str) -> Value:
    assert run.command is not None
    return Value(value, "default", run.command.line, f"{run.command.text}  (no {why}: perftest's default)")


def field(key: str, shows: str, convert: Convert = _same) -> Reader:
    """A line of the header box: run.header[key], quoted as `shows` with the text perftest printed."""
    def read(run: Run) -> Optional[Value]:
        f = run.header.get(key)
        if f is None:
            return None
        value = convert(f.value)
        return None if value is None else Value(value, "header", f.line, shows.format(f.value))
    return read


def test_field(key: str, convert: Convert = _same) -> Reader:
    """A field of the test-name line ("RDMA_Write BW Test"), quoted whole."""
    def read(run: Run) -> Optional[Value]:
        if not run.test or run.test_name is None:
            return None
        value = convert(run.test.get(key))
        return None if value is None else Value(value, "header", run.test_name.line, run.test_name.value)
    return read


def _sizes_in_results(run: Run) -> Optional[Value]:
    sizes = {r.size for r in real_rows(run)}
    if len(sizes) > 1:
        return Value(True, "results", real_rows(run)[1].line, f"result rows for {len(sizes)} sizes")
    return None


def _first_row(attribute: str, column: str) -> Reader:
    def read(run: Run) -> Optional[Value]:
        rows = real_rows(run)
        if not rows:
            return None
        value = getattr(rows[0], attribute)
        return Value(value, "results", rows[0].line, f"result row: #{column} {value}")
    return read


def _units_in_results(run: Run) -> Optional[Value]:
    units = [r.unit for r in run.results if r.unit]
    if run.result_header_line and units:
        unit = units[0]                 # the first table's unit (a second table is the remote side's report)
        return Value("Gb/sec" if unit == "Gb/sec" else "MB/sec", "results", run.result_header_line,
                     f"result table in {unit}")
    return None


def _port_in_messages(run: Run) -> Optional[Value]:
    for m in run.messages:
        if m.id in ("C02", "C03") and "port" in m.fields:
            return Value(int(m.fields["port"]), "message", m.line, m.text)
    return None


# -- defaults that depend on the test -------------------------------------------------------------------------

def _default_size(run: Run) -> int:
    v = verb(run)
    k = test_kind(run)
    if v and v.value == "ATOMIC":
        return 8
    return 2 if (k and k.value == "LAT") else 65536


def _default_iters(run: Run) -> int:
    v, k = verb(run), test_kind(run)
    return 5000 if (v and v.value in ("WRITE", "WRITE_IMM") and k and k.value == "BW") else 1000


def _sweeps_sizes(run: Run) -> bool:
    """-a: sizes are compared as the test method, not as a size."""
    a = read(run, "all_sizes")
    return bool(a and a.value)


def _timed(run: Run) -> bool:
    """-D: a timed run has no iteration count."""
    d = read(run, "duration")
    return bool(d and d.value)


_NO_DEFAULT = object()
_LETTER = {long: f"-{letter}" for letter, (long, _) in SHORT.items()}


def spelled(options: Tuple[str, ...]) -> str:
    """How the note on a default names the options: "-q/--qp", "--report_gbits", "-R/-z"."""
    if len(options) > 1:
        return "/".join(_LETTER.get(o, f"--{o}") for o in options)
    name = options[0]
    return f"{_LETTER[name]}/--{name}" if name in _LETTER else f"--{name}"


# -- the table -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Parameter:
    """One parameter of a run and the places it is read from, in order: `shown` (what the run printed),
    the command-line `options` (converted by `from_option`), `elsewhere` (result rows, messages), then
    `default` (a value, or a function of the run) when the command line is known. `derive` replaces all
    of these for a value computed from others. A run has no such parameter when `unless` holds.

    `must_match`: True when the two sides of a test must agree on it, False when they may differ (shown
    side by side, never flagged), None when it is not compared."""
    name: str
    label: str                                   # how a person calls it
    option: str = ""                             # what sets it, as a fix names it
    shown: Optional[Reader] = None
    options: Tuple[str, ...] = ()
    from_option: Convert = _same
    elsewhere: Optional[Reader] = None
    default: Any = _NO_DEFAULT
    must_match: Optional[bool] = None
    unless: Optional[Callable[[Run], bool]] = None
    derive: Optional[Reader] = None

    def read(self, run: Run) -> Optional[Value]:
        if self.derive is not None:
            return self.derive(run)
        if self.unless is not None and self.unless(run):
            return None
        found = self.shown(run) if self.shown else None
        return found or self._command(run) or (self.elsewhere(run) if self.elsewhere else None) \
            or self._default(run)

    def _command(self, run: Run) -> Optional[Value]:
        o = _opt(run, *self.options)
        value = self.from_option(o[1]) if o else None
        return None if value is None else _from_command(run, value)

    def _default(self, run: Run) -> Optional[Value]:
        if run.command is None or self.default is _NO_DEFAULT:
            return None
        value = self.default(run) if callable(self.default) else self.default
        return _default(run, value, spelled(self.options))


# -- derived parameters -----------------------------------------------------------------------------------------

def verb(run: Run) -> Optional[Value]:
    if run.test and run.test_name:
        v = run.test["verb"].upper().replace("RDMA_", "")
        return Value(v, "header", run.test_name.line, run.test_name.value)
    parts = run.command.tool.split("_") if run.command else []
    if run.command and len(parts) >= 3 and parts[0] == "ib":       # perftest's ib_<verb>_<test>
        base = parts[1].upper()
        if base == "WRITE" and "write_with_imm" in run.command.options:
            base = "WRITE_IMM"
        if base == "SEND" and "send_with_imm" in run.command.options:
            base = "SEND_IMM"
        return _from_command(run, base)
    return None


def test_kind(run: Run) -> Optional[Value]:
    if run.test and run.test_name:
        return Value("BW" if run.test["tst"] == "BW" else "LAT", "header", run.test_name.line, run.test_name.value)
    if run.command:
        return _from_command(run, "BW" if run.command.tool.endswith("_bw") else "LAT")
    return None


def tool(run: Run) -> Optional[Value]:
    if run.command:
        return _from_command(run, run.command.tool)
    if run.test and run.tool and run.test_name:
        return Value(run.tool, "header", run.test_name.line, run.test_name.value)
    return None


def duration(run: Run) -> Optional[Value]:
    """-D's value as given, even one that is not a number: the run was asked to be timed."""
    o = _opt(run, "duration")
    if o:
        return _from_command(run, _int(o[1]))
    if run.command:
        return _default(run, None, "-D/--duration")
    return None


def gid_mode(run: Run) -> Optional[Value]:
    """On InfiniBand, whether the run exchanges GIDs (-x given): the key record size depends on it."""
    lt = read(run, "link_type")
    if lt is None or lt.value.upper() != "IB":
        return None
    h = run.header.get("gid_index")
    if h:
        return Value(True, "header", h.line, f"GID index       : {h.value}")
    if run.header.get("data_ex_method"):
        return Value(False, "header", run.header["data_ex_method"].line, "no 'GID index' line in the header")
    return None


def host(run: Run) -> Optional[Value]:
    if run.command and run.command.host:
        return _from_command(run, run.command.host)
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


def _exchange(text: str) -> str:
    return "rdma_cm" if "rdma" in text.lower() else "Ethernet"


def _flag(name: str, label: str) -> Parameter:
    return Parameter(name.replace("-", "_"), label, f"--{name}", options=(name,), default=False)


_TABLE = (
    Parameter("tool", "test binary", derive=tool, must_match=True),
    Parameter("verb", "RDMA operation", "test binary", derive=verb, must_match=True),
    Parameter("test_kind", "bandwidth or latency test", "_bw vs _lat binary", derive=test_kind, must_match=True),
    Parameter("num_qps", "number of QPs", "--qp", shown=field("num_qps", "Number of qps   : {}", _int),
              options=("qp",), from_option=_int, default=1, must_match=True),
    Parameter("connection", "connection type", "-c", shown=field("connection", "Connection type : {}", _upper),
              options=("connection",), from_option=_upper, default="RC", must_match=True),
    Parameter("all_sizes", "all message sizes", "-a", options=("all",), elsewhere=_sizes_in_results,
              default=False, must_match=True),
    Parameter("size", "message size", "-s", options=("size",), from_option=_size,
              elsewhere=_first_row("size", "bytes"), default=_default_size, unless=_sweeps_sizes, must_match=True),
    Parameter("iters", "iterations", "-n", options=("iters",), from_option=_int,
              elsewhere=_first_row("iterations", "iterations"), default=_default_iters, unless=_timed,
              must_match=True),
    Parameter("duration", "duration", "-D", derive=duration, must_match=True),
    Parameter("bidirectional", "bidirectional traffic", "-b", shown=test_field("bidirectional", bool),
              options=("bidirectional",), default=False, must_match=True),
    Parameter("rdma_cm_qps", "QPs connected by rdma_cm", "-R",
              shown=field("rdma_cm_qps", "rdma_cm QPs : {}", lambda t: t.upper() == "ON"),
              options=("rdma_cm",), default=False, must_match=True),
    Parameter("exchange_method", "data exchange method", "-R/-z",
              shown=field("data_ex_method", "Data ex. method : {}", _exchange),
              options=("rdma_cm", "comm_rdma_cm"), from_option=_const("rdma_cm"), default="Ethernet",
              must_match=True),
    Parameter("report_units", "report units", "--report_gbits", shown=_units_in_results,
              options=("report_gbits",), from_option=_const("Gb/sec"), default="MB/sec", must_match=True),
    _flag("report-per-port", "per-port report"),
    _flag("run_infinitely", "run infinitely"),
    _flag("data_validation", "data validation"),
    Parameter("port", "TCP port", "-p", options=("port",), from_option=_int, elsewhere=_port_in_messages,
              default=DEFAULT_PORT, must_match=True),
    Parameter("atomic_type", "atomic operation", "-A", shown=test_field("atomic", lambda a: a.upper() if a else None),
              options=("atomic_type",), from_option=_upper, must_match=True),
    Parameter("gid_mode", "GID exchange on InfiniBand", "-x", derive=gid_mode, must_match=True),
    Parameter("ip_version", "IP version of the GIDs", "--ipv6", options=("ipv6",), from_option=_const(6),
              default=4, must_match=True),
    Parameter("link_type", "link layer", shown=field("link_type", "Link type       : {}"), must_match=False),
    Parameter("transport", "transport type", shown=field("transport", "Transport type : {}", _upper)),
    Parameter("mtu", "MTU", "-m", shown=field("mtu", "Mtu             : {}", lambda t: _int(t) or None),
              must_match=False),
    Parameter("device", "device", "-d", shown=field("device", "Device : {}"), options=("ib-dev",),
              must_match=False),
    # the -x typed comes first: rules quote it as what the user asked for ("with -x {run.gid_index}")
    Parameter("gid_index", "GID index", "-x", options=("gid-index",), from_option=_int,
              elsewhere=field("gid_index", "GID index : {}", _int), must_match=False),
    Parameter("host", "server address", derive=host),
    Parameter("generation", "perftest generation", derive=generation, must_match=False),
    Parameter("version_low", "oldest perftest VERSION it can be", derive=version_low),
    Parameter("version_high", "newest perftest VERSION it can be", derive=version_high),
)

PARAMETERS: Dict[str, Parameter] = {p.name: p for p in _TABLE}
# compared side by side, those that must match first
COMPARED: Tuple[str, ...] = tuple(p.name for p in _TABLE if p.must_match) + \
    tuple(p.name for p in _TABLE if p.must_match is False)


def read(run: Run, name: str) -> Optional[Value]:
    """A perftest parameter of a perftest run (None for another producer's run: these are perftest's options)."""
    if run.producer != "perftest":
        return None
    return PARAMETERS[name].read(run)


def label(name: str) -> str:
    return PARAMETERS[name].label


def option(name: str) -> str:
    return PARAMETERS[name].option


def must_match(name: str) -> bool:
    return bool(PARAMETERS[name].must_match)


def table(run: Run) -> Dict[str, Optional[Value]]:
    return {name: p.read(run) for name, p in PARAMETERS.items()}


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
