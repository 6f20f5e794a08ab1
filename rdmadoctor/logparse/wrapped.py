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
# a word in the middle of a sentence: lowercase letters only (a program's prefix, "perftest.c:890", "root@node1:~#",
# "opal2.1845", starts a line of its own)
_SENTENCE_WORD = re.compile(r"[a-z][a-z'-]*[,.;:]?(?:\s|$)")

WIDTHS = range(60, 101)         # where mail clients and narrow terminals break lines
SAMPLE_LINES = 400
REACH = 60                      # a line broken before the width ends at most this far from it (the word it moved on)
NEAR = 8                        # the lines that tell a terminal's cuts from a mail's breaks end this close to the width
PIECES = 8                      # a message read across at most this many lines
GLUINGS = 4                     # ways of joining them tried (a break at the width: with a blank or without)
# catalogue searches one input may spend on its breaks: a mail quote or a terminal copy takes a few hundred; a
# megabyte of 80-column lines full of the catalogue's words would take hundreds of thousands (a quarter of a second
# per thousand, on its longest joins)
SEARCHES = 1000
ACROSS, CUT_FIELD = 2, 1        # how a joined text reads across its break (_reads_across)


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
    # a terminal cuts every long line at the width, inside words; a mail client breaks at a blank, so that few of its
    # lines end at the width itself (the widest line is at the width in any input: one such line says nothing)
    near = [len(line) for line in lines[:SAMPLE_LINES] if len(line) >= wrapped_at - NEAR]
    at_width = sum(1 for n in near if n == wrapped_at)
    cut_in_words = at_width >= 2 and at_width * 5 >= len(near) * 4
    i = 0
    while i < len(lines) and budget.left > 0:
        joined = _joined(lines, i, wrapped_at, budget, cut_in_words)
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


def _joined(lines: List[bytes], i: int, wrapped_at: int, budget: _Budget,
            cut_in_words: bool) -> Optional[Tuple[bytes, int]]:
    """Line i with the fewest of the lines after it (up to PIECES - 1) across whose breaks a message reads that is not
    in line i alone, and how many it took in; else line i with as many of the next lines as go on with a field its
    first line cut (CUT_FIELD), each starting in the middle of a sentence (_SENTENCE_WORD); None when there is
    neither. Each line before a break must have been broken (_broken); one broken at the width may have been cut
    inside a word (joined without a blank, its next line may start with one), one broken before it was cut at a blank
    (joined with one). Where only a cut field says how to glue, a terminal's input is glued inside a word without a
    blank, a mail's, and any break after punctuation, with one."""
    head = lines[i].decode("utf-8", "replace")
    glued = [(head, "")]          # each way of joining so far, and the glue of its last break
    cut: Optional[Tuple[bytes, int]] = None
    extending = True
    for taken in range(1, PIECES):
        if i + taken >= len(lines):
            break
        piece, following = lines[i + taken - 1], lines[i + taken]
        if not _broken(piece, following, wrapped_at, budget):
            break
        glues = ("", " ") if len(piece) == wrapped_at else (() if following[:1] in (b" ", b"\t") else (" ",))
        tail = following.decode("utf-8", "replace")
        glued = [(text + glue + tail, glue) for text, _ in glued for glue in glues][:GLUINGS]
        if not glued:
            break
        reads = [(_reads_across(text, head, budget), text, glue) for text, glue in glued]
        across = next((text for how, text, _ in reads if how == ACROSS), None)
        if across is not None:
            return across.encode("utf-8", "surrogatepass"), taken
        if extending:
            # a terminal cuts inside a word; a mail client breaks at a blank, and after a colon or a comma the text
            # went on after one
            in_word = cut_in_words and piece[-1:].isalnum() and following[:1].isalnum()
            field = next((text for how, text, glue in reads
                          if how == CUT_FIELD and (glue == " " or in_word or tail[:1].isspace())), None)
            if field is not None and _SENTENCE_WORD.match(tail.lstrip()):
                cut = field.encode("utf-8", "surrogatepass"), taken
            else:
                extending = False   # (the sentence ended: what was taken in so far is the whole field)
    return cut


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


def _reads_across(text: str, head: str, budget: _Budget) -> int:
    """ACROSS: a message in `text` starts in its first line (`head`) and goes on past it, and its pattern finds nothing
    where it starts in `head` alone. CUT_FIELD: its pattern finds it in `head` alone only up to the end of `head` (a
    field that takes the rest of its line, a reason or a path, cut at the break). 0: neither."""
    end = len(head.rstrip())
    found = 0
    for match in budget.find(text):
        if not match.start < len(head) < match.end:
            continue
        alone = match.pattern.regex.match(head, match.start)
        if alone is None:
            return ACROSS
        if alone.end() >= end:
            found = CUT_FIELD
    return found
