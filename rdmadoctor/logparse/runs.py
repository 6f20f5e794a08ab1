"""Classified lines in, Runs out: where one perftest side's output ends and the next begins, and which
side each one is.

A run grows in the order perftest prints: command, server banner, header box, address lines, result
table, with messages anywhere. Something that can only start a new run (a second command line, a
second header box, a separator that names a side, a message only the other side can print) closes
the current one.
"""
from __future__ import annotations

import math
import re
import struct
from array import array
from operator import itemgetter
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from rdmadoctor.knowledge.perftest import UINT32, UNIT_TO_GBPS
from rdmadoctor.logparse.kept import MAX_RUNS, KeptMessages
from rdmadoctor.logparse.lines import Item
from rdmadoctor.model import Address, Command, HeaderField, Message, ResultRow, Run

MAX_SIZES = 256         # message sizes whose first row a run keeps (perftest -a prints 23)
SKETCH_VALUES = 1 << 18     # values of the measured column kept in the open run (median exact); beyond, a sketch
PENDING_TOKENS = 1 << 14    # measured tokens a run holds unconverted, before its values are sampled

_ROW_COLUMNS = {
    "bw": ("bw_peak", "bw_avg", "msg_rate", "cpu_util"),
    "lat": ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9"),
    "lat_dur": ("t_avg", "tps_avg"),
}


_METRIC = {"bw": "bw_avg", "lat": "t_typical", "lat_dur": "t_avg"}     # the column a run's rows are summarised by
_WIDTH = {"bw": 5, "lat": 9, "lat_dur": 4}
_ROW_CHARS = b"0123456789. \t\n"
_SHAPE = bytes.maketrans(b"123456789\t", b"000000000 ")      # digits -> 0, blanks -> space: a number is 0 or 0.0


def _number(text) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _plain_numbers(tokens: List[bytes]) -> bool:
    """Every token a number as perftest prints one (digits, at most one point, not at an end)."""
    text = b" ".join(tokens)
    return not text.translate(None, b"0123456789. ") and _printable_numbers(text.translate(_SHAPE))


class _Sketch:
    """The values of one column (floats, NaN left out): all of them while they are at most SKETCH_VALUES, and the median
    exact; beyond, every 2nd, 4th ... value in the order they came (a sample of at most SKETCH_VALUES: the median is the
    sample's, and says so; min and max stay exact). Bounded whatever the number of rows; every step runs in C."""

    __slots__ = ("sample", "step", "count", "low", "high", "pending")

    def __init__(self):
        self.sample = array("d")
        self.step = 1
        self.count = 0
        self.low, self.high = math.inf, -math.inf     # of the values seen once sampling began
        # tokens added before sampling began, not yet converted (a run that is not kept never converts them)
        self.pending: List[bytes] = []

    def add(self, values: List[float]) -> None:
        if self.pending:
            self._convert_pending()
        if not values:
            return
        taken = values
        if self.step > 1:
            self.low, self.high = min(self.low, min(values)), max(self.high, max(values))
            taken = values[-self.count % self.step::self.step]      # the values at every step-th place overall
        self.count += len(values)
        self.sample.extend(taken)
        self._thin()

    def add_tokens(self, tokens: List[bytes]) -> None:
        """What add() of the tokens' numbers does, for tokens of one shape (digits, and a point at one place), whose
        order is their numbers'. Before sampling begins they are converted when needed (by PENDING_TOKENS, or for the
        summary); after, only the sampled tokens and the two extremes are."""
        if self.step == 1:
            self.pending += tokens
            if len(self.pending) > PENDING_TOKENS:
                self._convert_pending()
            return
        if not tokens:
            return
        self.low, self.high = min(self.low, float(min(tokens))), max(self.high, float(max(tokens)))
        taken = tokens[-self.count % self.step::self.step]
        self.count += len(tokens)
        self.sample.extend(map(float, taken))
        self._thin()

    def _convert_pending(self) -> None:
        """The pending tokens added as numbers, as if each had been when it came (add() gives the same sample and
        extremes for values added at once or in parts)."""
        pending, self.pending = self.pending, []
        self.add(list(map(float, pending)))

    def _thin(self) -> None:
        while len(self.sample) > SKETCH_VALUES:
            self.low, self.high = min(self.low, min(self.sample)), max(self.high, max(self.sample))
            self.sample = self.sample[::2]
            self.step *= 2

    def summary(self) -> Optional[Dict[str, object]]:
        if self.pending:
            self._convert_pending()
        values = sorted(self.sample)
        if not values:
            return None
        exact = self.step == 1
        return {"min": values[0] if exact else min(self.low, values[0]), "median": values[(len(values) - 1) // 2],
                "max": values[-1] if exact else max(self.high, values[-1]), "values": self.count,
                "median_exact": exact}


_TOKEN = re.compile(rb"[^ \n]+")


def _printable_numbers(shape: bytes) -> bool:
    """Every number in a row's shape (_SHAPE: digits 0, blanks spaces) as perftest prints one: digits with at most one
    point, between digits."""
    return shape.count(b".") == shape.count(b"0.0") and b".." not in shape.translate(None, b"0")


class _Layout(NamedTuple):
    length: int                        # of every line, its newline included
    spans: List[Tuple[int, int]]       # where each token of a line lies in it


def _uniform_layout(chunk: bytes, width: int) -> Optional[_Layout]:
    """The length of `chunk`'s lines and where their tokens lie, when every line is laid out alike (perftest prints
    a row with fixed field widths, so a soak's rows of one size look alike) and bulk_rows would take the lines as
    plain rows with one size: their sizes and counts digits (below 10 of them, the size not 0), every point between
    digits, the lines neither too short nor a flattened table. None otherwise (bulk_rows then splits the lines into
    words)."""
    length = chunk.find(b"\n") + 1
    n = len(chunk) // length if length > 1 else 0
    if n == 0 or n * length != len(chunk):
        return None
    shape = chunk.translate(_SHAPE)
    line_shape = shape[:length]
    if shape != line_shape * n or line_shape.translate(None, b"0. \n") or not _printable_numbers(line_shape):
        return None         # rows of another layout, or a character no row has
    spans = [m.span() for m in _TOKEN.finditer(line_shape)]
    k = len(spans)
    if k < 3 or (k >= 2 * width and k % width == 0):
        return None
    for start, end in spans[:2]:
        if end - start >= 10 or line_shape[start:end].strip(b"0"):
            return None
    start, end = spans[0]
    if not chunk[start:end].lstrip(b"0") or any(chunk[p::length].count(chunk[p:p + 1]) != n for p in range(start, end)):
        return None
    return _Layout(length, spans)


def _plain_row(line: int, kind: str, unit: Optional[str], words: list) -> ResultRow:
    """A row whose tokens are plain numbers (sizes and counts digits, the rest as float() reads them)."""
    return ResultRow(line=line, kind=kind, size=int(words[0]), iterations=int(words[1]),
                     values={name: float(word) for name, word in zip(_ROW_COLUMNS[kind], words[2:])}, unit=unit)


def _measured_column(kind: str, width: int) -> Optional[int]:
    """Which of a row's `width` tokens is the kind's measured figure; None when the rows are too short for it."""
    names = _ROW_COLUMNS[kind]
    metric = _METRIC[kind]
    column = names.index(metric) + 2 if metric in names else None
    return None if column is None or column >= width else column


def _first_row_of_each_size(sizes: list, tokens: set) -> Dict[int, int]:
    """size -> the index of its first row in the sizes column (`tokens`: the column's distinct tokens; two tokens
    may spell one size)."""
    by_size: Dict[int, int] = {}
    for token in tokens:
        i = sizes.index(token)
        size = int(token)
        if size not in by_size or i < by_size[size]:
            by_size[size] = i
    return by_size


class RowStats:
    """What one run's result rows add up to, in bounded memory however many there are: their count, the rows that
    matter as evidence (the first and the last, the first two real ones, the first of each size and unit, the
    first garbage row, the best bandwidth, the largest size) and the min, median and max of the measured column."""

    def __init__(self):
        self.count = 0
        self.real = 0
        self.kept: Dict[int, ResultRow] = {}         # ordinal -> row
        self.reasons: Dict[int, set] = {}
        self.sizes: set = set()
        self.units: set = set()
        self.garbage = 0
        self.best_gbps = -1.0
        self.max_size = -1
        self.sketches: Dict[tuple, _Sketch] = {}     # (kind, unit) -> values of the kind's measured column
        self.moving: Dict[str, int] = {}             # "best" | "maxsize" | "last" -> ordinal
        self.frozen: Optional[Dict[str, object]] = None

    def _keep(self, ordinal: int, row: ResultRow, reason: str) -> None:
        if ordinal not in self.kept:
            self.kept[ordinal] = row
            self.reasons[ordinal] = set()
        self.reasons[ordinal].add(reason)

    def _move(self, reason: str, ordinal: int, row: ResultRow) -> None:
        old = self.moving.get(reason)
        if old is not None and old != ordinal:
            reasons = self.reasons[old]
            reasons.discard(reason)
            if not reasons:
                del self.kept[old], self.reasons[old]
        self.moving[reason] = ordinal
        self._keep(ordinal, row, reason)

    def add(self, row: ResultRow) -> None:
        """One row (the per-line path)."""
        ordinal = self.count
        self.count += 1
        if ordinal == 0:
            self._keep(ordinal, row, "first")
        if 0 < row.size < UINT32 and 0 <= row.iterations < UINT32:
            self._add_real(ordinal, row)
        else:
            if not self.garbage:
                self._keep(ordinal, row, "garbage")
            self.garbage += 1
        if row.unit not in self.units:
            self.units.add(row.unit)
            self._keep(ordinal, row, "unit")
        self._move("last", ordinal, row)
        value = row.values.get(_METRIC[row.kind], math.nan)
        if value == value:
            self._sketch(row.kind, row.unit).add([value])

    def _add_real(self, ordinal: int, row: ResultRow) -> None:
        """A row perftest measured (not garbage a paste broke): its size, and the best bandwidth so far."""
        size = row.size
        if self.real < 2:
            self._keep(ordinal, row, "real")
        self.real += 1
        if size not in self.sizes and len(self.sizes) < MAX_SIZES:
            self.sizes.add(size)
            self._keep(ordinal, row, "size")
        if size > self.max_size:
            self.max_size = size
            self._move("maxsize", ordinal, row)
        if row.kind == "bw" and row.unit:
            value = row.values.get("bw_avg", float("nan"))
            if not math.isnan(value) and value * UNIT_TO_GBPS.get(row.unit, 0) > self.best_gbps:
                self.best_gbps = value * UNIT_TO_GBPS.get(row.unit, 0)
                self._move("best", ordinal, row)

    def _sketch(self, kind: str, unit: Optional[str]) -> _Sketch:
        key = (kind, unit)
        sketch = self.sketches.get(key)
        if sketch is None:
            sketch = self.sketches[key] = _Sketch()
        return sketch

    def add_columns(self, first_line: int, same_line: bool, kind: str, unit: Optional[str], cols: List[list],
                    tokens: Optional[set] = None) -> None:
        """Many rows at once, as columns of tokens: every row real (sizes and counts below 2^32, no size 0), no NaN.
        Row i is on line first_line + i, or on first_line for all (`same_line`: a flattened table). `tokens`: the set of
        the first column's tokens, when known."""
        def row(i: int) -> ResultRow:
            return _plain_row(first_line if same_line else first_line + i, kind, unit, [col[i] for col in cols])

        column = _measured_column(kind, len(cols))
        self._add_many(len(cols[0]), kind, unit, row,
                       _first_row_of_each_size(cols[0], set(cols[0]) if tokens is None else tokens),
                       None if column is None else cols[column])

    def add_uniform(self, first_line: int, kind: str, unit: Optional[str], chunk: bytes, layout: _Layout) -> int:
        """Rows of one layout (_uniform_layout: every line as long, its tokens at the same places, every size token
        the same): what add_columns adds for their columns, cutting from the bytes only the measured column's tokens.
        Returns how many rows were added."""
        length, spans = layout

        def row(i: int) -> ResultRow:
            return _plain_row(first_line + i, kind, unit, chunk[i * length:(i + 1) * length].split())

        column = _measured_column(kind, len(spans))
        measured = None
        if column is not None:
            start, end = spans[column]
            cut = struct.Struct(f"{start}x{end - start}s{length - end}x")
            measured = list(map(itemgetter(0), cut.iter_unpack(chunk)))
        size_start, size_end = spans[0]
        n = len(chunk) // length
        self._add_many(n, kind, unit, row, {int(chunk[size_start:size_end]): 0}, measured, one_shape=True)
        return n

    def _add_many(self, n: int, kind: str, unit: Optional[str], row: Callable[[int], ResultRow],
                  by_size: Dict[int, int], measured: Optional[list], one_shape: bool = False) -> None:
        """n real rows at once: `row(i)` makes row i, `by_size` says where each size first comes, `measured` holds
        the tokens of the kind's measured column (None when the rows lack it), all of one shape if `one_shape`."""
        base = self.count
        if base == 0:
            self._keep(0, row(0), "first")
        for i in range(min(n, 2 - self.real) if self.real < 2 else 0):
            self._keep(base + i, row(i), "real")
        for size, i in sorted(by_size.items(), key=lambda kv: kv[1]):
            if size not in self.sizes and len(self.sizes) < MAX_SIZES:
                self.sizes.add(size)
                self._keep(base + i, row(i), "size")
        largest = max(by_size)
        if largest > self.max_size:
            self.max_size = largest
            self._move("maxsize", base + by_size[largest], row(by_size[largest]))
        if unit not in self.units:
            self.units.add(unit)
            self._keep(base, row(0), "unit")
        if measured is not None:
            self._add_measured(kind, unit, measured, base, row, one_shape)
        self._move("last", base + n - 1, row(n - 1))
        self.count += n
        self.real += n

    def _add_measured(self, kind: str, unit: Optional[str], tokens: List[bytes], base: int,
                      row: Callable[[int], ResultRow], one_shape: bool) -> None:
        """The kind's measured column of rows added at once (row i is ordinal base + i): the best bandwidth so
        far, and the figures' sketch. `one_shape`: the tokens are of one shape, so their order is their numbers'."""
        values: list = tokens if one_shape else list(map(float, tokens))
        if kind == "bw" and unit:
            top = max(values)
            gbps = float(top) * UNIT_TO_GBPS.get(unit, 0)
            if gbps > self.best_gbps:
                self.best_gbps = gbps
                i = values.index(top)       # the first row of the best value, as features.bw_row picks it
                self._move("best", base + i, row(i))
        if one_shape:
            self._sketch(kind, unit).add_tokens(tokens)
        else:
            self._sketch(kind, unit).add(values)

    def rows(self) -> List[ResultRow]:
        return [self.kept[o] for o in sorted(self.kept)]

    def freeze(self) -> None:
        """The run is closed: its values are reduced to their figures (a closed run holds no counts)."""
        self.frozen = self.summary()
        self.sketches = {}

    def summary(self) -> Dict[str, object]:
        if self.frozen is not None and not self.sketches:
            return self.frozen
        out: Dict[str, object] = {"rows": self.count, "real_rows": self.real, "garbage_rows": self.garbage,
                                  "kept_rows": len(self.kept), "sizes": sorted(self.sizes),
                                  "sizes_complete": len(self.sizes) < MAX_SIZES}
        measured = []
        for (kind, unit), sketch in self.sketches.items():
            figures = sketch.summary()
            if figures:
                measured.append({"kind": kind, "column": _METRIC[kind], "unit": unit, **figures})
        out["measured"] = measured
        return out


class RunBuilder:
    def __init__(self, source: str):
        self.source = source
        self.runs: List[Run] = []
        self._healthy: List[Run] = []      # the kept runs without an error, in order (what a failure may replace)
        self.dropped_runs = 0
        self.current: Optional[Run] = None
        self.result_kind: Optional[str] = None
        self.result_unit: Optional[str] = None
        self.pending_label: Optional[dict] = None
        self._strength: dict = {}          # id(run) -> strength of the evidence for its side
        self._stats: Dict[int, RowStats] = {}   # id(run) -> its result rows, summarised
        self._messages = KeptMessages()
        # A command started in the background ("ib_write_bw &") keeps printing while the next command
        # runs in the same terminal (a loopback test): their lines interleave. `partner` is that
        # background run while it has not finished; lines the current run already has go to it.
        self.background: Optional[Run] = None
        self.partner: Optional[Run] = None
        self._handlers = {kind: getattr(self, "_on_" + kind) for kind in
                          ("side_label", "command", "banner", "test_name", "header", "address", "gid",
                           "result_header", "numbers", "cut_row", "message", "box")}

    # -- run lifecycle ---------------------------------------------------------------------------
    def _has_content(self, run: Run) -> bool:
        return bool(run.command or run.banner_line or run.test_name or run.header or run.messages
                    or self._rows(run) or run.addresses)

    def _rows(self, run: Optional[Run]) -> int:
        """How many result rows the run printed so far."""
        if run is None:
            return 0
        stats = self._stats.get(id(run))
        return stats.count if stats is not None else len(run.results)

    def _start(self, line: int) -> Run:
        if self.current is not None and self._has_content(self.current):
            self._close()
        if self.current is None or self._has_content(self.current):
            self.current = Run(source=self.source, index=len(self.runs) + self.dropped_runs,
                               first_line=line, last_line=line)
            self.result_kind = self.result_unit = None
        if self.pending_label:
            self.current.label = self.pending_label["label"]
            self._set_side(self.current, self.pending_label["side"], f"separator '{self.pending_label['label']}'", 3)
            self.pending_label = None
        return self.current

    def _close(self) -> None:
        run = self.current
        self.current = None
        if run is None or not self._has_content(run):
            return
        failed = any(m.kind == "error" for m in run.messages)
        if len(self.runs) < MAX_RUNS:
            self.runs.append(run)
            if not failed:
                self._healthy.append(run)
            stats = self._stats.get(id(run))
            if stats is not None and run is not self.partner and run is not self.background:
                stats.freeze()
            return
        self.dropped_runs += 1
        if failed:
            # a failure anywhere counts: it takes the place of the last kept run that only printed results
            found = self._last_healthy()
            if found is not None:
                healthy = self._healthy.pop(found)
                self._forget(healthy)
                del self.runs[next(i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i] is healthy)]
                self.runs.append(run)
                return
        self._forget(run)

    def _last_healthy(self) -> Optional[int]:
        """Where in `_healthy` the last kept run without an error that printed results is. A kept run's messages are
        final, and so are its rows unless it is the background run or its partner (their lines interleave): a run
        without rows that is neither is left out of later searches."""
        healthy = self._healthy
        for i in range(len(healthy) - 1, -1, -1):
            run = healthy[i]
            if self._rows(run):
                return i
            if run is not self.partner and run is not self.background:
                del healthy[i]
        return None

    def _forget(self, run: Run) -> None:
        """A run that is not kept: what is held about it by its id goes (a later run may get the same id)."""
        if run is not self.partner and run is not self.background:
            self._stats.pop(id(run), None)
            self._strength.pop(id(run), None)
            self._messages.forget(run)

    def _run(self, line: int) -> Run:
        run = self.current if self.current is not None else self._start(line)
        run.last_line = line
        return run

    # side evidence strength: 4 command line, 3 separator/prompt label, 3 banner, 2 side-only message
    def _set_side(self, run: Run, side: str, reason: str, strength: int) -> None:
        if strength > self._strength.get(id(run), 0):
            run.side, run.side_reason = side, reason
            self._strength[id(run)] = strength

    # -- items ----------------------------------------------------------------------------------------
    def feed(self, number: int, items) -> None:
        inline_side = None
        if items and items[0].kind == "side_label" and len(items) > 1:
            inline_side = items[0].data["side"]
            items = items[1:]
        handlers = self._handlers
        for item in items:
            handler = handlers.get(item.kind)
            if handler is not None:
                handler(number, item, inline_side)

    def _on_side_label(self, number: int, item: Item, inline_side) -> None:
        if self.current is not None and self._has_content(self.current):
            self._close()
        self.pending_label = item.data

    def _on_command(self, number: int, item: Item, inline_side) -> None:
        d = item.data
        waiting = self.background if self.background is not None and not self._rows(self.background) else None
        run = self._start(number)
        released = [r for r in (self.partner, self.background) if r is not None and r is not waiting]
        self.partner = waiting
        self.background = run if d.get("background") else None
        for old in released:
            if old is not self.background and not any(kept is old for kept in self.runs):
                self._forget(old)
        run.command = Command(tool=d["tool"], argv=list(d["argv"]), options=dict(d["options"]), host=d["host"],
                              line=number, text=d["text"])
        run.tool = d["tool"]
        run.last_line = number
        if d["options"].get("server") or d["options"].get("client"):
            side = "server" if d["options"].get("server") else "client"
        else:
            side = "client" if d["host"] else "server"
        self._set_side(run, side, f"command line ({'names server ' + d['host'] if d['host'] else 'no server address'})", 4)
        if d.get("prompt_side"):
            run.label = run.label or d["prompt_side"]

    def _on_banner(self, number: int, item: Item, inline_side) -> None:
        run = self.current
        if item.data == "rdma_cm" and run is not None and run.test_name and not self._rows(run):
            # the -R server prints "Waiting for client rdma_cm QP to connect" inside its header box
            self._set_side(run, "server", "prints 'Waiting for client rdma_cm QP to connect'", 3)
            run.last_line = number
            return
        if run is None or run.banner_line or run.test_name or self._rows(run) or run.addresses:
            run = self._start(number)
        run = self._run(number)
        run.banner_line = number
        self._set_side(run, "server", "prints 'Waiting for client to connect'", 3)

    def _interleaved(self, has) -> Optional[Run]:
        """The background partner, when the current run already has what this line brings.
        (Callers test `self.partner` first: most logs have none, and this runs for every line.)"""
        partner = self.partner
        if self.current is not None and has(self.current) and not has(partner):
            return partner
        return None

    def _on_test_name(self, number: int, item: Item, inline_side) -> None:
        run = self._interleaved(lambda r: r.test_name is not None) if self.partner else None
        if run is None:
            run = self.current
            if run is None or run.test_name or self._rows(run) or run.addresses:
                run = self._start(number)
            run = self._run(number)
        run.last_line = number
        run.test_name = HeaderField(item.data["text"], number)
        verb = item.data["verb"].lower()
        tst = item.data["tst"].upper()
        kind = {"rdma_write": "write", "rdma_write_imm": "write", "rdma_read": "read", "send": "send",
                "send_imm": "send", "atomic": "atomic"}[verb]
        inferred = f"ib_{kind}_{'bw' if tst == 'BW' else 'lat'}"
        if run.tool is None:
            run.tool = inferred
        run.test = {"verb": item.data["verb"], "tst": tst, "atomic": item.data["atomic"],
                    "bidirectional": item.data["bidirectional"]}

    def _on_header(self, number: int, item: Item, inline_side) -> None:
        run = None
        if self.partner is not None:
            keys = [k for k, _ in item.data]
            run = self._interleaved(lambda r: any(k in r.header for k in keys))
        if run is not None:
            for key, value in item.data:
                run.header.setdefault(key, HeaderField(value, number))
            return
        run = self.current
        if run is None or self._rows(run) or (run.addresses and not run.test_name):
            run = self._start(number)
        run = self._run(number)
        for key, value in item.data:
            if key in run.header and run.header[key].line != number and (run.addresses or self._rows(run)):
                run = self._start(number)
                run = self._run(number)
            run.header[key] = HeaderField(value, number)

    def _on_address(self, number: int, item: Item, inline_side) -> None:
        role = item.data["role"]
        partner = self._interleaved(lambda r: any(a.role == role for a in r.addresses)) if self.partner else None
        if partner is not None:
            partner.addresses.append(Address(line=number, **item.data))
            return
        run = self._run(number)
        if self._rows(run):
            run = self._start(number)
            run = self._run(number)
        run.addresses.append(Address(line=number, **item.data))

    def _on_gid(self, number: int, item: Item, inline_side) -> None:
        run = self._run(number)
        if run.addresses and run.addresses[-1].gid is None:
            run.addresses[-1].gid = item.data
            run.addresses[-1].gid_line = number

    def _on_box(self, number: int, item: Item, inline_side) -> None:
        """perftest's dashes (RESULT_LINE) after the peer's address: before a results table's titles, or, from a side
        that measures nothing, alone once it has closed the side channel (read_lat.c, atomic_lat.c: only the client
        posts, and the server prints RESULT_LINE after ctx_close_connection()). Interleaved sides: not told apart."""
        run = self.current
        if run is None or self.partner is not None or run.result_header_line is not None or run.closed_line is not None:
            return
        if any(a.role == "remote" for a in run.addresses):
            run.closed_line = run.last_line = number

    def _on_result_header(self, number: int, item: Item, inline_side) -> None:
        # a second table in one run is --report-both's "Remote results": the same run
        partner = self._interleaved(lambda r: r.result_header_line is not None) if self.partner else None
        if partner is not None:
            partner.result_header_line = number
            self.partner_unit = item.data["unit"]
            return
        run = self._run(number)
        run.result_header_line = run.result_header_line or number
        run.closed_line = None          # (the dashes were the table's)
        self.result_kind, self.result_unit = item.data["kind"], item.data["unit"]

    def _on_numbers(self, number: int, item: Item, inline_side) -> None:
        run = self.current
        if run is None or self.result_kind is None:
            return  # numbers outside a result table (a timestamp, a counter dump): not a result row
        partner = self._interleaved(lambda r: bool(self._rows(r))) if self.partner else None
        if partner is not None and partner.result_header_line is not None:
            run, unit = partner, getattr(self, "partner_unit", self.result_unit)
            self._add_rows(partner, number, item.data, unit)
            return
        self._add_rows(run, number, item.data, self.result_unit)

    def _add_rows(self, run: Run, number: int, values, unit) -> None:
        width = {"bw": 5, "lat": 9, "lat_dur": 4}[self.result_kind]
        rows = [values[i:i + width] for i in range(0, len(values), width)] if len(values) >= 2 * width and \
            len(values) % width == 0 else [values]
        for row in rows:
            if len(row) < 3:
                continue
            try:
                size, iterations = int(row[0]), int(row[1])
            except ValueError:
                continue
            names = _ROW_COLUMNS[self.result_kind]
            self._stats_of(run).add(ResultRow(line=number, kind=self.result_kind, size=size, iterations=iterations,
                                              values={n: _number(v) for n, v in zip(names, row[2:])}, unit=unit))
        run.last_line = number

    def _stats_of(self, run: Run) -> RowStats:
        stats = self._stats.get(id(run))
        if stats is None:
            stats = self._stats[id(run)] = RowStats()
        return stats

    @property
    def table_open(self) -> bool:
        """A run is open and its result table's titles were printed: result rows are expected."""
        return self.current is not None and self.result_kind is not None

    def bulk_rows(self, number: int, chunk: bytes) -> bool:
        """Lines `chunk` (whole lines, from line `number`) that are all result rows of the open table, added at
        once; False, having added nothing, when they are not all plain rows of one width (the caller then reads
        them line by line)."""
        run, kind = self.current, self.result_kind
        if run is None or kind is None or self.partner is not None:
            return False
        layout = _uniform_layout(chunk, _WIDTH[kind])
        if layout is not None:
            run.last_line = number + self._stats_of(run).add_uniform(number, kind, self.result_unit, chunk, layout) - 1
            return True
        if chunk.translate(None, _ROW_CHARS):
            return False
        marked = chunk.replace(b"\n", b" | ").split()
        n = chunk.count(b"\n")
        try:
            k = marked.index(b"|")
        except ValueError:
            return False
        width = _WIDTH[kind]
        if k < 3 or (k >= 2 * width and k % width == 0) or len(marked) != n * (k + 1) \
                or marked[k::k + 1].count(b"|") != n:
            return False          # a blank line, lines of other widths, a flattened table: line by line
        if not _printable_numbers(chunk.translate(_SHAPE)):
            return False          # a number perftest cannot print ("1.2.3", "10.00.5", ".5", "5.")
        cols = [marked[j::k + 1] for j in range(k)]
        sizes = set(cols[0])
        if not all(t.isdigit() and len(t) < 10 and t.lstrip(b"0") for t in sizes) or \
                not b"".join(cols[1]).isdigit() or max(map(len, cols[1])) >= 10:
            return False          # garbage rows (2^32 and beyond) and size 0: line by line
        self._stats_of(run).add_columns(number, False, kind, self.result_unit, cols, sizes)
        run.last_line = number + n - 1
        return True

    def _on_cut_row(self, number: int, item: Item, inline_side) -> None:
        """#bytes and #iterations alone, right under a bandwidth table's titles: a row cut short by the paste.
        perftest prints a row with one printf (REPORT_FMT in src/perftest_parameters.h), so the row was printed."""
        run = self.current
        if run is None or self.result_kind != "bw" or self._rows(run) or run.result_header_line is None:
            return
        size, iterations = (int(v) for v in item.data)
        self._stats_of(run).add(ResultRow(line=number, kind="bw", size=size, iterations=iterations, values={},
                                          unit=self.result_unit))
        run.last_line = number

    def _on_message(self, number: int, item: Item, inline_side) -> None:
        m = item.data
        side = m.pattern.side or inline_side
        run = self.current
        if run is not None and side and self._strength.get(id(run), 0) >= 2 and run.side != side \
                and self._has_content(run):
            run = self._start(number)           # a message only the other side prints: the other side's log
        run = self._run(number)
        if side:
            strength = 3 if inline_side else 2
            self._set_side(run, side, f"prints '{m.text.strip()}'", strength)
        message = Message(id=m.pattern.id, kind=m.pattern.kind, text=m.text.strip(), line=number,
                          source=self.source, fields=dict(m.fields))
        if m.pattern.origin:
            message.fields.setdefault("origin", m.pattern.origin)
        message.fields.setdefault("phase", m.pattern.phase)
        if m.pattern.gen:
            message.fields.setdefault("gen", m.pattern.gen)
        self._messages.add(run, message)

    def token_rows(self, number: int, tokens: List[bytes], width: int) -> None:
        """Rows of `width` numbers from a flattened table on line `number` (a line read in windows), as ASCII tokens."""
        run, kind = self.current, self.result_kind
        cols = [tokens[j::width] for j in range(width)]
        if self.partner is None and run is not None and kind is not None and b"".join(cols[0]).isdigit() \
                and b"".join(cols[1]).isdigit() and max(map(len, cols[0])) < 10 and max(map(len, cols[1])) < 10 \
                and b"0" not in {t.lstrip(b"0") or b"0" for t in set(cols[0])} and _plain_numbers(tokens):
            self._stats_of(run).add_columns(number, True, kind, self.result_unit, cols)
            run.last_line = number
            return
        for i in range(0, len(tokens), width):
            self.feed(number, (Item("numbers", tuple(t.decode() for t in tokens[i:i + width])),))

    def finish(self) -> List[Run]:
        self._close()
        for run in self.runs:
            stats = self._stats.get(id(run))
            if stats is not None:
                run.results = stats.rows()
                run.results_dropped = stats.count - len(run.results)
                run.row_summary = stats.summary()
        self._stats.clear()
        self._messages.clear()
        return self.runs
