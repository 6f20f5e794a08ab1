"""Which lines of a block can matter, found for the whole block at once by one compiled pattern set.

A line matters when something the parser reads can match in it: a message of any catalogue
(knowledge/messages/*.toml and perftest's strings), a piece of perftest's structure (header fields, addresses,
GIDs, result tables, banners, test names, command lines, side labels) or another producer's command line or
setting (`VAR=value`, `--mca`). Result rows are read in bulk by the run builder and need no pattern here.

With the optional `hyperscan` package the patterns are compiled into one database (patterns it cannot take
exactly are approximated from above, HS_FLAG_PREFILTER, so a line is never missed) that scans a block at
hundreds of MB/s and reports each line that holds a match once. The database is built from the patterns
themselves when the parser loads (a new catalogue entry is found as soon as it is written) and kept compiled
in the user's cache directory, keyed by a hash of the patterns and the hyperscan version. Without hyperscan,
or when the database cannot be had, `Prefilter.available` is False and every line is read (the same result,
slower).
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, List, Optional

# Other modules of logparse that read lines the patterns above do not cover register their own patterns here
# (as Python regular expressions, searched case-insensitively) before the first scan.
_EXTRA: List[str] = []
COMPILE_ABOVE = 32 << 20      # input bytes from which compiling a missing database pays for itself


def register(pattern: str) -> None:
    """A pattern whose lines must reach the parser (a new reader of pasted tool output adds its own)."""
    if pattern not in _EXTRA:
        _EXTRA.append(pattern)
        _LOADED.clear()


def patterns() -> List[str]:
    """Every pattern a line that matters matches, as Python regular expressions (case-insensitive)."""
    from rdmadoctor.logparse import catalog, lines, producers, rows
    out = [p.source for p in catalog.load().patterns]
    out += [p.source for p in rows._patterns()] + [rows._SHAPE.pattern]     # result rows of other producers
    out += [lines.ANCHOR_RE.pattern, lines.HEADER_RE.pattern, lines.BANNER_RE.pattern, lines.ADDRESS_RE.pattern,
            lines.GID_RE.pattern, lines.RESULT_HEADER_RE.pattern, lines.SIDE_WORDS_RE,
            producers._TOOL_RE.pattern, producers._SETTING_RE.pattern, producers._MCA_RE.pattern]
    return out + _EXTRA


def _without_end_anchors(source: str) -> str:
    """`$`, `\\Z` and `\\z` dropped (hyperscan takes no anchor inside a pattern; without them a pattern matches
    more, never less). Inside a character class `$` is a plain dollar and stays."""
    out, i, in_class = [], 0, False
    while i < len(source):
        c = source[i]
        if c == "\\":
            if not in_class and source[i + 1:i + 2] in ("Z", "z"):
                i += 2
                continue
            out.append(source[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            out.append(c)
            i += 1
            if source[i:i + 1] == "^":
                out.append("^")
                i += 1
            if source[i:i + 1] == "]":
                out.append("]")
                i += 1
            continue
        elif c == "$":
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rdmadoctor"


class Prefilter:
    """`line_ends(data)`: the offset just past the newline of every line of `data` that can matter."""

    def __init__(self, hs, database, sources: List[str]):
        self._hs = hs
        self._db = database
        self._scratch = hs.Scratch(database)
        self.sources = sources

    def line_ends(self, data: bytes) -> List[int]:
        ends: List[int] = []
        add = ends.append
        self._db.scan(data, match_event_handler=lambda _id, _start, end, _flags, _ctx: add(end),
                      scratch=self._scratch)
        return ends


_LOADED: dict = {}
# Unicode character classes (HS_FLAG_UCP) would make the database ten times larger and slower to build: the
# reader turns the Unicode blanks Python's \s knows into plain ones instead (reader._CLEAN).
_FLAGS = ("HS_FLAG_CASELESS", "HS_FLAG_PREFILTER", "HS_FLAG_MULTILINE", "HS_FLAG_ALLOWEMPTY", "HS_FLAG_UTF8")


def load(input_bytes: int = 0) -> Optional[Prefilter]:
    """The prefilter, or None (no hyperscan; no cached database and an input too small to pay for compiling one).
    RDMADOCTOR_PREFILTER=off reads every line; =on compiles the database whatever the input's size."""
    if os.environ.get("RDMADOCTOR_PREFILTER", "") == "off":
        return None
    try:
        import hyperscan as hs
    except ImportError:
        return None
    if "db" in _LOADED:
        return _LOADED["db"]
    sources = patterns()
    digest = hashlib.sha256("\0".join([getattr(hs, "__version__", "?"), sys.version, str(_FLAGS), *sources]).encode())
    path = _cache_dir() / f"prefilter-{digest.hexdigest()[:24]}.hsdb"
    database = None
    try:
        database = hs.loadb(path.read_bytes(), hs.HS_MODE_BLOCK)
    except (OSError, Exception):    # noqa: BLE001 - missing, truncated, another CPU's: compile it again
        database = None
    if database is None:
        if input_bytes < COMPILE_ABOVE and os.environ.get("RDMADOCTOR_PREFILTER", "") != "on":
            return None
        database = _compile(hs, sources)
        if database is None:
            _LOADED["db"] = None
            return None
        _save(path, hs.dumpb(database))
    _LOADED["db"] = Prefilter(hs, database, sources)
    return _LOADED["db"]


def _compile(hs, sources: List[str]):
    """One database; every pattern reports id 0, so hyperscan reports a line once however many patterns match."""
    expressions = [b"(?:" + _without_end_anchors(s).encode("utf-8") + b")[^\\n]*\\n" for s in sources]
    flags = sum(getattr(hs, name) for name in _FLAGS)
    database = hs.Database(mode=hs.HS_MODE_BLOCK)
    try:
        database.compile(expressions=expressions, ids=[0] * len(expressions), flags=[flags] * len(expressions))
        return database
    except Exception:       # noqa: BLE001 - one pattern it cannot take: without the prefilter, every line is read
        return None


def _save(path: Path, blob: bytes) -> None:
    """Written to a temporary file and renamed: a reader never sees half a database."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prefilter-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError:
        pass


def warm(report: Callable[[str], None] = lambda _m: None) -> bool:
    """Compile and cache the database now (`rdmadoctor explain` does it on its own for a large input)."""
    global COMPILE_ABOVE
    saved, COMPILE_ABOVE = COMPILE_ABOVE, 0
    try:
        return load() is not None
    finally:
        COMPILE_ABOVE = saved
