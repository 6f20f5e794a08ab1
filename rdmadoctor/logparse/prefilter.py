"""Which lines of a block can matter, found for the whole block at once by one compiled pattern set.

A line matters when something the parser reads can match in it: a message of any catalogue
(knowledge/messages/*.toml and perftest's strings), a piece of perftest's structure (header fields, addresses,
GIDs, result tables, banners, test names, command lines, side labels) or another producer's command line or
setting (`VAR=value`, `--mca`). Result rows, perftest's and other producers' (fabtests, IMB, OSU), need no
pattern here: the lines between named ones are read in bulk, or searched for rows (logparse.streams._Source._gap).

With the optional `hyperscan` package the patterns are compiled into one database (patterns it cannot take
exactly are approximated from above, HS_FLAG_PREFILTER, so a line is never missed) that scans a block at
hundreds of MB/s and reports, for each line that can matter, which patterns can match in it: the classifier then
tries only those of the catalogue's patterns (logparse/catalog.py), and the settings and command-line readers run
only where theirs can. The database is built from the patterns themselves when the parser loads (a new catalogue
entry is found as soon as it is written) and kept compiled in the user's cache directory, keyed by a hash of the
patterns as hyperscan takes them and the hyperscan version. Without hyperscan, or when the database cannot be had,
load() gives None and every line is read (the same result, slower).
"""
from __future__ import annotations

import hashlib
import os
import sys
import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

from rdmadoctor.runtime import cache

# Other modules of logparse that read lines the patterns above do not cover register their own patterns here
# (as Python regular expressions, searched case-insensitively) before the first scan.
_EXTRA: List[str] = []
COMPILE_ABOVE = 32 << 20      # input bytes from which compiling a missing database pays for itself
USE_ABOVE = 256 << 10         # and from which loading a compiled one does


def register(pattern: str) -> None:
    """A pattern whose lines must reach the parser (a new reader of pasted tool output adds its own)."""
    if pattern not in _EXTRA:
        _EXTRA.append(pattern)
        _LOADED.clear()


def patterns() -> List[str]:
    """Every pattern a line that matters matches, as Python regular expressions (case-insensitive)."""
    return [source for source, _ in _sources()]


def _sources() -> List[Tuple[str, Optional[str]]]:
    """(pattern, a literal every line it matches holds, or None): the literal stands in for a pattern hyperscan
    cannot take (a catalogue pattern only ever meets the lines that hold its keyword: catalog.Catalog.candidates)."""
    from rdmadoctor.logparse import catalog, lines, producers
    out: List[Tuple[str, Optional[str]]] = [(p.source, p.keyword or None) for p in catalog.load().patterns]
    out += [(s, None) for s in (lines.ANCHOR_RE.pattern, lines.HEADER_RE.pattern, lines.BANNER_RE.pattern,
                                lines.ADDRESS_RE.pattern, lines.GID_RE.pattern, lines.RESULT_HEADER_RE.pattern,
                                lines.SIDE_WORDS_RE, producers._TOOL_RE.pattern, producers._SETTING_RE.pattern,
                                producers._MCA_RE.pattern)]
    return out + [(s, None) for s in _EXTRA]


_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|.)", re.S)
# A blank within one line: hyperscan scans a whole block, where \s and a negated class would also match a newline and
# carry a match (and the automaton's work) from line to line. \h (a horizontal blank) is what the reader's blocks
# hold between words (logparse/reader.py turns control characters and Unicode blanks into spaces, CR into a line
# end); an explicit class such as [\t ] lost matches in hyperscan ("UD endpoint 0x2 to <no debug data>: unhandled
# timeout error" went unseen), which tests/test_logparse.py's fixture comparison catches
_BLANK, _BLANKS_IN_CLASS = r"\h", r"\h"


def for_hyperscan(source: str) -> str:
    """A Python pattern as hyperscan takes it, for lines of a block: `$`, `\\Z` and `\\z` dropped (hyperscan takes no
    anchor inside a pattern; without them a pattern matches more, never less; inside a character class `$` is a plain
    dollar and stays); Python's `\\uXXXX` escapes written as the characters themselves (PCRE has no `\\u`); blanks and
    negated classes kept from matching a newline (a line's own matches are the same)."""
    out: List[str] = []
    i, in_class, negated = 0, False, False
    while i < len(source):
        c = source[i]
        if c == "\\":
            text, i = _escape(source, i, in_class, negated)
            out.append(text)
        elif in_class:
            if c == "]":
                in_class = negated = False
            out.append(c)
            i += 1
        elif c == "[":
            text, i, negated = _class_start(source, i)
            in_class = True
            out.append(text)
        else:
            out.append("" if c in "$^" else c)
            i += 1
    return "".join(out)


def _escape(source: str, i: int, in_class: bool, negated: bool) -> Tuple[str, int]:
    """The escape at source[i] as hyperscan takes it, and where the source goes on."""
    m = _ESCAPE.match(source, i)
    if m is None:
        return source[i:i + 2], i + 2
    code = m.group(1) or m.group(2)
    if code:
        return re.escape(chr(int(code, 16))), m.end()
    letter = source[i + 1:i + 2]
    if letter == "s" and not negated:
        return (_BLANKS_IN_CLASS if in_class else _BLANK), m.end()
    if letter in ("Z", "z") and not in_class:
        return "", m.end()
    return source[i:i + 2], m.end()


def _class_start(source: str, i: int) -> Tuple[str, int, bool]:
    """A character class's opening at source[i] (`[`, `[^`, and a `]` first in it, which is a plain one); a negated
    class is kept from matching a newline."""
    text, i = "[", i + 1
    negated = source[i:i + 1] == "^"
    if negated:
        text, i = text + "^", i + 1
    if source[i:i + 1] == "]":
        text, i = text + "]", i + 1
    return text + ("\\n" if negated else ""), i, negated


class Prefilter:
    """`matches(data)`: for every line of `data` that can matter, the offset just past its newline and which patterns
    can match in it (indexes into patterns(): the catalogue's patterns first, in the catalogue's order)."""

    def __init__(self, hs, database, rows_database, sources: List[str]):
        self._hs = hs
        self._db = database
        self._scratch = hs.Scratch(database)
        self.sources = sources
        # other producers' result rows, in a database of their own (rows_database()), scanned only over the lines the
        # main database does not name; None: every line there is a candidate
        self._rows_db = rows_database
        self._rows_scratch = hs.Scratch(rows_database) if rows_database is not None else None
        from rdmadoctor.logparse import producers
        # a line where none of these can match shows no setting, and no other producer's command line
        self.setting_ids = frozenset(i for i, s in enumerate(sources)
                                     if s in (producers._SETTING_RE.pattern, producers._MCA_RE.pattern))
        self.tool_ids = frozenset(i for i, s in enumerate(sources) if s == producers._TOOL_RE.pattern)
        # the catalogue's indexes of other producers' row patterns (not in the database: see row_lines)
        row_sources = set(_row_sources())
        self.row_ids = frozenset(i for i, s in enumerate(sources) if s in row_sources)

    def row_lines(self, data: bytes) -> Optional[List[int]]:
        """The ends (offsets just past the newline) of the lines of `data` where another producer's result row can
        be, in order, lines beyond ASCII included; None when every line can."""
        if self._rows_db is None:
            return None
        found: List[int] = []
        add = found.append
        self._rows_db.scan(data, match_event_handler=lambda _p, _start, end, _flags, _ctx: add(end),
                           scratch=self._rows_scratch)
        found.extend(_non_ascii_lines(data))
        return sorted(set(found))

    def matches(self, data: bytes) -> List[Tuple[int, Set[int]]]:
        """(end of line, patterns) for each line that can matter, in the order of the lines; a line with a character
        beyond ASCII holds ANY among them (every pattern can match in it)."""
        lines: Dict[int, Set[int]] = {}
        get = lines.get

        def found(pattern: int, _start: int, end: int, _flags: int, _context: object) -> None:
            ids = get(end)
            if ids is None:
                lines[end] = {pattern}
            else:
                ids.add(pattern)

        self._db.scan(data, match_event_handler=found, scratch=self._scratch)
        # the database reads bytes, not UTF-8 characters (a third of the size and three times faster to build), so
        # it decides only ASCII lines, where bytes and characters are the same
        for end in _non_ascii_lines(data):
            lines.setdefault(end, set()).add(ANY)
        return sorted(lines.items())


ANY = -1
_NON_ASCII = re.compile(rb"[\x80-\xff]")


def _non_ascii_lines(data: bytes) -> List[int]:
    """The ends (offsets just past the newline) of the lines of `data` with a byte beyond ASCII."""
    if data.isascii():
        return []
    ends: List[int] = []
    search, pos = _NON_ASCII.search, 0
    while True:
        m = search(data, pos)
        if m is None:
            return ends
        end = data.find(b"\n", m.end())
        pos = len(data) if end < 0 else end + 1
        ends.append(pos)


def _row_sources() -> List[str]:
    from rdmadoctor.logparse import rows
    return [p.source for p in rows._patterns()]


_LOADED: dict = {}
# Unicode character classes (HS_FLAG_UCP) would make the database ten times larger and slower to build: the
# reader turns the Unicode blanks Python's \s knows into plain ones instead (reader._CLEAN). Without HS_FLAG_UTF8
# the database reads bytes, and Prefilter.matches names every line with a character beyond ASCII for every pattern.
_FLAGS = ("HS_FLAG_CASELESS", "HS_FLAG_PREFILTER", "HS_FLAG_MULTILINE", "HS_FLAG_ALLOWEMPTY")


def load(input_bytes: Optional[int] = 0) -> Optional[Prefilter]:
    """The prefilter, or None: no hyperscan; an input smaller than USE_ABOVE (`input_bytes`; None: not known, as for
    standard input), where loading the database costs more than it saves; no cached database and an input too small
    to pay for compiling one. RDMADOCTOR_PREFILTER=off reads every line; =on uses the database, compiled if need be,
    whatever the input's size."""
    setting = os.environ.get("RDMADOCTOR_PREFILTER", "")
    if setting == "off" or (setting != "on" and input_bytes is not None and input_bytes < USE_ABOVE):
        return None
    try:
        import hyperscan as hs
    except ImportError:
        return None
    if "db" in _LOADED:
        return _LOADED["db"]
    sources = _sources()
    # keyed by the patterns and by this module (which writes them as hyperscan takes them)
    digest = hashlib.sha256("\0".join([getattr(hs, "__version__", "?"), sys.version, str(_FLAGS),
                                       *(f"{s}\1{k}" for s, k in sources)]).encode())
    digest.update(Path(__file__).read_bytes())
    from rdmadoctor.logparse import catalog
    for path in catalog.catalogue_files():          # (their examples: the patterns' check, _missing_examples)
        digest.update(path.read_bytes())
    path = cache.cache_dir() / f"prefilter-{digest.hexdigest()[:24]}.hsdb"
    database = rows = None
    try:
        # the main database's size (8 bytes), the main database, the rows database (nothing when it has none)
        blob = path.read_bytes()
        size = int.from_bytes(blob[:8], "little")
        database = hs.loadb(blob[8:8 + size], hs.HS_MODE_BLOCK)
        rows = hs.loadb(blob[8 + size:], hs.HS_MODE_BLOCK) if len(blob) > 8 + size else None
    except (OSError, Exception):    # noqa: BLE001 - missing, truncated, another CPU's: compile it again
        database = None
    if database is None:
        if (input_bytes or 0) < COMPILE_ABOVE and setting != "on":
            return None
        database = _compile(hs, sources)
        if database is None:
            _LOADED["db"] = None
            return None
        rows = rows_database(hs)
        main = hs.dumpb(database)
        _save(path, len(main).to_bytes(8, "little") + main + (hs.dumpb(rows) if rows is not None else b""))
    _LOADED["db"] = Prefilter(hs, database, rows, [s for s, _ in sources])
    return _LOADED["db"]


def flags(hs) -> int:
    """_FLAGS as hyperscan takes them."""
    return sum(getattr(hs, name) for name in _FLAGS)


def rows_database(hs):
    """Other producers' result rows (two patterns), or None when hyperscan takes neither."""
    return _database(hs, [_expression(s) for s in _row_sources()], flags(hs))


def _expression(source: str) -> bytes:
    return b"(?:" + for_hyperscan(source).encode("utf-8") + b")[^\\n]*\\n"


def _compiled_ids(sources: List[Tuple[str, Optional[str]]]) -> List[int]:
    """The patterns the database holds: all but other producers' result rows (rows.ROW_IDS). A row has no word to
    key on, and perftest's own rows have their shape: named by the database, each row of a soak log would reach
    Python, where the gaps between named lines are read in bulk and search each row-like line for them
    (logparse.streams._Source._gap)."""
    row_sources = set(_row_sources())
    return [i for i, (source, _) in enumerate(sources) if source not in row_sources]


def _compile(hs, sources: List[Tuple[str, Optional[str]]]):
    """One database of the patterns (_compiled_ids). A pattern hyperscan cannot take, even approximated, or whose
    compiled form misses a line of its own catalogue examples (alone, or inside a block of them), is replaced by its
    literal (a line that holds it reaches the parser), or without one by every line; None when not even that
    compiles."""
    ids = _compiled_ids(sources)
    expressions = [_expression(sources[i][0]) for i in ids]
    hs_flags = flags(hs)
    database = _database(hs, expressions, hs_flags, ids)
    if database is None:
        for j in _rejected(hs, expressions, hs_flags):
            expressions[j] = _stand_in(sources[ids[j]][1])
        database = _database(hs, expressions, hs_flags, ids)
        if database is None:
            return None
    # a stand-in is checked as the pattern was (a literal may be lost too); one that is gets every line
    for literal in (lambda i: sources[i][1], lambda i: None):
        missing = _missing_examples(hs, database, sources, ids)
        if not missing:
            return database
        for j in missing:
            expressions[j] = _stand_in(literal(ids[j]))
        database = _database(hs, expressions, hs_flags, ids)
        if database is None:
            return None
    return database


def _stand_in(literal: Optional[str]) -> bytes:
    """What hyperscan takes for a pattern it cannot be trusted with: the lines that hold its literal, or every line."""
    return (re.escape(literal).encode("utf-8") if literal else b"[^\\n]") + b"[^\\n]*\\n"


def _missing_examples(hs, database, sources: List[Tuple[str, Optional[str]]], ids: List[int]) -> List[int]:
    """The places in `ids` of the patterns the database does not name on a line of their own examples that they match,
    each example scanned alone and again within one block of them all. hyperscan loses some matches:
    "connect returned Connection refused, retrying" is not found by `returned\\h*.+,\\h*retrying` with one blank
    before the last word, and is with two; and some only past a block's first bytes, where it reads with other
    engines than for a short block: beside `#\\h*Out of bounds values`, `#\\h*OSU[^\\n]*\\n` names "# OSU MPI Latency
    Test" at the start of a block and never about 25 bytes or more into one (hyperscan 0.9.1's wheel)."""
    from rdmadoctor.logparse import catalog
    examples = catalog.examples_by_source()
    scratch = hs.Scratch(database)
    missing: Set[int] = set()
    in_block: List[Tuple[int, bytes]] = []          # (place in ids, example) for the block
    for j, i in enumerate(ids):
        source = sources[i][0]
        lines = [line for line in examples.get(source, ()) if line.isascii() and "\n" not in line]
        if not lines:
            continue
        regex = re.compile(source, re.IGNORECASE)
        for line in lines:
            if not regex.search(line):
                continue
            in_block.append((j, line.encode()))
            if i not in _named(hs, database, scratch, line.encode() + b"\n").get(len(line) + 1, ()):
                missing.add(j)
    # the examples in several orders, each after other lines than in the others
    in_block = in_block + in_block[::-1] + in_block[1::2] + in_block[::2]
    block, ends = bytearray(_BLOCK_PAD), []
    for _j, example in in_block:
        block += example + b"\n"
        ends.append(len(block))
    named = _named(hs, database, scratch, bytes(block))
    missing.update(j for (j, _line), end in zip(in_block, ends) if ids[j] not in named.get(end, ()))
    return sorted(missing)


# what comes before the examples in their block: blank lines, long enough to take every example past a block's start
_BLOCK_PAD = b"\n" * 256


def _named(hs, database, scratch, data: bytes) -> Dict[int, Set[int]]:
    """The patterns the database names in `data`, by the end of the line (just past its newline)."""
    named: Dict[int, Set[int]] = {}
    database.scan(data, match_event_handler=lambda p, _s, end, _f, _c: named.setdefault(end, set()).add(p),
                  scratch=scratch)
    return named


def _database(hs, expressions: List[bytes], flags: int, ids: Optional[List[int]] = None):
    """Each expression reports its id, by default its index (at most once for a line: each ends at the line's
    newline)."""
    database = hs.Database(mode=hs.HS_MODE_BLOCK)
    try:
        database.compile(expressions=expressions, ids=ids if ids is not None else list(range(len(expressions))),
                         flags=[flags] * len(expressions))
        return database
    except Exception:       # noqa: BLE001 - hyperscan.error, or a resource limit
        return None


def _rejected(hs, expressions: List[bytes], flags: int, offset: int = 0) -> List[int]:
    """The indexes of the expressions hyperscan rejects (its error does not say which): halves, recursively."""
    if not expressions or _database(hs, expressions, flags) is not None:
        return []
    if len(expressions) == 1:
        return [offset]
    half = len(expressions) // 2
    return _rejected(hs, expressions[:half], flags, offset) + _rejected(hs, expressions[half:], flags, offset + half)


def _save(path: Path, blob: bytes) -> None:
    """Written to a temporary file and renamed: a reader never sees half a database."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prefilter-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        cache.prune(path.parent, "prefilter-*.hsdb", keep=4)       # a few MB each
    except OSError:
        pass


def warm(report: Callable[[str], None] = lambda _m: None) -> bool:
    """Compile and cache the database now (`rdmadoctor explain` does it on its own for a large input)."""
    global COMPILE_ABOVE
    saved, COMPILE_ABOVE = COMPILE_ABOVE, 0
    try:
        return load(None) is not None
    finally:
        COMPILE_ABOVE = saved
