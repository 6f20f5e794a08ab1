"""Where the text view prints: lines of styled pieces, with colour only where a terminal will show it.

The text view wraps every line itself (render/text.py), so what it needs of a terminal is small: its width, its
encoding, and a few SGR styles. Written here rather than taken from rich, whose import alone was about a tenth of
`explain`'s start-up on a small log.

Colour follows the conventions terminals and CI runners share: none when NO_COLOR is set (no-color.org) or the
terminal is dumb; FORCE_COLOR set makes the output a terminal's (colour, and the width COLUMNS gives), as it does for
rich and most command-line tools. Every string printed has already been made printable (runtime/text.printable):
nothing from a log reaches the terminal as a control sequence.
"""
from __future__ import annotations

import os
import shutil
import sys
import unicodedata
from typing import Optional, Sequence, TextIO, Tuple

# SGR parameters of the styles the text view uses (ECMA-48)
SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}

Piece = Tuple[str, str]         # (text, style: blank-separated names of SGR, or "")


def cell_len(text: str) -> int:
    """Display cells `text` takes: East Asian wide and full-width characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):   # a closed or replaced stream
        return False


class Terminal:
    """`file` (standard output by default) as the text view sees it: `is_terminal`, `width`, `encoding`, and
    print() of one line of styled pieces. `width`, `color` and `terminal` (whether it counts as a terminal) override
    what the environment says (tests, files)."""

    def __init__(self, file: Optional[TextIO] = None, width: Optional[int] = None, color: Optional[bool] = None,
                 terminal: Optional[bool] = None):
        self.file = file if file is not None else sys.stdout
        env = os.environ
        forced = bool(env.get("FORCE_COLOR"))
        self.is_terminal = terminal if terminal is not None else (forced or _is_tty(self.file))
        if color is None:
            color = self.is_terminal and not env.get("NO_COLOR") and env.get("TERM", "") not in ("dumb", "unknown")
        self.color = color
        self.width = width if width is not None else shutil.get_terminal_size((80, 24)).columns
        self.encoding = getattr(self.file, "encoding", None) or "utf-8"

    def print(self, pieces: Sequence[Piece] = ()) -> None:
        self.file.write("".join(self._styled(text, style) for text, style in pieces) + "\n")

    def _styled(self, text: str, style: str) -> str:
        if not (self.color and style and text):
            return text
        codes = ";".join(SGR[name] for name in style.split() if name in SGR)
        return f"\x1b[{codes}m{text}\x1b[0m" if codes else text
