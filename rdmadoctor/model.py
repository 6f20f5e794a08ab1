"""The data that flows through rdmadoctor, one way: logs and facts in, findings and a verdict out.

    logparse  -> Run          (one per perftest side found in the input)
    collectors-> Facts        (a JSON-ready dict, see rdmadoctor.collectors)
    probe     -> Rung         (the --peer ladder)
    engine    -> Finding      (rule id, cause, evidence, fix) -> Verdict
    render    -> text / JSON / HTML

Everything here is plain data: no behaviour beyond small derived properties, `to_dict`, and a finding's texts
made when first read (Later).
"""
from __future__ import annotations

import sys
from array import array
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union, overload

SEVERITIES = ("fail", "warn", "info")  # what one finding means for RDMA on these hosts
SEVERITY_RANK = {"fail": 0, "warn": 1, "info": 2}
CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}
STATUSES = ("ok", "warning", "failure", "unknown")  # the verdict as a whole

# Ladder rungs, lowest first: a failure on one rung makes the rungs above it "skipped".
RUNGS = ("input", "device", "driver", "port", "address", "route", "firewall", "limits", "connection",
         "exchange", "resources", "transport", "performance")
RUNG_STATES = ("passed", "failed", "warning", "skipped", "not-inspected")

# A log of thousands of runs makes hundreds of thousands of these: without an instance dict each (Python 3.10+)
# they take about half the memory.
if TYPE_CHECKING:
    from dataclasses import dataclass as _small
else:
    _small = dataclass(slots=True) if sys.version_info >= (3, 10) else dataclass


@_small
class Evidence:
    """One quoted line of a log, or one fact, that a finding rests on."""
    source: str                      # file name, "<stdin>", "facts:devices", "probe"
    text: str                        # the line as printed (or the fact, rendered)
    line: Optional[int] = None       # 1-based line number in `source`, for log lines
    note: Optional[str] = None       # what this evidence shows, when the text alone does not say
    name: Optional[str] = None       # for a fact: its name in the facts view ("memlock.soft")
    value: Any = None                # for a fact: its value, as a JSON value (number, string, bool, list, null)


@_small
class Message:
    """A perftest / libibverbs / librdmacm message recognised in a log (see logparse.catalog)."""
    id: str                          # catalogue id, e.g. "X06" (docs/perftest-messages.md), "NCCL.IB_WC_ERROR"
    kind: str                        # "error" | "warning" | "notice"
    text: str
    line: int
    source: str
    fields: Dict[str, Any] = field(default_factory=dict)


@_small
class Command:
    """A perftest command line found in the paste (usually after a shell prompt)."""
    tool: str                        # ib_write_bw, ib_send_lat, ...
    argv: List[str]
    options: Dict[str, Any]          # canonical option name -> value (True for flags)
    host: Optional[str]              # the server address a client names
    line: int
    text: str


@_small
class HeaderField:
    value: str
    line: int


@_small
class Address:
    """A `local address:` / `remote address:` line (with its GID line when printed)."""
    role: str                        # "local" | "remote"
    line: int
    lid: Optional[int] = None
    qpn: Optional[int] = None
    psn: Optional[int] = None
    rkey: Optional[int] = None
    vaddr: Optional[int] = None
    out_reads: Optional[int] = None
    gid: Optional[str] = None        # canonical IPv6 text, converted from perftest's decimal bytes
    gid_line: Optional[int] = None


@_small
class ResultRow:
    line: int
    kind: str                        # "bw" | "lat" | "lat_dur"
    size: int                        # message size in bytes (#bytes column)
    iterations: int
    values: Dict[str, float]         # bw_peak, bw_avg, msg_rate | t_min, t_max, t_typical, t_avg, ...
    unit: Optional[str] = None       # "MB/sec" | "MiB/sec" | "Gb/sec" | "usec" | "cycles"


@_small
class Run:
    """One run of an RDMA tool as it appears in the input: one side of a perftest or ping-pong test, one process
    (or job) of NCCL, UCX, Open MPI or libfabric, a device listing, a kernel log."""
    source: str
    index: int                       # order within its source
    first_line: int
    last_line: int
    side: str = "unknown"            # "server" | "client" | "unknown"
    side_reason: Optional[str] = None
    tool: Optional[str] = None       # from the command line or the test-name line
    command: Optional[Command] = None
    test_name: Optional[HeaderField] = None   # "RDMA_Write BW Test"
    test: Optional[Dict[str, Any]] = None     # verb, tst (BW|LATENCY), atomic, bidirectional
    banner_line: Optional[int] = None         # "* Waiting for client to connect... *"
    header: Dict[str, HeaderField] = field(default_factory=dict)
    addresses: List[Address] = field(default_factory=list)
    result_header_line: Optional[int] = None
    # perftest's dashes after the peer's address with no results table after them: the line a side that measures
    # nothing prints once it has closed the side channel (the server of ib_read_lat and ib_atomic_lat)
    closed_line: Optional[int] = None
    results: List[ResultRow] = field(default_factory=list)
    results_dropped: int = 0         # rows printed but not kept in `results` (which keeps the rows that matter)
    # every row counted: rows, real_rows, garbage_rows, kept_rows, sizes, and for each (kind, unit) the min, median
    # and max of its measured column (logparse.runs.RowStats)
    row_summary: Optional[Dict[str, Any]] = None
    messages: List[Message] = field(default_factory=list)
    messages_dropped: int = 0
    label: Optional[str] = None      # a separator's label ("SERVER", "node2") when the paste had one
    producer: str = "perftest"       # what printed it: perftest, nccl, ucx, ompi, libfabric, verbs, kernel
    # environment and MCA settings the paste shows for it (NCCL_IB_GID_INDEX=3, UCX_TLS=rc, btl=^openib),
    # from its command line, `export` lines and the library's own "set by environment" lines
    settings: Dict[str, HeaderField] = field(default_factory=dict)
    # when runs of the input were let go (logparse/kept.py), the place of this server or client run among all the
    # input's runs of its producer and side: the server and the client of one place are a pair, unless the addresses
    # they printed pair them with others (engine/evaluate.py: pairs). None: pairs go by the order of the runs kept,
    # which is then the order printed
    pair: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class KeptLines(Sequence[str]):
    """Lines held as one UTF-8 buffer and where each ends: a str object per line costs about 50 bytes beyond its text,
    and a log of thousands of files keeps tens of thousands of lines. Reads as a list of str (of lines without a
    newline, as the reader splits them)."""
    __slots__ = ("_data", "_ends")

    def __init__(self, lines: Iterable[str] = ()):
        self._data = bytearray()
        self._ends = array("Q")
        self.extend(lines)

    def extend(self, lines: Iterable[str]) -> None:
        lines = list(lines)
        if not lines:
            return
        text = "\n".join(lines)
        sizes = map(len, lines) if text.isascii() else (len(line.encode("utf-8", "surrogatepass")) for line in lines)
        start = len(self._data) + 1 if self._ends else 0
        if self._ends:
            self._data += b"\n"
        self._data += text.encode("utf-8", "surrogatepass")
        self._ends.extend(_ends(start, sizes))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> List[str]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[str, List[str]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("line index out of range")
        start = self._ends[index - 1] + 1 if index else 0
        return self._data[start:self._ends[index]].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        if self._ends:
            yield from self._data.decode("utf-8", "surrogatepass").split("\n")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"KeptLines({list(self)!r})"


def _ends(start: int, sizes: Iterable[int]) -> Iterator[int]:
    """Where each line ends in the buffer, the first beginning at `start` and each after a newline."""
    end = start
    for size in sizes:
        end += size
        yield end
        end += 1


@_small
class SourceText:
    """The lines of one input kept for evidence excerpts and the HTML report's raw log."""
    name: str
    lines: Sequence[str]             # index 0 is line 1 (KeptLines when read from a log)
    total_lines: int
    truncated: bool = False          # lines beyond the kept maximum were not stored
    bytes_read: int = 0
    decode_errors: int = 0
    flattened: int = 0               # lines that were split because a paste had joined them
    runs_dropped: int = 0            # runs beyond the kept maximum (a failing run is always kept)
    compression: Optional[str] = None     # 'gzip', 'bzip2', 'xz': read decompressed (logparse/compressed.py)
    read_stopped: Optional[str] = None    # why reading stopped before the input's end (its compressed data did)


@dataclass
class ParsedLog:
    runs: List[Run]
    sources: List[SourceText]
    # host facts the paste itself shows (a pasted ibv_devinfo, show_gids, ibdev2netdev, kernel log), in the
    # facts document's form (collectors/__init__.py), so that rules can read them as they read check's
    facts: Optional[Dict[str, Any]] = None
    # runs let go by the bound on all the inputs together (logparse/kept.py: InputRuns), beyond each input's own
    runs_dropped: int = 0
    inputs_unlisted: int = 0         # inputs read but not in `sources`: past the first ones, none of their runs kept


class Later:
    """A finding's texts (title, explanation, fix, next steps), made when one of them is first read: a rule can hold
    on thousands of runs, and the renderers show a few of its findings (text: a few per rule; JSON: what fits)."""
    __slots__ = ("_make", "_made")

    def __init__(self, make: Callable[[], Dict[str, Any]]):
        self._make: Optional[Callable[[], Dict[str, Any]]] = make
        self._made: Optional[Dict[str, Any]] = None

    def get(self, name: str) -> Any:
        if self._made is None:
            assert self._make is not None
            self._made, self._make = self._make(), None
        return self._made[name]


class _Text:
    """A Finding field given either its value or a Later, whose text of that name it becomes when first read."""

    def __init__(self, default: Any = None):
        # the class-level default is a tuple (dataclasses refuse a list); each finding given it gets a list of its own
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            if self.default is None:
                raise AttributeError(self.name)         # dataclasses: a field without a default
            return self.default
        value = obj.__dict__[self.slot]
        if isinstance(value, Later):
            value = obj.__dict__[self.slot] = value.get(self.name)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = list(value) if isinstance(value, tuple) else value


@dataclass
class Finding:
    rule: str
    cause: str                       # slug from docs/causes.md
    severity: str                    # fail | warn | info
    title: str = _Text()             # type: ignore[assignment]
    explanation: str = _Text()       # type: ignore[assignment]
    evidence: List[Evidence]         # type: ignore[misc]
    fix: List[str] = _Text()         # type: ignore[assignment]
    confidence: str = "medium"       # high | medium | low
    kind: str = "cause"              # "cause": names what to change; "symptom": points at candidates
    candidates: List[str] = field(default_factory=list)   # for symptoms: the causes it may come from
    next_steps: List[str] = _Text(default=())   # type: ignore[assignment]  # what to collect or run to tell them apart
    refs: List[str] = field(default_factory=list)
    rung: Optional[str] = None
    probe_rung: Optional[str] = None     # the --peer ladder's rung it speaks about (then it belongs to that ladder)
    explained_by: Optional[str] = None   # id of the rule whose cause accounts for this symptom
    key: Optional[str] = None            # what makes two findings of one rule distinct

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Rung:
    """One step of a diagnosis ladder (check's fact ladder, or the --peer probe)."""
    name: str
    title: str
    state: str                       # passed | failed | warning | skipped | not-inspected
    detail: str = ""
    evidence: List[Evidence] = field(default_factory=list)
    seconds: Optional[float] = None
    blocked_by: Optional[str] = None  # the lower rung that made this one skipped

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    status: str                      # ok | warning | failure | unknown
    cause: Optional[str]             # slug; "unknown" when nothing names a cause, None when all is well
    rule: Optional[str]
    summary: str
    confidence: Optional[str] = None
    fix: Optional[str] = None        # the one-line fix
    candidates: List[str] = field(default_factory=list)
    next_steps: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@_small
class Comparison:
    """One parameter of a server / client pair, side by side (the report's "Server vs client" table)."""
    pair: str                        # "server.log#0 / client.log#0"
    parameter: str                   # views/params.py's name
    label: str
    server: Optional[str]
    server_source: Optional[str]     # where the value was read: "command", "header", ...
    client: Optional[str]
    client_source: Optional[str]
    must_match: bool                 # the two sides must agree for the test to work
    differs: bool                    # they disagree where they must agree
    different: bool                  # they disagree


@dataclass
class Diagnosis:
    """What every command hands to the renderers."""
    command: str                     # "explain" | "check"
    verdict: Verdict
    findings: List[Finding]
    runs: List[Run] = field(default_factory=list)
    sources: List[SourceText] = field(default_factory=list)
    facts: Optional[Dict[str, Any]] = None
    rungs: List[Rung] = field(default_factory=list)
    comparisons: List[Comparison] = field(default_factory=list)       # server vs client parameters
    notes: List[str] = field(default_factory=list)                    # e.g. what could not be read
    link_rate_gbps: Optional[float] = None                           # what results were judged against
    bench: Optional[Dict[str, Any]] = None                           # bench's sweep (rdmadoctor-bench/1)
    lang: str = "en"                                                 # the language the text was written in
