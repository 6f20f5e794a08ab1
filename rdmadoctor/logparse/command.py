"""A perftest command line, as typed at a shell prompt, parsed the way perftest's getopt_long would."""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.knowledge.perftest import LONG, OPTIONAL_ARG, SHORT, TOOLS, resolve_long

TOOL_RE = re.compile(r"(?<![\w.-])(?:[\w./-]*/)?(?P<tool>" + "|".join(TOOLS) + r")(?=\s|$)")
# what may follow a command on the same line without being part of it
_SHELL_END = re.compile(r"^(?:\||>|2>|&>|&&|;|&|\|\|)")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?|\[?[0-9A-Fa-f:.]+\]?(?:%\w+)?)$")


def parse_command(text: str) -> Optional[Tuple[str, List[str], Dict[str, Any], Optional[str], int]]:
    """(tool, argv, options, host, end) when `text` holds a perftest command line, else None.

    `end` is where the command stops in `text` (shell redirections and pipes end it). A line that
    names a tool but does not parse as its options (prose, usage text) is not a command.
    """
    m = TOOL_RE.search(text)
    if not m:
        return None
    rest = text[m.end():]
    try:
        tokens = shlex.split(rest, posix=True)
    except ValueError:
        tokens = rest.split()
    options: Dict[str, Any] = {}
    host: Optional[str] = None
    argv = [m.group("tool")]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if _SHELL_END.match(tok):
            break
        last: Optional[int]
        if tok.startswith("--") and len(tok) > 2:
            last = _long_option(tokens, i, options)
        elif tok.startswith("-") and len(tok) > 1 and not _looks_negative_number(tok):
            last = _short_options(tokens, i, options)
        elif host is None and _HOST.match(tok):
            host, last = tok, i
        else:
            return None        # a second positional argument: not a command perftest would run
        if last is None:
            return None
        argv.extend(tokens[i:last + 1])   # the option and the value it consumed
        i = last + 1
    end = _command_end(text, m.end(), argv[1:])
    return m.group("tool"), argv, options, host, end


def _long_option(tokens: List[str], i: int, options: Dict[str, Any]) -> Optional[int]:
    """--name[=value] at tokens[i] into `options`: the index of the last token it consumed, None when
    it is not an option perftest knows or its value is missing."""
    name, eq, value = tokens[i][2:].partition("=")
    canonical = resolve_long(name)
    if canonical is None:
        return None
    takes = LONG[canonical]
    if not takes:
        options[canonical] = True
        return i
    if eq:
        options[canonical] = value
        return i
    if canonical in OPTIONAL_ARG and not (i + 1 < len(tokens) and tokens[i + 1].isdigit()):
        options[canonical] = True
        return i
    if i + 1 < len(tokens):
        options[canonical] = tokens[i + 1]
        return i + 1
    return None


def _short_options(tokens: List[str], i: int, options: Dict[str, Any]) -> Optional[int]:
    """-abc or -s65536 or -s 65536 at tokens[i], as getopt reads a cluster of short options."""
    tok = tokens[i]
    for j in range(1, len(tok)):
        letter = tok[j]
        if letter not in SHORT:
            return None
        canonical, takes = SHORT[letter]
        if not takes:
            options[canonical] = True
            continue
        if tok[j + 1:]:
            options[canonical] = tok[j + 1:]
            return i
        if i + 1 >= len(tokens):
            return None
        options[canonical] = tokens[i + 1]
        return i + 1
    return i


def _looks_negative_number(token: str) -> bool:
    return bool(re.match(r"^-\d", token))


def _command_end(text: str, start: int, consumed: List[str]) -> int:
    """Position in `text` just after the last consumed token (shlex loses positions)."""
    pos = start
    for tok in consumed:
        found = text.find(tok.split("=")[0], pos)
        if found < 0:
            return len(text)
        pos = found + len(tok)
    return min(pos, len(text))
