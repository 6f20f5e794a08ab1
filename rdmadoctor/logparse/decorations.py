"""What a paste or a job launcher puts in front of every line it passes on, found in an input's first lines and taken
off each line of it, so that perftest's header, tables and rows and the tools' listings read as their programs
printed them (their patterns hold at a line's start):

    > ...                                    a Markdown or mail quote (nested too)
    2024-05-01T12:00:00.123Z ...             a timestamp: kubectl logs --timestamps, CI runners, Python's
                                             logging, moreutils' ts (May 01 12:00:00 ...)
    May  1 12:00:00 node1 app[42]: ...       a syslog line head (journalctl, -o short-iso too; /var/log/messages)
    0: ...                                   srun --label's task number
    [1,0]<stdout>: ...                       Open MPI's mpirun --tag-output: its job and rank
    [0] ...                                  MPICH's and Intel MPI's mpiexec -prepend-rank
    [rank0]: ...                             torchrun's rank prefix
    node01: ...                              pdsh's and clush's host
    worker-1  | ...                          docker compose's service column
    [pod/trainer-0/main] ...                 kubectl logs --prefix
       12  ...   12 | ...                    line numbers: `cat -n`, a pastebin's or an editor's gutter
        ...                                  a Markdown code block's indentation (what all the lines share)

A decoration is taken off only when it starts most of the first lines (SHARE of them, at least two), a label
(a task number, a service name) only when the lines repeat it: a listing that numbers its lines (`rdma dev`,
`ip -o addr`) gives each line a label of its own and keeps it; and line numbers only when they count up by one from
line to line (a result table's first column, message sizes, doubles or repeats). Layers (a quoted srun paste) are
found one after the other. Messages are found anywhere in a line, so the decorations only ever hid structure. Every
repetition in the patterns is bounded: they run at every line's start of a huge log, whatever its lines hold.
"""
from __future__ import annotations

import re
from typing import List, NamedTuple, Optional

SAMPLE_LINES = 400          # the first lines of an input looked at
SHARE = 0.6                 # of the sample's non-blank lines a decoration must start
MAX_LAYERS = 3
LINE_START = 512            # bytes of each line looked at
_BLANK = rb"(?P<blank> )?"
_LABEL = re.compile(rb"\(\?P<\w+>")     # (layers are joined into one pattern: a group name may come twice)


class Decoration(NamedTuple):
    name: str
    regex: "re.Pattern[bytes]"      # at a line's start; a group `label` where the lines must repeat one


SYSLOG_TIME = rb"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"     # also moreutils' ts
ISO_TIME = rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[ ]?[+-]\d\d:?\d\d)?"
_NOT_HOSTS = rb"mlx\d|mthca|qib|hfi|rxe|siw|efa|irdma|bnxt|hns|ocrdma|erdma|cxgb|vmw|rdmap|ib|eth|en[opsx]|bond"
_NOT_PROGRAMS = rb"(?!(?:ERROR|WARN|WARNING|INFO|DEBUG|FATAL|CRIT|CRITICAL|NOTICE|TRACE|PANIC|ALERT|EMERG)[:\[])"
DECORATIONS = (
    Decoration("quote", re.compile(rb"[ \t]{0,3}>(?:[ \t]?>){0,7}(?:[ \t]|(?=\n)|$)")),
    # (one blank after it: the line's own indentation is the program's, as fi_info's and ibstat's)
    Decoration("timestamp", re.compile(rb"\[?(?:" + ISO_TIME + b"|" + SYSLOG_TIME + rb")\]?"
                                       rb"(?:[ \t]{1,4}[|:-])?[ \t]")),
    # (a program's line that starts with its name and a severity word, "PMIX ERROR: ...", behind a time that
    # moreutils' ts or kubectl put there, is not a host and a program: only the time comes off)
    Decoration("syslog", re.compile(rb"(?:" + SYSLOG_TIME + b"|" + ISO_TIME + rb") "
                                    rb"[\w.-]{1,64} " + _NOT_PROGRAMS + rb"[^\s:\[\]]{1,64}(?:\[\d{1,9}\])?: ")),
    # (not a listing's own numbering: `ip -o addr` repeats an interface's, "2: eth0    inet", "2: eth0    inet6";
    # `rdma dev` and `ip link` number each line once, "0: mlx5_0: node_type", "2: eth0: <BROADCAST")
    Decoration("srun", re.compile(rb"[ \t]{0,6}(?P<label>\d{1,6}): "
                                  rb"(?![\w.@-]{1,64}(?:: <|: node_type |[ \t]{1,16}(?:inet6?|link/)\w{0,16}"
                                  rb"[ \t]))")),
    # Open MPI's --tag-output: "[1,0]<stdout>:" up to 4.x (orte_iof_base_output.c), "[1,0]<stdout>: " from 5.0
    # (PMIx's pmix_iof_base_output.c; --output tag-detailed adds "[host:pid]")
    Decoration("mpirun", re.compile(rb"\[[\w.@-]{1,64},\d{1,9}\](?:\[[\w.-]{1,64}:\d{1,9}\])?"
                                    rb"<std(?:out|err|diag)>:(?P<blank> )?")),
    # torchrun's line prefix (--tee, --log-line-prefix-template; "[default0]:" before PyTorch 2.2, "[rank0]:" after)
    Decoration("torchrun", re.compile(rb"\[(?:rank|default)(?P<label>\d{1,6})\]:(?P<blank> )?")),
    # MPICH's and Intel MPI's -prepend-rank
    Decoration("prepend-rank", re.compile(rb"\[(?P<label>\d{1,6})\] ")),
    # pdsh's and clush's host: a name with a digit or a domain; not an RDMA provider's or a netdev's name, which the
    # kernel and rdma-core's providers print first ("mlx5: node1: got completion with error", "ib0: ...")
    Decoration("pdsh", re.compile(rb"(?!(?:" + _NOT_HOSTS + rb")\w{0,16}: )"
                                  rb"(?P<label>[A-Za-z][\w-]{0,31}\d[\w.-]{0,31}|"
                                  rb"[A-Za-z][\w-]{0,31}(?:\.[\w-]{1,31}){1,6}): ")),
    Decoration("compose", re.compile(rb"(?P<label>[A-Za-z][\w.-]{0,63})[ \t]{1,32}\|[ \t]")),
    Decoration("kubectl", re.compile(rb"\[pod/[^\]\s]{1,253}\][ \t]")),
    # (a tab, two blanks or a bar after the number: "N: " is a listing's own numbering, `rdma dev`'s "0: mlx5_0: ...",
    # and one blank starts a result row's next number)
    Decoration("line-numbers", re.compile(rb"[ \t]{0,8}(?P<number>\d{1,7})(?:\t|[ ]{2}|[ ]?\|[ ]?)")),
)
COUNTING = 0.8          # of the steps from one numbered line to the next that must be +1


def _best(lines: List[bytes]) -> Optional["re.Pattern[bytes]"]:
    """What the decoration that starts SHARE of the lines and covers the most of them puts there; None when none
    does. A blank that follows it in some versions of its tool (group `blank`) is the decoration's only when every
    line has it; else it is the line's own."""
    best, best_cover = None, 0
    for decoration in DECORATIONS:
        found = [m for m in map(decoration.regex.match, lines) if m]
        if len(found) < 2 or len(found) < SHARE * len(lines):
            continue
        if "label" in decoration.regex.groupindex and len({m.group("label") for m in found}) > len(found) // 2:
            continue
        if "number" in decoration.regex.groupindex and not _counts_up([int(m.group("number")) for m in found]):
            continue
        cover = sum(m.end() for m in found)
        if cover > best_cover:
            best, best_cover = decoration.regex, cover
            if "blank" in best.groupindex:
                best = re.compile(best.pattern.replace(_BLANK, b" " if all(m.group("blank") for m in found) else b""))
    return best


def _counts_up(numbers: List[int]) -> bool:
    """The numbers go up by one from each to the next, nearly always (a line the copy left out skips one)."""
    steps = [b - a for a, b in zip(numbers, numbers[1:])]
    return bool(steps) and all(step > 0 for step in steps) and steps.count(1) >= COUNTING * len(steps)


def _common_indent(lines: List[bytes]) -> bytes:
    """The blanks every line starts with, when they make a Markdown code block (four blanks, or a tab); else b""."""
    if len(lines) < 2:
        return b""
    indent = min(line[:len(line) - len(line.lstrip(b" \t"))] for line in lines)
    while indent and not all(line.startswith(indent) for line in lines):
        indent = indent[:-1]
    return indent if indent.startswith((b"    ", b"\t")) else b""


def detect(sample: bytes) -> Optional["re.Pattern[bytes]"]:
    """A pattern that takes the decorations of the input whose first lines `sample` holds off every line of it
    (re.MULTILINE: apply with `sub(b"", block)` to blocks that start at a line's start); None when it has none."""
    # (a decoration is short: a line's first bytes tell, however long the line is)
    lines = [line[:LINE_START] for line in sample.split(b"\n", SAMPLE_LINES)[:SAMPLE_LINES] if line.strip()]
    layers: List[bytes] = []
    indented = False
    for _ in range(MAX_LAYERS):
        decoration = _best(lines)
        if decoration is None:
            # a code block's indentation, and what it holds: a mail quote indented in a Markdown comment
            indent = b"" if indented else _common_indent(lines)
            if not indent:
                break
            decoration, indented = re.compile(re.escape(indent)), True
        layers.append(decoration.pattern)
        lines = [line[m.end():] if m else line for line, m in zip(lines, map(decoration.match, lines))]
        lines = [line for line in lines if line.strip()]
    if not indented:
        indent = _common_indent(lines)
        if indent:
            layers.append(re.escape(indent))
    if not layers:
        return None
    if len(layers) == 1:
        return re.compile(rb"(?m)^" + layers[0])
    # each layer where it is: a line without one of them (a note between quoted lines) loses the others
    return re.compile(rb"(?m)^" + b"".join(b"(?:" + _LABEL.sub(b"(?:", layer) + b")?" for layer in layers))
