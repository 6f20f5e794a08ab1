"""Text that came from outside (a log, a facts file, a peer agent, a client of the agent) made safe to show.

    printable(text)        for a terminal: control characters (ESC, C1, NUL, ...) and the Unicode characters
                           that reorder or hide text (U+202E, U+2066..) shown as visible escapes ("\\x1b")
    printable(text, False) the same on one line: newlines and tabs escaped too
    log_value(value)       one field of a log line: a bare word as it is, anything else as a JSON string
                           (quoted, ASCII only, no space or newline to forge another field or line), cut short

A terminal obeys what it is sent: an ESC from a pasted log can set the window title, write the clipboard
(OSC 52) or hide the text that follows; a U+202E makes a command read differently from what it runs. Escaping
(rather than dropping) keeps the evidence visible.
"""
from __future__ import annotations

import json
import re
from typing import Any

# C0 controls but newline and tab, DEL, C1 controls; the bidirectional overrides, isolates and marks; the
# line and paragraph separators (a terminal or a log viewer may break the line there).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_UNSAFE_RE = re.compile(f"[{_UNSAFE}]")
_UNSAFE_LINE_RE = re.compile(f"[{_UNSAFE}\n\t]")
_BARE = re.compile(r"[A-Za-z0-9_.:/@+?-]{1,200}")

LOG_VALUE_CHARS = 80          # characters of one client-supplied value a log line keeps


def _escape(m: "re.Match[str]") -> str:
    ch = m.group(0)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any, keep_newlines: bool = True) -> str:
    """`text` with every character that could drive a terminal shown as an escape."""
    if not isinstance(text, str):
        text = str(text)
    return (_UNSAFE_RE if keep_newlines else _UNSAFE_LINE_RE).sub(_escape, text)


def has_unsafe(text: str) -> bool:
    return bool(_UNSAFE_RE.search(text))


def log_value(value: Any, limit: int = LOG_VALUE_CHARS) -> str:
    """One client-supplied value for a `key=value` log line: a bare word as it is, anything else JSON-quoted
    with every non-ASCII character escaped, at most `limit` characters of it kept."""
    text = value if isinstance(value, str) else repr(value)
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    out = text if _BARE.fullmatch(text) else json.dumps(text, ensure_ascii=True)
    return out + (f"...(+{cut} chars)" if cut > 0 else "")


def log_text(text: Any, limit: int = 240) -> str:
    """A free-text tail of a log line (a message that may quote client input): one line, ASCII, cut short."""
    text = text if isinstance(text, str) else str(text)
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    escaped = json.dumps(text, ensure_ascii=True)[1:-1]
    return escaped + (f"...(+{cut} chars)" if cut > 0 else "")
