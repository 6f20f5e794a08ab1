"""One pass over each input: lines classified (lines.py), perftest's runs built (runs.py), every other
producer's runs (producers.py), the settings and commands a paste shows; parse_streams / parse_paths /
parse_text are the package's entry points."""
from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
from pathlib import Path
from typing import BinaryIO, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from rdmadoctor.logparse import catalog, compressed, pasted, prefilter, producers, rows
from rdmadoctor.logparse import library as shared_words
from rdmadoctor.logparse.lines import CUT_ROW_RE, NUMBERS_RE, RESULT_HEADER_RE, Item, LineClassifier, anchor_starts
from rdmadoctor.logparse.kept import MAX_LISTED_INPUTS, InputRuns, kind_key
from rdmadoctor.logparse.producers import ProducerRuns
from rdmadoctor.logparse.reader import KeepBudget, Lines, Piece, SourceReader
from rdmadoctor.logparse.runs import _WIDTH, RunBuilder
from rdmadoctor.model import HeaderField, Message, ParsedLog, Run, SourceText

WINDOW = 1 << 13        # a long line is classified this much at a time (some catalogue patterns are quadratic)
OVERLAP = 1 << 12       # and a message is looked for this far past the window (so that a cut never splits one)
ROWS_WINDOW = 1 << 20   # the numbers of a flattened result table are read this much at a time
# what the numbers of a flattened result table are made of: digits, points and blanks (the reader leaves no blank in a
# line but these)
_ROW_TEXT = b"0123456789. \t\x0b\x0c\r"

_NAME_SIDE = (("server", re.compile(r"(?<![a-z])(server|srv)(?![a-z])", re.I)),
              ("client", re.compile(r"(?<![a-z])(client|cli)(?![a-z])", re.I)))


class InputError(Exception):
    """An input that cannot be read at all (missing file, a directory, permission denied)."""


def parse_streams(inputs: Iterable[Tuple[str, BinaryIO]], size_hint: Optional[int] = 0) -> ParsedLog:
    """Each input in turn (an input is read to its end before the next is opened). `size_hint`: the inputs'
    total size (None: not known), which decides whether the prefilter pays (logparse/prefilter.py)."""
    classifier = LineClassifier()
    kept = InputRuns()
    sources: List[SourceText] = []
    unlisted = 0
    budget = KeepBudget()
    pre = prefilter.load(size_hint)
    for name, given in inputs:
        stream = compressed.opened(name, given)
        reader = SourceReader(name, stream, budget)
        source = _Source(name, classifier, pre)
        flattened_before = classifier.flattened
        source.read(reader)
        if isinstance(stream, (compressed.Decompressed, compressed.Unreadable)):
            reader.text.compression, reader.text.read_stopped = stream.kind, stream.problem
        source_runs = [r for r in _fold_version_queries(source.builder.finish()) if not _lone_header_field(r)]
        source_runs += source.others.finish(source.settings, source_runs)
        source_runs.sort(key=lambda r: r.first_line)
        reader.text.flattened = classifier.flattened - flattened_before
        reader.text.runs_dropped = source.builder.dropped_runs + source.others.dropped
        _side_from_name(name, source_runs)
        kept_any = sum(kept.add(run) for run in source_runs) > 0     # every run offered, not only up to the first kept
        if kept_any or len(sources) < MAX_LISTED_INPUTS:
            if source_runs and not kept_any:
                reader.let_go()
            sources.append(reader.text)
        else:
            reader.let_go()
            unlisted += 1
    kept.place_pairs()
    runs = _attach_commands(kept.runs)
    _complete_sides(runs)
    # the device listings a paste shows (ibv_devinfo, ibstat, show_gids ...) are facts about its host
    return ParsedLog(runs=runs, sources=sources, facts=pasted.facts_of(runs, [s.name for s in sources]),
                     runs_dropped=kept.dropped, inputs_unlisted=unlisted)


# Catalogues whose messages belong to a producer's own run; the others (libibverbs and librdmacm as the
# "verbs" catalogue, the kernel) are libraries: their lines join whatever run is open.
_LIBRARIES = ("verbs", "kernel")


class _Source:
    """One input being read: perftest's run builder, the other producers' runs, and the settings seen."""

    def __init__(self, name: str, classifier: LineClassifier, pre: Optional[prefilter.Prefilter] = None):
        self.classifier = classifier
        self.classify = classifier.classify
        self.builder = RunBuilder(name)
        self.others = ProducerRuns(name)
        self.settings: Dict[str, HeaderField] = {}
        self.active = "perftest"          # whose run a library's message joins
        self.name = name
        self.pre = pre
        self.long_number: Optional[int] = None    # the line read in windows (longer than reader.MAX_LINE)
        self.long_text = ""
        self.carry: List[bytes] = []              # a result row cut by a window's end
        self.text = ""                            # the line being read
        # the prefilter's patterns whose match makes line() read more than a line's messages: a setting, a command
        self.reads_more = pre.setting_ids | pre.tool_ids if pre is not None else frozenset()

    # -- the scan ----------------------------------------------------------------------------------------------
    def read(self, reader: SourceReader) -> None:
        for event in reader.events():
            if isinstance(event, Lines):
                if self.pre is not None:
                    self._scan(event.first, event.data)
                else:
                    self._each_line(event.first, event.data)
            else:
                self._piece(event)
        self._end_long()

    def _each_line(self, number: int, data: bytes) -> None:
        """Every line through the classifier (no prefilter)."""
        self._end_long()
        for line in data.decode("utf-8", "replace").split("\n")[:-1]:
            if line:
                self.line(number, line)
            number += 1

    def _scan(self, number: int, data: bytes) -> None:
        """The lines the prefilter names through the classifier; between them, only result rows can be."""
        self._end_long()
        pos = 0
        assert self.pre is not None
        # other producers' row patterns are not in the database (their lines are found in the gaps), so a named line
        # may hold one too
        row_ids = self.pre.row_ids
        for end, ids in self.pre.matches(data):
            found_start = data.rfind(b"\n", pos, end - 1)
            start = found_start + 1 if found_start >= 0 else pos
            if start > pos:
                self._gap(number, data[pos:start])
                number += data.count(b"\n", pos, start)
            line = data[start:end - 1].decode("utf-8", "replace")
            if line:
                self.line(number, line, None if prefilter.ANY in ids else ids | row_ids)
            number += 1
            pos = end
        if pos < len(data):
            self._gap(number, data[pos:])

    def _gap(self, number: int, chunk: bytes) -> None:
        """Lines no pattern of the main database matches: result rows when a table is open (or when another producer
        is talking, for a row makes perftest the one talking), and rows of another producer's table (rows.SHAPE),
        otherwise nothing."""
        if chunk.isspace():
            return                  # blank lines: read line by line, each is skipped (_each_line)
        builder = self.builder
        table_open = builder.table_open
        if table_open and builder.bulk_rows(number, chunk):
            self.active = "perftest"
            return
        assert self.pre is not None
        ends = self.pre.row_lines(chunk)
        if table_open or self.active != "perftest" or ends is None:
            self._rows_among(number, chunk, ends)
            return
        # perftest is talking and no table is open: only another producer's row can matter, read as if the database
        # had named it (the lines after it are a gap of their own, for the row may make that producer the one talking)
        pos = 0
        for end in ends:
            line = chunk[pos:end].rsplit(b"\n", 2)[-2].decode("utf-8", "replace")
            if not rows.SHAPE.search(line):
                continue
            number += chunk.count(b"\n", pos, end) - 1
            self.line(number, line)
            number += 1
            pos = end
            if self.active != "perftest" or builder.table_open:
                self._gap(number, chunk[pos:])
                return

    def _rows_among(self, number: int, chunk: bytes, ends: Optional[List[int]]) -> None:
        """Each line that can be a row read through the classifier: perftest's (or one cut after its first two
        numbers, the run stopped mid-line), or another producer's where `ends` (the ends of the lines where one can
        be; None: anywhere) says it can."""
        candidates = None
        if ends is not None:
            candidates, last, index = set(), 0, -1
            for end in ends:
                index += chunk.count(b"\n", last, end)
                candidates.add(index)
                last = end
        for i, line in enumerate(chunk.decode("utf-8", "replace").split("\n")[:-1]):
            stripped = line.strip()
            if (stripped[:1].isdigit() and (NUMBERS_RE.match(stripped) or CUT_ROW_RE.match(stripped))) or \
                    ((candidates is None or i in candidates) and rows.SHAPE.search(line)):
                self.line(number + i, line)

    # -- a line longer than reader.MAX_LINE: windows -----------------------------------------------------------
    def _piece(self, piece: Piece) -> None:
        if self.long_number != piece.number:
            self._end_long()
            self.long_number, self.long_text = piece.number, ""
        self.long_text += piece.text
        while len(self.long_text) > ROWS_WINDOW:
            self._window(False)
        if piece.last:
            self._end_long()

    def _end_long(self) -> None:
        while self.long_text:
            self._window(True)
        self._flush_carry()
        self.long_number = None

    def _window(self, final: bool) -> None:
        """Reads the start of the long line: result rows in bulk, anything else as a line of its own, cut where
        the classifier would cut it anyway (where something perftest prints, or a message, begins or ends) and
        never inside a message, so that nothing is lost at a cut."""
        text, number = self.long_text, self.long_number or 0      # (set while a long line is read)
        head = text[:ROWS_WINDOW]
        encoded = head.encode("utf-8", "surrogatepass")
        rows = _row_text_prefix(encoded)                              # ASCII: as many characters as bytes
        if rows < len(head) or not (final and len(text) == len(head)):
            rows = max(head.rfind(" ", 0, rows), head.rfind("\t", 0, rows)) + 1     # not inside a number
        if rows:
            self._rows(number, encoded[:rows].split())
            self.long_text = text[rows:]
            return
        self._flush_carry()
        head = text[:WINDOW + OVERLAP]
        limit = len(head) if final and len(text) <= WINDOW + OVERLAP else WINDOW
        table_ends = [m.end() for m in RESULT_HEADER_RE.finditer(head)]
        if table_ends and table_ends[0] <= limit:
            head = head[:table_ends[0]]      # what follows a table's titles is its rows: read them in bulk
            limit = len(head)
        matches = self.classifier.catalog.find(head)
        spans = [(m.start, m.end) for m in matches]
        cuts = set(anchor_starts(head))
        cuts.update(m.start for m in matches)
        cuts.update(m.end for m in matches)
        cuts.update(table_ends)
        fits = [c for c in cuts if 0 < c <= limit and not any(s < c < e for s, e in spans)]
        first_table = [c for c in table_ends if c in fits]
        if first_table:
            cut = min(first_table)         # the rows after a table's titles are read in bulk
        elif fits and not (limit == len(head) and limit == len(text)):
            cut = max(fits)
        elif limit == len(head) and (limit == len(text) or table_ends):
            cut = limit
        else:
            cut = max(head.rfind(" ", 0, limit), head.rfind("\t", 0, limit)) + 1 or limit
        self.long_text = text[cut:]
        if head[:cut].strip():
            self.line(number, head[:cut])

    def _rows(self, number: int, tokens: List[bytes]) -> None:
        """Numbers of a flattened result table, in rows of the table's width."""
        builder = self.builder
        if builder.current is None or builder.result_kind is None:
            if len(tokens) >= 3:
                self.active = "perftest"
            return
        self.active = "perftest"
        tokens = self.carry + tokens
        width = _WIDTH[builder.result_kind]
        whole = len(tokens) // width * width
        self.carry = tokens[whole:]
        if whole:
            builder.token_rows(number, tokens[:whole], width)

    def _flush_carry(self) -> None:
        if self.carry:
            carry, self.carry = self.carry, []
            if len(carry) >= 3:
                self.builder.feed(self.long_number or 0, (Item("numbers", tuple(t.decode() for t in carry)),))

    def line(self, number: int, line: str, possible: Optional[Set[int]] = None) -> None:
        """`possible`: the patterns that can match in the line (prefilter.Prefilter.matches), when known."""
        if possible is not None and possible.isdisjoint(self.reads_more) and \
                self._repeat_left_out(number, line, possible):
            return
        items = self.classify(line, possible)
        self.text = line
        pre = self.pre
        if possible is None or pre is None or not pre.setting_ids.isdisjoint(possible):
            for setting, value, _ in producers.settings_in(line):
                self.settings[setting] = HeaderField(value, number)
        # a row of bare numbers while another program talks may be its table (an MPI benchmark's under mpirun)
        bare = not items or (self.builder.current is None and all(i.kind == "numbers" for i in items))
        if bare and (possible is None or pre is None or not pre.row_ids.isdisjoint(possible)):
            row = rows.result_row(line)
            if row is not None and (row.pattern.id not in rows.INSIDE_A_RUN
                                    or row.pattern.producer in self.others.current):
                # a fabtests or MPI benchmark result row: it has no word the catalogue keys on
                self._route(number, row)
                return
        # two bare integers (a cut result row) do not show that perftest is the program talking
        structural = [i for i in items if i.kind not in ("text", "message", "cut_row")]
        if structural:
            self.active = "perftest"       # perftest's header, table, command ... : perftest is talking
        elif (possible is None or pre is None or not pre.tool_ids.isdisjoint(possible)) and _may_name_a_tool(line):
            command = producers.parse_command(line)
            if command is not None:
                self.others.command(number, command)
                self.active = command[1].producer
        perftest_items = [i for i in items if i.kind != "message" or not self._route(number, i.data)]
        if perftest_items:
            self.builder.feed(number, perftest_items)

    def _repeat_left_out(self, number: int, line: str, possible: Set[int]) -> bool:
        """A line that is one message of another producer (and plain text) that its run leaves out (a full run that
        keeps its kind already, or a run that can no longer be kept): what line() and _route would do with it, done
        without the message (or its match) being made. A long job's log is mostly such lines: every rank prints the
        same INFO lines, every queue pair the same flush error. False, with nothing done, when line() must read it."""
        found = self.classifier.repeated_message(line, possible, self._may_leave_out)
        if found is None:
            return False
        pattern, codes = found
        library = pattern.producer in _LIBRARIES
        if not self.others.repeat_left_out(number, pattern, kind_key(pattern.kind, pattern.id, codes), joins=library):
            return False
        if not library:
            self.active = pattern.producer
        self.text = line
        return True

    def _may_leave_out(self, pattern: catalog.Pattern) -> bool:
        """Whether the run a message of `pattern` joins (as _route decides) may leave it out, whatever its fields: the
        cheap part of _repeat_left_out, asked before the line is checked against its shape's plan."""
        producer = pattern.producer
        if producer == "perftest":
            return False        # (perftest's catalogue: its words may be another program's here, _route)
        library = producer in _LIBRARIES
        if library and self._perftest_takes(producer):
            return False
        return self.others.may_leave_out(producer, joins=library)

    def _perftest_takes(self, producer: str) -> bool:
        """A library's message (or one of perftest's catalogue) stays with perftest's run while perftest is talking:
        its own, or any library's once perftest's run is open."""
        return self.active == "perftest" and (producer == "perftest" or self.builder.current is not None)

    def _route(self, number: int, match) -> bool:
        """Hand a message to another producer's run; False when it stays with perftest's.

        A producer's own message goes to its run. perftest's catalogue (which also holds the lines of
        libibverbs, librdmacm and the tools that print perftest's sentences) belongs to perftest while perftest
        is talking, else it joins the open run; a library's or the kernel's message joins the open run."""
        producer = match.pattern.producer
        if producer == "perftest" and self.active != "perftest" and match.pattern.kind != "notice":
            # an error or warning perftest shares with rdma-core (or the open program's catalogue), printed inside
            # another program's run, is that program's or its libraries' message; a device listing's lines keep
            # perftest's id (V10)
            shared = shared_words.equivalent(match, self.active, self.text)
            if shared is not None:
                match, producer = shared, shared.pattern.producer
        env, value = match.fields.get("env"), match.fields.get("value")
        if env and value is not None:
            self.settings.setdefault(env, HeaderField(value, number))
        library = producer in _LIBRARIES or producer == "perftest"
        if library and self._perftest_takes(producer):
            return False
        if library:
            run = self.others.message(number, producer if producer != "perftest" else "verbs", match, joins=True)
        else:
            run = self.others.message(number, producer, match)
            self.active = producer
        if run is not None:
            pattern = match.pattern
            message = Message(id=pattern.id, kind=pattern.kind, text=match.text.strip(), line=number,
                              source=self.name, fields=dict(match.fields))
            message.fields.setdefault("phase", pattern.phase)
            if pattern.origin:
                message.fields.setdefault("origin", pattern.origin)
            run.messages.append(message)
        return True


def _row_text_prefix(data: bytes) -> int:
    """How many of the first bytes are the numbers of a flattened result table (_ROW_TEXT). A window of a flattened
    table is nothing else, and deleting those bytes is one pass a fifth as long as a scan for the first other byte."""
    if not data.translate(None, _ROW_TEXT):
        return len(data)
    return len(data) - len(data.lstrip(_ROW_TEXT))


def _lone_header_field(run: Run) -> bool:
    """One "Device : x"-like field and nothing else of perftest's output: another program's line that happens to
    look like a header field (a device plugin's JSON, a listing), not a perftest run."""
    return (len(run.header) < 2 and not (run.command or run.test_name or run.banner_line or run.messages
                                         or run.results or run.addresses or run.result_header_line))


def _may_name_a_tool(line: str) -> bool:
    return not producers.TOOL_WORDS.isdisjoint(catalog.line_words(line))


def parse_paths(paths: Iterable[str], listing: Optional[BinaryIO] = None) -> ParsedLog:
    """Files by path ('-' is standard input), then the files `listing` names, one a line (a seekable file: it is read
    twice, so that the names of a million files are never all held). Unreadable paths raise InputError before any
    parsing; then the files are opened one at a time (thousands of them never hold thousands of descriptors)."""
    paths = list(paths)

    def every() -> Iterator[str]:
        yield from paths
        if listing is not None:
            yield from _listed(listing)

    total = _total_size(every())
    return parse_streams(_opened(every()), size_hint=total)


def _total_size(paths: Iterable[str]) -> Optional[int]:
    """The inputs' total size (None when standard input is one); InputError for the first that cannot be read."""
    total: Optional[int] = 0
    for path in paths:
        if path == "-":
            total = None          # standard input: its size is not known
            continue
        size = _input_size(path)
        total = None if total is None or size is None else total + size
    return total


def _input_size(path: str) -> Optional[int]:
    """A file's size; None for a pipe or a terminal, read to its end as standard input is, and for a compressed file.
    InputError for a path that cannot be read, or is no log: a directory, a device that never ends (/dev/zero) or
    holds no text (a disk), a compressed file of a format that cannot be read here.

    A named pipe is not opened here: opening it would take its writer, and closing it again would make the writer's
    next write fail (SIGPIPE) with the log lost, then wait for another writer for ever."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a directory, not a log file")
    if stat.S_ISFIFO(mode):
        if not os.access(path, os.R_OK):
            raise InputError(f"{path}: {os.strerror(errno.EACCES)}")
        return None
    if not stat.S_ISREG(mode) and not (stat.S_ISCHR(mode) and _is_terminal(st.st_rdev)):
        kind = "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise InputError(f"{path}: is {kind}, not a log file (a log is read from a file, a pipe or standard input)")
    try:
        with open(path, "rb") as f:
            if stat.S_ISCHR(mode):
                return None
            head = f.read(compressed.HEAD)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    why = compressed.refusal(path, head)
    if why is not None:
        raise InputError(f"{path}: {why}")
    return None if compressed.kind_of(head) else st.st_size      # (compressed: its size read is not known)


# The character devices that are terminals (the kernel's Documentation/admin-guide/devices.txt): major 3 the BSD
# pseudo-terminals' slaves, 4 the virtual consoles and serial ports, 136-143 the UNIX98 pseudo-terminals' slaves, and
# of major 5 /dev/tty and /dev/console (not /dev/ptmx, whose every open makes a new pseudo-terminal).
_TERMINAL_MAJORS = frozenset({3, 4, *range(136, 144)})
_TERMINAL_DEVICES = frozenset({(5, 0), (5, 1)})


def _is_terminal(rdev: int) -> bool:
    """Whether a character device is a terminal (where a user types or pastes the log), told by its number: opening
    a device to ask may set it going (a watchdog's open does)."""
    return os.major(rdev) in _TERMINAL_MAJORS or (os.major(rdev), os.minor(rdev)) in _TERMINAL_DEVICES


def _opened(paths: Iterable[str]) -> Iterator[Tuple[str, BinaryIO]]:
    """Each input open while it is read, and closed before the next is opened."""
    for path in paths:
        if path == "-":
            yield "<stdin>", sys.stdin.buffer
            continue
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or exc}") from None
        with f:
            yield path, f


PATH_MAX = 4096         # Linux's limit on a path, in bytes with its NUL


def _listed(listing: BinaryIO) -> Iterator[str]:
    """The paths a list of files names: one a line (a CR before the newline and blank lines ignored), in the file
    system's encoding (a name that is not UTF-8 comes back as the same bytes)."""
    listing.seek(0)
    number = 0
    while True:
        raw = listing.readline(PATH_MAX + 2)        # a line no path can be is not read whole
        if not raw:
            return
        number += 1
        if len(raw) > PATH_MAX + 1 or (len(raw) == PATH_MAX + 1 and not raw.endswith(b"\n")):
            raise InputError(f"line {number} of the list of files is longer than a path can be ({PATH_MAX} bytes): "
                             "not a list of file names")
        name = raw.rstrip(b"\r\n")
        if not name.strip():
            continue
        if b"\0" in name:
            raise InputError(f"line {number} of the list of files holds a NUL byte: the list gives one name a line "
                             "(find -print, not -print0)")
        if name == b"-":
            raise InputError(f"line {number} of the list of files names '-': standard input is given on the "
                             "command line, not in a list")
        yield os.fsdecode(name)


def parse_text(text: str, name: str = "<text>") -> ParsedLog:
    return parse_streams([(name, io.BytesIO(text.encode("utf-8", "surrogateescape")))])


def _side_from_name(name: str, runs: List[Run]) -> None:
    """A file called server.log holds the server's side, when nothing inside says otherwise."""
    base = Path(name).name
    hits = [side for side, rx in _NAME_SIDE if rx.search(base)]
    if len(hits) != 1:
        return
    for run in runs:
        if run.side == "unknown":
            run.side, run.side_reason = hits[0], f"file name '{base}'"


def _fold_version_queries(runs: List[Run]) -> List[Run]:
    """`ib_write_bw -V` prints only "Version: 6.24": not a run of its own, but the version of the
    perftest the other runs of this paste used."""
    queries = [r for r in runs if r.command is not None and r.command.options.get("version")]
    if not queries or len(queries) == len(runs):
        return runs
    versions = [m for q in queries for m in q.messages if m.id == "N02"]
    rest = [r for r in runs if r not in queries]
    for run in rest:
        run.messages = versions + run.messages
    return rest


def _command_only(run: Run) -> bool:
    return run.command is not None and not (run.messages or run.header or run.test_name or run.results
                                            or run.addresses or run.banner_line)


def _attach_commands(runs: List[Run]) -> List[Run]:
    """A paste of the two command lines plus a side's output without its command line: one run.

    Only when it is unambiguous: exactly one command-only run and one command-less run of that side.
    """
    for side in ("server", "client"):
        lonely = [r for r in runs if r.side == side and _command_only(r)]
        bare = [r for r in runs if r.side == side and r.command is None]
        if len(lonely) == 1 and len(bare) == 1:
            bare[0].command = lonely[0].command
            bare[0].tool = bare[0].tool or lonely[0].tool
            bare[0].side_reason = f"{bare[0].side_reason}; command line from {lonely[0].source}"
            runs = [r for r in runs if r is not lonely[0]]
    return runs


def _complete_sides(runs: List[Run]) -> None:
    """Two runs, one side known: the other is the other side (the usual two-log paste)."""
    if len(runs) != 2:
        return
    known = [r for r in runs if r.side != "unknown"]
    if len(known) == 1:
        other = runs[0] if runs[1] is known[0] else runs[1]
        other.side = "client" if known[0].side == "server" else "server"
        other.side_reason = f"the other run in this input is the {known[0].side}"
