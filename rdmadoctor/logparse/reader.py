"""Bytes in, clean numbered lines out: streamed, so a huge log costs time, not memory.

Whatever was pasted (CRLF, lone CRs, ANSI colour, NULs and other binary, invalid UTF-8, smart quotes,
lines of megabytes) becomes printable text with the line numbers an editor would show.

The reader hands out blocks of whole lines as cleaned UTF-8 bytes (the scanner searches bytes, and decodes only
the lines that can matter); a line longer than MAX_LINE comes as pieces of one line number, for the scanner to
read in windows.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from itertools import accumulate
from typing import BinaryIO, Iterator, List, NamedTuple, Optional, Tuple, Union

from rdmadoctor.logparse import decorations, wrapped
from rdmadoctor.model import KeptLines, SourceText

BLOCK = 1 << 20                 # bytes read at a time
MAX_LINE = 16384                # a longer line is read in windows (logparse.scan)
KEEP_LINES = 20000              # lines kept for evidence excerpts and the report's raw log
KEEP_CHARS = 4 << 20            # and at most this much text of one input (a paste of long lines)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_ANSI_BYTES = re.compile(_ANSI.pattern.encode())
# Control characters (but tab and newline) become blanks; typographic quotes and no-break spaces the plain
# ones perftest printed. One str.translate: C speed, where a regex substitution is 15x slower.
_CONTROLS = (*range(0, 9), *range(11, 32), 127)
# Unicode blanks become plain ones too, so that a blank is a blank to every pattern engine (logparse/prefilter.py).
_UNICODE_BLANKS = ("\x85", "\u1680", *map(chr, range(0x2000, 0x200b)), "\u2028", "\u2029", "\u202f", "\u205f", "\u3000")
# Characters that show nothing (zero-width spaces and joiners, direction marks, the byte-order mark, soft hyphens) are
# dropped: a chat, a web page or Notepad puts them into a paste, at a line's start or inside a word, where no pattern
# expects them.
_INVISIBLE = ("\u00ad", *map(chr, range(0x200b, 0x2010)), *map(chr, range(0x202a, 0x202f)),
              *map(chr, range(0x2060, 0x2065)), *map(chr, range(0x2066, 0x206a)), "\ufeff")
_CLEAN = str.maketrans({**{chr(c): " " for c in _CONTROLS}, **{c: " " for c in _UNICODE_BLANKS},
                        **{c: "" for c in _INVISIBLE},
                        "\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_CLEAN_BYTES = bytes(32 if c in _CONTROLS else c for c in range(256))
# What _CLEAN does to characters beyond ASCII, as replacements of their UTF-8 bytes (valid UTF-8 is cleaned without
# being decoded: a UTF-8 sequence never matches inside another character's)
_CLEAN_UTF8 = tuple((chr(c).encode(), r.encode()) for c, r in _CLEAN.items() if c > 127)
_ASCII = bytes(range(128))
# A log copied from an HTML page's source, or escaped by a tool that put it into HTML or XML, holds the entities of
# the characters programs print; they are read as those characters (`&nbsp;` as a plain blank, as _CLEAN does).
_ENTITIES = {b"lt": b"<", b"gt": b">", b"amp": b"&", b"quot": b'"', b"apos": b"'", b"nbsp": b" ", b"#39": b"'",
             b"#x27": b"'", b"#34": b'"', b"#x22": b'"', b"#60": b"<", b"#62": b">", b"#38": b"&", b"#160": b" ",
             b"#xa0": b" ", b"#xA0": b" "}
_ENTITY_BYTES = re.compile(rb"&(" + b"|".join(map(re.escape, _ENTITIES)) + rb");")
_UNDECIDED = re.compile(b"")        # an input whose decorations (logparse/decorations.py) are not looked for yet
# A line a chat or an issue wrapped in Markdown emphasis (`_..._`, `*...*`, `__...__`, `**...**`) or in inline code
# (a backtick at each end) loses its markers, which would otherwise end up in a message's last field ("Connection
# timed out_"). The marker must touch text on both sides, so perftest's boxes (`****`, ` * Waiting for client to
# connect... *`) and a code fence stay as printed. Markdown text is small (a GitHub comment holds 65,536
# characters), so only the lines that end within an input's first BLOCK bytes are looked at: the search for line ends
# costs a job log's later blocks nothing.
_EMPHASIS_BYTES = re.compile(rb"(?m)^([ \t]*)(\*\*|\*|__|_|`)(?=[^\s*_`])([^\n]*?[^\s*_`])\2[ \t]*$")
_EMPHASIS_ENDS = (b"_\n", b"*\n", b"`\n", b"_ \n", b"* \n", b"` \n")
# Bold inside a line ("failed, **status limits exceeded(0x8),** syndrome"): a pair of `**` that opens after a blank
# or a bracket and closes before one or a punctuation mark, with no `*` between; a C signature's `**kwargs` and a
# test runner's `.....***Failed` have no such pair.
_BOLD_BYTES = re.compile(rb"(?m)(^|[ \t(\[])\*\*(?=[^\s*])([^*\n]*?[^\s*])\*\*(?=[ \t,.;:)\]]|$)")


def _rejoined(lines: bytes) -> bytes:
    """The lines a mail client or a narrow terminal wrapped, joined where a message reads across the break
    (logparse/wrapped.py); looked for, as Markdown is, in the lines within an input's first BLOCK bytes: a mail
    quote or a terminal copy is that small."""
    width = wrapped.width(lines)
    return wrapped.rejoin(lines, width) if width else lines


def _unemphasise(raw: bytes) -> bytes:
    if any(end in raw for end in _EMPHASIS_ENDS) or raw.endswith((b"_", b"*", b"`")):
        raw = _EMPHASIS_BYTES.sub(rb"\1\3", raw)
    if b"**" in raw:
        raw = _BOLD_BYTES.sub(rb"\1\2", raw)
    return raw


# A line end of several CRs before the LF (a CRLF file converted to CRLF again: "\r\r\n") is one line end, not a
# blank line after each line; looked for only where two CRs meet, so a plain CRLF log costs two replaces.
_CRS_LF = re.compile(r"\r+\n")
_CRS_LF_BYTES = re.compile(rb"\r+\n")


def clean_block(text: str) -> str:
    """Remove what a terminal or a chat adds around the text perftest printed."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        if "\r\r" in text:
            text = _CRS_LF.sub("\n", text)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.translate(_CLEAN)


def _may_hold_long_line(data: bytes) -> bool:
    """A line longer than MAX_LINE spans a whole stretch of MAX_LINE / 2 bytes without a newline."""
    step = MAX_LINE // 2
    return any(data.find(b"\n", pos, pos + step) < 0 for pos in range(0, len(data) - step + 1, step))


def _line_cut(raw: bytes) -> Optional[int]:
    """Where a block read ends its last whole line (the index of its end); None to read on first."""
    cut = raw.rfind(b"\n")
    if cut >= 0:
        return cut
    # no line end: a lone-CR log (each CR ends a line) or one line longer than a block
    cut = raw.rfind(b"\r", 0, len(raw) - 1)
    if cut >= 0:
        return cut
    if len(raw) < BLOCK:
        return None
    # a line longer than any block: hand it out in pieces (not inside a UTF-8 sequence)
    cut = len(raw) - 2
    while cut > 0 and 0x80 <= raw[cut + 1] < 0xC0:
        cut -= 1
    return cut


class Lines(NamedTuple):
    """Whole lines: `data` is cleaned UTF-8 ending in a newline; its first line is number `first`."""
    first: int
    data: bytes


class Piece(NamedTuple):
    """Part of a line longer than MAX_LINE (text, cleaned); `last` on its final piece."""
    number: int
    text: str
    last: bool


class KeepBudget:
    """How much text all the inputs of one parse may still keep for excerpts (many files share it)."""

    def __init__(self, chars: int = 4 * KEEP_CHARS):
        self.chars = chars


class SourceReader:
    """Reads one input and yields Lines and Pieces; keeps the first lines for excerpts."""

    def __init__(self, name: str, stream: BinaryIO, budget: Optional[KeepBudget] = None):
        self.name = name
        self.stream = stream
        self._kept = KeptLines()
        self.text = SourceText(name=name, lines=self._kept, total_lines=0)
        self.budget = budget if budget is not None else KeepBudget()
        self._kept_chars = 0
        self._keeping = True
        self._decoration: Optional["re.Pattern[bytes]"] = _UNDECIDED

    def let_go(self) -> None:
        """Nothing will cite this input's lines (every run it printed was let go): give their room back to the
        inputs after it."""
        self.budget.chars += self._kept_chars
        self._kept_chars = 0
        if self.text.lines:
            self.text.lines = ()
            self.text.truncated = True

    # -- reading -----------------------------------------------------------------------------------------------
    def events(self) -> Iterator[Union[Lines, Piece]]:
        number = 0                   # the last line number handed out (complete or not)
        open_line = False            # the last event was a piece of a line not finished yet
        seen = 0                     # the input's bytes before this block
        continued = False            # the block starts inside a line (one longer than a block)
        for raw, final in self._blocks():
            data = self._clean(raw, seen, continued)
            seen += len(raw)
            continued = not raw.endswith((b"\n", b"\r"))
            if final and not data.endswith(b"\n"):
                data += b"\n"           # the input's last line, without its newline
            if not data:
                continue
            for event in self._split(data, number + (0 if open_line else 1), open_line):
                if isinstance(event, Lines):
                    number = event.first + event.data.count(b"\n") - 1
                    open_line = False
                else:
                    number = event.number
                    open_line = not event.last
                yield event
        if open_line:
            yield Piece(number, "", True)
        self.text.total_lines = number
        self.text.truncated = number > len(self.text.lines)

    def _blocks(self) -> Iterator[Tuple[bytes, bool]]:
        """(raw bytes, whether the input has ended): blocks cut after a line end, the rest kept for the next."""
        pending = b""
        final = False
        while True:
            raw = self.stream.read(BLOCK)
            if raw:
                self.text.bytes_read += len(raw)
                raw = pending + raw
                cut = _line_cut(raw)
                if cut is None:
                    pending = raw
                    continue
                pending, raw = raw[cut + 1:], raw[:cut + 1]
            elif pending:
                raw, pending, final = pending, b"", True
            else:
                return
            yield raw, final

    def _split(self, data: bytes, first: int, open_line: bool) -> Iterator[Union[Lines, Piece]]:
        """Cleaned text -> Lines, with the lines longer than MAX_LINE (and a line still open) as Pieces."""
        if open_line:
            # the rest of a long line continued from the previous block
            nl = data.find(b"\n")
            head = data if nl < 0 else data[:nl]
            yield self._piece(first, head, nl >= 0)
            if nl < 0:
                return
            data, first = data[nl + 1:], first + 1
            if not data:
                return
        ends_line = data.endswith(b"\n")
        if ends_line and not self._keeping and not _may_hold_long_line(data):
            yield Lines(first, data)       # the usual block: no line to cut, nothing more to keep
            return
        lines = data.split(b"\n")
        last = lines.pop()
        tail = None if ends_line else last      # a line the block ends inside of
        if self._keeping:
            self._keep(lines, first)
        yield from self._whole_lines(data, lines, first, tail)
        if tail is not None:
            number = first + len(lines)
            if self._keeping:
                self._keep([tail[:MAX_LINE]], number)
            yield self._piece(number, tail, False)

    def _whole_lines(self, data: bytes, lines: List[bytes], first: int,
                     tail: Optional[bytes]) -> Iterator[Union[Lines, Piece]]:
        """The block's complete lines (data's `lines`): as one Lines, but each line longer than MAX_LINE a Piece."""
        if lines and (len(data) <= MAX_LINE or max(map(len, lines)) <= MAX_LINE):
            yield Lines(first, data if tail is None else data[:len(data) - len(tail)])
            return
        start = 0
        for i, line in enumerate(lines):
            if len(line) > MAX_LINE:
                if i > start:
                    yield Lines(first + start, b"\n".join(lines[start:i]) + b"\n")
                yield self._piece(first + i, line, True)
                start = i + 1
        if start < len(lines):
            yield Lines(first + start, b"\n".join(lines[start:]) + b"\n")

    def _piece(self, number: int, data: bytes, last: bool) -> Piece:
        return Piece(number, data.decode("utf-8", "replace"), last)

    def _keep(self, lines: List[bytes], first: int) -> None:
        kept = self._kept
        room = KEEP_LINES - len(kept)
        batch = lines[:room]
        if max(map(len, batch), default=0) > MAX_LINE:
            batch = [line[:MAX_LINE] for line in batch]
            texts = [line.decode("utf-8", "replace") for line in batch]
        else:
            texts = b"\n".join(batch).decode("utf-8", "replace").split("\n") if batch else []
        # the lines up to the one that reaches the budget (of this input, or of all), that one included
        totals = list(accumulate(map(len, texts)))
        limit = min(KEEP_CHARS - self._kept_chars, self.budget.chars)
        taken = min(len(texts), bisect_left(totals, limit) + 1)
        if taken:
            kept.extend(texts[:taken])
            self._kept_chars += totals[taken - 1]
            self.budget.chars -= totals[taken - 1]
        if len(kept) >= KEEP_LINES or self._kept_chars >= KEEP_CHARS or self.budget.chars <= 0:
            self._keeping = False

    # -- cleaning ----------------------------------------------------------------------------------------------
    def _clean(self, raw: bytes, seen: int, continued: bool) -> bytes:
        """The block as printable text, without its lines' decorations; `seen`: the input's bytes before it;
        `continued`: it starts inside a line. Markdown and wrapped lines are looked for in the lines that end within the
        input's first BLOCK bytes, however the input comes in blocks (a decompressor hands out smaller ones than a
        file)."""
        if seen >= BLOCK:
            return self._undecorate(self._printable(raw), continued)
        end = raw.rfind(b"\n", 0, BLOCK - seen) + 1
        if end == 0:
            # a lone-CR log ends its lines with CR (not the CR of a CRLF whose LF lies beyond)
            cr = raw.rfind(b"\r", 0, BLOCK - seen)
            end = cr + 1 if cr >= 0 and raw[cr + 1:cr + 2] != b"\n" else 0
        if end == 0:
            return self._undecorate(self._printable(raw), continued)
        return (_rejoined(_unemphasise(self._undecorate(self._printable(raw[:end]), continued)))
                + self._undecorate(self._printable(raw[end:]), False))

    def _undecorate(self, data: bytes, continued: bool) -> bytes:
        """The block without what the paste or the launcher put before each line (logparse/decorations.py), looked
        for in the input's first lines."""
        if self._decoration is _UNDECIDED:
            if not data.strip():
                return data
            self._decoration = decorations.detect(data.partition(b"\n")[2] if continued else data)
        if self._decoration is None:
            return data
        if continued:
            nl = data.find(b"\n") + 1
            return data[:nl] + self._decoration.sub(b"", data[nl:]) if nl else data
        return self._decoration.sub(b"", data)

    def _printable(self, raw: bytes) -> bytes:
        if b"&" in raw:
            raw = _ENTITY_BYTES.sub(lambda m: _ENTITIES[m.group(1)], raw)
        ascii_only = raw.isascii()
        if not ascii_only:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return clean_block(self._decode(raw)).encode("utf-8", "surrogatepass")
        if b"\x1b" in raw:
            raw = _ANSI_BYTES.sub(b"", raw)
        if b"\r" in raw:
            if b"\r\r" in raw:
                raw = _CRS_LF_BYTES.sub(b"\n", raw)
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        raw = raw.translate(_CLEAN_BYTES)
        if not ascii_only:
            # looked for among the bytes beyond ASCII alone (few): in valid UTF-8 a character's bytes stay together
            beyond = raw.translate(None, _ASCII)
            for sequence, replacement in _CLEAN_UTF8:
                if sequence in beyond:
                    raw = raw.replace(sequence, replacement)
        return raw

    def _decode(self, raw: bytes) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            self.text.decode_errors += text.count("\ufffd")
        return text

    # -- the line interface (tests, tools) ----------------------------------------------------------------------
    def lines(self) -> Iterator[Tuple[int, str]]:
        """(line number, text) of every line, a long line in its pieces."""
        for event in self.events():
            if isinstance(event, Lines):
                for offset, line in enumerate(event.data.decode("utf-8", "replace").split("\n")[:-1]):
                    yield event.first + offset, line
            elif event.text:
                yield event.number, event.text
