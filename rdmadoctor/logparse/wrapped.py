"""Lines that a mail client or a narrow terminal broke in two, joined again where a message reads across the break.

A log quoted in a mail (format=flowed, a client's 72 to 78 columns) or copied from a terminal that inserts its line
ends comes with its long lines cut: at a blank before the width (the word that did not fit starts the next line) or
at the width itself, inside a word. A message cut so matches nowhere: "NET/IB : Got completion from peer 10.0.0.2<443>
with" and "error 12, opcode 0 ..." are two lines no pattern reads. Nothing in such an input says it was wrapped, and
joining lines at a guess would merge ones a program printed apart; so a line is joined with the next only where the
catalogue finds a message across the break that it does not find in the first line alone, and only in an input whose
first lines stop at a width a mail client or a terminal wraps at (WIDTHS), and within a bound on the searches
(SEARCHES): a megabyte of 80-column lines is not a mail. The joined line keeps its first line's number and a blank
line takes the place of each line it took in, so every later line keeps its number (its evidence points at the line
the user sees).
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

from rdmadoctor.logparse import catalog

_WORDY = re.compile(rb"[A-Za-z0-9]")

WIDTHS = range(60, 101)         # where mail clients and narrow terminals break lines
SAMPLE_LINES = 400
REACH = 60                      # a line broken before the width ends at most this far from it (the word it moved on)
PIECES = 8                      # a message read across at most this many lines
GLUINGS = 4                     # ways of joining them tried (a break at the width: with a blank or without)
# catalogue searches one input may spend on its breaks: a mail quote or a terminal copy takes a few hundred; a
# megabyte of 80-column lines full of the catalogue's words would take hundreds of thousands (a quarter of a second
# per thousand, on its longest joins)
SEARCHES = 1000


def width(sample: bytes) -> Optional[int]:
    """The width the input's first lines stop at, when it is one a mail client or a terminal wraps at; else None."""
    lengths = [len(line) for line in sample.split(b"\n", SAMPLE_LINES)[:SAMPLE_LINES] if line.strip()]
    widest = max(lengths, default=0)
    return widest if widest in WIDTHS else None


def rejoin(data: bytes, wrapped_at: int) -> bytes:
    """`data` (whole lines) with each line that a message continues into the next ones joined with them, the same
    number of lines kept; past SEARCHES catalogue searches, the rest as it is."""
    lines = data.split(b"\n")
    out: List[bytes] = []
    budget = _Budget(SEARCHES)
    i = 0
    while i < len(lines) and budget.left > 0:
        joined = _joined(lines, i, wrapped_at, budget)
        if joined is None:
            out.append(lines[i])
            i += 1
            continue
        text, taken = joined
        out.append(text)
        out.extend([b""] * taken)
        i += 1 + taken
    return b"\n".join(out + lines[i:])


class _Budget:
    """The catalogue searches left to spend; once spent, a search finds nothing (no more lines are joined)."""

    def __init__(self, left: int):
        self.left = left

    def find(self, text: str) -> List[catalog.Match]:
        if self.left <= 0:
            return []
        self.left -= 1
        return _search(text)


def _search(text: str) -> List[catalog.Match]:
    return catalog.load().find(text)


def _joined(lines: List[bytes], i: int, wrapped_at: int, budget: _Budget) -> Optional[Tuple[bytes, int]]:
    """Line i with the fewest of the lines after it (up to PIECES - 1) across whose breaks a message reads that is not
    in line i alone, and how many it took in; None when there is none. Each line before a break must have been
    broken (_broken); one broken at the width may have been cut inside a word (joined without a blank, its next line
    may start with one), one broken before it was cut at a blank (joined with one)."""
    head = lines[i].decode("utf-8", "replace")
    texts = [head]
    for taken in range(1, PIECES):
        if i + taken >= len(lines):
            return None
        piece, following = lines[i + taken - 1], lines[i + taken]
        if not _broken(piece, following, wrapped_at, budget):
            return None
        glues = ("", " ") if len(piece) == wrapped_at else (() if following[:1] in (b" ", b"\t") else (" ",))
        tail = following.decode("utf-8", "replace")
        texts = [text + glue + tail for text in texts for glue in glues][:GLUINGS]
        if not texts:
            return None
        for text in texts:
            if _reads_across(text, head, budget):
                return text.encode("utf-8", "surrogatepass"), taken
    return None


def _broken(piece: bytes, following: bytes, wrapped_at: int, budget: _Budget) -> bool:
    """`piece` ends where the wrapping broke it: at the width, or before it because the next line's first word did not
    fit (what a mail client's and textwrap's breaking leaves); and `following` does not start a line of its own: a
    message of the catalogue at its start (a stack frame, a program's error), or the first word `piece` starts with
    too (a host, a rank, a program's head: the next line that program printed)."""
    words = following.split(None, 1)
    if not words or not (len(piece) == wrapped_at or
                         len(piece) >= wrapped_at - REACH and len(piece) + 1 + len(words[0]) > wrapped_at):
        return False
    return not _starts_a_line(piece, following, budget)


def _starts_a_line(piece: bytes, following: bytes, budget: _Budget) -> bool:
    first = piece.split(None, 1)
    # (a word of its own: a quote's ">" or a bullet starts every line, wrapped or not)
    if first and following.split(None, 1)[0] == first[0] and _WORDY.search(first[0]):
        return True
    tail = following.decode("utf-8", "replace")
    blanks = len(tail) - len(tail.lstrip())
    return any(match.start == blanks for match in budget.find(tail))


def _reads_across(text: str, head: str, budget: _Budget) -> bool:
    """A message in `text` starts in its first line (`head`) and goes on past it, and its pattern finds nothing where
    it starts in `head` alone."""
    for match in budget.find(text):
        if match.start < len(head) < match.end and match.pattern.regex.match(head, match.start) is None:
            return True
    return False
