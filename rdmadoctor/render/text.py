"""The terminal view: the verdict first, then the ladder, then each finding with its evidence and fix commands.

Every line fits the width: the terminal's, or 80 columns in a pipe (always the same, so a script sees the same
text every time); a long line wraps at blanks under a hanging indent, and a word is never split (a command or a
path longer than the width stands alone on its line). Chinese text wraps between characters, by display width.
When the output's encoding cannot carry the marks (✓ ✗ → • …), ASCII ones are used.

Every string shown comes from outside in the end (a log line, a facts file, a peer agent's answer), so each goes
through runtime/text.printable (ESC, C1 and bidirectional controls shown as escapes, never sent to the terminal)
and is printed as text: nothing in it is read as markup ("[link=...]" in a log stays text).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, Iterator, List, Optional, Tuple

from rdmadoctor.knowledge.phrases import say
from rdmadoctor.model import Diagnosis, Finding
from rdmadoctor.render.terminal import Terminal, cell_len
from rdmadoctor.runtime.text import printable

PIPE_WIDTH = 80
# A soak log or a job log of hundreds of runs repeats one finding per run: the text shows the first few of each
# rule in full and counts the rest, so its length follows the number of rules that fired, not the input's size.
PER_RULE = 3
UNICODE_MARKS = {"pass": "[✓]", "fail": "[✗]", "warn": "[!]", "info": "[i]", "skip": "[-]", "unseen": "[?]",
                 "arrow": "→", "bullet": "•", "back": "←", "more": "…", "dash": "—", "times": "×"}
ASCII_MARKS = {"pass": "[ok]", "fail": "[x]", "warn": "[!]", "info": "[i]", "skip": "[-]", "unseen": "[?]",
               "arrow": "->", "bullet": "*", "back": "<-", "more": "...", "dash": "-", "times": "x"}
STATUS_STYLE = {"ok": "bold green", "warning": "bold yellow", "failure": "bold red", "unknown": "bold magenta"}
SEVERITY = {"fail": ("fail", "red"), "warn": ("warn", "yellow"), "info": ("info", "cyan")}
RUNG = {"passed": ("pass", "green"), "failed": ("fail", "red"), "warning": ("warn", "yellow"),
        "skipped": ("skip", "dim"), "not-inspected": ("unseen", "magenta")}
_WORDS = re.compile(r"\S+|\s+")
# Chinese, Japanese and Korean characters: a line may break after any of them (a regular expression of these ranges
# takes milliseconds to compile, more than the text view takes to print)
_CJK_RANGES = ((0x1100, 0x11ff), (0x2e80, 0x9fff), (0xac00, 0xd7af), (0xf900, 0xfaff), (0xff00, 0xffef))


def _is_cjk(c: str) -> bool:
    code = ord(c)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _tokens(text: str) -> Iterator[str]:
    """Blanks, runs of other characters, and each Chinese character alone."""
    for token in _WORDS.findall(text):
        if token.isascii() or token.isspace() or not any(map(_is_cjk, token)):
            yield token          # (blanks, the ideographic space among them, are one break whatever they hold)
            continue
        run = ""
        for c in token:
            if _is_cjk(c):
                if run:
                    yield run
                yield c
                run = ""
            else:
                run += c
        if run:
            yield run


_NO_LINE_START = frozenset("，。、；：）」』！？”’》】〉")
_NO_LINE_END = frozenset("（「『“‘《【〈")


def _t(value: object, keep_newlines: bool = False) -> str:
    return printable("" if value is None else value, keep_newlines)


def marks_for(encoding: Optional[str]) -> Dict[str, str]:
    """The Unicode marks when the output's encoding can carry them, else ASCII ones (GBK, latin-1, ascii)."""
    try:
        "".join(UNICODE_MARKS.values()).encode(encoding or "ascii")
        return UNICODE_MARKS
    except (UnicodeEncodeError, LookupError):
        return ASCII_MARKS


def wrap(text: str, width: int, first: str = "", rest: Optional[str] = None) -> List[str]:
    """`text` in lines of at most `width` display cells: `first` before the first line, `rest` (default: blanks
    as wide as `first`) before the others. Breaks at blanks and between Chinese characters, never inside a word."""
    rest = " " * cell_len(first) if rest is None else rest
    lines: List[str] = []
    line, used, prefix = "", cell_len(first), first
    for token in _tokens(text.replace("\n", " ")):
        if token.isspace():
            if line:
                line += " "
                used += 1
            continue
        size = cell_len(token)
        # Chinese closing punctuation never starts a line: it stays with the character before it
        if line and used + size > width and line.strip() and token not in _NO_LINE_START:
            lines.append(prefix + line.rstrip())
            prefix, line, used = rest, "", cell_len(rest)
        line += token
        used += size
        if token in _NO_LINE_END and used >= width - 1:
            lines.append(prefix + line[:-len(token)].rstrip())      # an opening mark goes with what follows
            prefix, line, used = rest, token, cell_len(rest) + size
    if line.strip() or not lines:
        lines.append(prefix + line.rstrip())
    return lines


class _Out:
    """Prints the lines it wraps, each in its styles."""

    def __init__(self, terminal: Terminal, lang: Optional[str]):
        self.terminal = terminal
        self.width = terminal.width if terminal.is_terminal else PIPE_WIDTH
        self.marks = marks_for(terminal.encoding)
        self.lang = lang

    def say(self, key: str, **values: object) -> str:
        return say(key, self.lang, **values)

    def line(self, text: str, style: str = "", first: str = "", rest: Optional[str] = None,
             head: Optional[Tuple[str, str]] = None) -> None:
        """One logical line: `head` (text, style) printed before `text` on its first line, in `first`'s place."""
        lead = first + (head[0] if head else "")
        if head and cell_len(lead) > self.width * 2 // 3:
            # a long head (a file name and line) stands on its own line; the text follows under it
            self.terminal.print([(first, ""), (head[0].rstrip(), head[1])])
            indent = " " * cell_len(rest if rest is not None else first + "    ")
            self.line(text, style, indent, indent)
            return
        for i, piece in enumerate(wrap(text, self.width, lead, rest)):
            if i == 0 and head:
                self.terminal.print([(first, ""), (head[0], head[1]), (piece[len(lead):], style)])
            else:
                self.terminal.print([(piece, style)])

    def blank(self) -> None:
        self.terminal.print()


def _run_label(r) -> str:
    """'server (ib_write_bw)'; a run no side is known of (an NCCL job, a listing) by its tool or its producer alone, so
    that 'unknown' is not read as the verdict."""
    what = r.tool or r.producer
    if r.side in ("server", "client"):
        return f"{r.side} ({_t(what)})" if what else r.side
    return _t(what) if what else _t(r.side)


def _runs_line(d: Diagnosis, out: _Out) -> str:
    if not d.runs:
        return ""
    parts = [f"{_t(r.source)}: {_run_label(r)}" for r in d.runs[:6]]
    more = f", {out.marks['more']} {len(d.runs) - 6}" if len(d.runs) > 6 else ""
    return f"{len(d.runs)} {out.say('runs')} {out.marks['dash']} " + ", ".join(parts) + more


def _evidence(f: Finding, out: _Out) -> Iterator[Tuple[str, str]]:
    for e in f.evidence[:8]:
        where = f"{_t(e.source)}:{e.line}" if e.line else _t(e.source)
        yield where, _t(e.text) + (f"   ({_t(e.note)})" if e.note else "")
    if len(f.evidence) > 8:
        yield "", f"{out.marks['more']} {len(f.evidence) - 8}"


def _finding(f: Finding, out: _Out, verbose: bool) -> None:
    mark, style = SEVERITY.get(f.severity, ("unseen", ""))
    kind = out.say("symptom") if f.kind == "symptom" else f.cause
    level = out.say(f"confidence-{f.confidence}") if f.confidence in ("high", "medium", "low") else f.confidence
    out.line(f"{_t(f.rule)}  {_t(kind)}  ({_t(level)})", "bold", head=(out.marks[mark] + " ", style))
    out.line(_t(f.title), "bold", "    ")
    for paragraph in _t(f.explanation, True).split("\n\n"):
        out.line(paragraph, "", "    ")
    if f.evidence:
        out.line(out.say("evidence") + ":", "dim", "    ")
        for where, text in _evidence(f, out):
            out.line(text, "yellow", "      ", rest="          ", head=(f"{where}  " if where else "", "dim"))
    if f.fix:
        out.line(out.say("fix") + ":", "dim", "    ")
        for fix in f.fix:
            out.line(_t(fix), "green", "      ", head=(out.marks["arrow"] + " ", "green"))
    if f.kind == "symptom" and f.candidates:
        out.line(_t(", ".join(f.candidates)), "magenta", "    ", head=(out.say("possible-causes") + ": ", "magenta"))
    if f.next_steps:
        out.line(out.say("next") + ":", "dim", "    ")
        for step in f.next_steps:
            out.line(_t(step), "", "      ", head=(out.marks["bullet"] + " ", ""))
    if verbose and f.refs:
        out.line(_t("; ".join(f.refs)), "dim", "    ", head=(out.say("references") + ": ", "dim"))
    out.blank()


BENCH_FIGURES = (("BW avg Gb/s", "bw_avg_gbps"), ("MsgRate Mpps", "msg_rate_mpps"), ("t_typical us", "lat_typical_us"))


def _bench_table(bench: dict, out: _Out) -> None:
    """One row per combination: its label, its status and the figures the sweep measured (a bandwidth sweep has no
    latency, a latency sweep no bandwidth: a column no row fills is left out), aligned, the figures to the right. A
    failed row's cause follows it, or stands indented under it when the line is too narrow for both."""
    results = bench.get("results", [])
    figures = [(title, key) for title, key in BENCH_FIGURES if any(r.get(key) is not None for r in results)]
    rows = [(["combination", "status", *(title for title, _ in figures)],
             "cause" if any(map(_bench_cause, results)) else "", "bold")]
    for r in results:
        best = " (best)" if bench.get("best") and bench["best"] == _combo_label(r) else ""
        cells = [_t(_combo_label(r) + best, False), _t(r.get("status", ""), False),
                 *("" if r.get(key) is None else f"{r[key]:g}" for _, key in figures)]
        rows.append((cells, _bench_cause(r), "red" if r.get("status") != "ok" else ("bold" if best else "")))
    widths = [max(map(cell_len, column)) for column in zip(*(cells for cells, _, _ in rows))]
    out.line(f"Sweep with {_t(bench.get('peer'), False)}", "bold")
    for cells, cause, style in rows:
        row = "  ".join(c + " " * (w - cell_len(c)) if i < 2 else " " * (w - cell_len(c)) + c
                        for i, (c, w) in enumerate(zip(cells, widths)))
        if cause and cell_len(row) + 2 + cell_len(cause) <= out.width:
            row, cause = f"{row}  {cause}", ""
        out.terminal.print([(row.rstrip(), style)])
        if cause:
            out.line(cause, style, "    ")
    out.blank()


def _bench_cause(result: dict) -> str:
    return _t((result.get("verdict") or {}).get("cause") or "", False)


def _combo_label(r: dict) -> str:
    return f"{r.get('tool')} qp={r.get('qp')}" + (f" size={r['size']}" if r.get("size") is not None else "")


def _verdict(d: Diagnosis, out: _Out) -> None:
    v = d.verdict
    title = out.say(f"status-{v.status}")
    if v.cause and v.status != "ok":
        title += f"  {_t(v.cause)}"
    if v.confidence in ("high", "medium", "low"):
        title += "  (" + out.say("confidence", level=out.say(f"confidence-{v.confidence}")) + ")"
    out.line(title, STATUS_STYLE[v.status])
    out.line(_t(v.summary), "", "  ")
    if v.fix:
        out.line(_t(v.fix), "green", "  ", head=(out.say("fix") + ": ", "green"))
    if v.candidates:
        out.line(_t(", ".join(v.candidates)), "magenta", "  ", head=(out.say("possible-causes") + ": ", "magenta"))
    for step in v.next_steps[:3]:
        out.line(_t(step), "", "  ", head=(out.say("next") + ": ", ""))
    runs = _runs_line(d, out)
    if runs:
        out.line(runs, "dim", "  ")
    for note in d.notes:
        out.line(_t(note), "dim", "  ", head=(out.say("note") + ": ", "dim"))
    out.blank()


def _ladder(d: Diagnosis, out: _Out) -> None:
    out.line(out.say("ladder"), "bold")
    column = min(34, max((cell_len(_t(r.title)) for r in d.rungs), default=0) + 2)
    for r in d.rungs:
        mark, style = RUNG.get(r.state, ("unseen", ""))
        title = _t(r.title)
        pad = " " * max(1, column - cell_len(title))
        lead = f"  {out.marks[mark]} "
        out.line(_t(r.detail), "dim", lead, rest=" " * (cell_len(lead) + column),
                 head=(title + pad, "bold" if r.state == "failed" else ""))
    out.blank()


def render(d: Diagnosis, terminal: Terminal, verbose: bool = False, lang: Optional[str] = None) -> None:
    out = _Out(terminal, lang)
    _verdict(d, out)
    if d.bench:
        _bench_table(d.bench, out)
    if d.rungs:
        _ladder(d, out)
    live: List[Finding] = [f for f in d.findings if f.explained_by is None]
    explained = [f for f in d.findings if f.explained_by is not None]
    if live:
        out.line(out.say("findings"), "bold")
        _findings(live, out, verbose)
    if explained:
        out.line(f"({len(explained)})", "dim", head=(out.say("explained-above") + " ", "bold"))
        if verbose:
            _findings(explained, out, verbose)
        else:
            _explained_lines(explained, out)
        out.blank()


def _findings(findings: List[Finding], out: _Out, verbose: bool) -> None:
    """Each finding in full, up to PER_RULE of one rule; one line counts the rest of each rule."""
    seen: Counter = Counter()
    for f in findings:
        seen[f.rule] += 1
        if seen[f.rule] <= PER_RULE:
            _finding(f, out, verbose)
    left = [(rule, n - PER_RULE) for rule, n in seen.items() if n > PER_RULE]
    for rule, n in left:
        out.line(out.say("more-of-rule", n=f"{n:,}", rule=_t(rule)), "dim", "  ", head=(out.marks["more"] + " ", "dim"))
    if left:
        out.blank()


def _explained_lines(explained: List[Finding], out: _Out) -> None:
    """One line per rule and the finding that explains it, with a count when several runs repeat it."""
    groups: Dict[Tuple[str, str], List[Finding]] = {}
    for f in explained:
        groups.setdefault((f.rule, f.explained_by or ""), []).append(f)
    for (rule, by), fs in groups.items():
        mark, _ = SEVERITY.get(fs[0].severity, ("unseen", ""))
        times = f" ({out.marks['times']}{len(fs):,})" if len(fs) > 1 else ""
        out.line(f"{_t(rule)}: {_t(fs[0].title)}{times}  {out.marks['back']} {_t(by)}", "dim", "  ",
                 head=(out.marks[mark] + " ", "dim"))
