"""Text the report quotes: fixes (prose with commands to copy), evidence with the lines around it, the raw
inputs and the raw facts.

Raw logs and evidence context come from two optional document fields (see docs/html-report.md):
`inputs[].excerpt` (the kept lines of each input, line 1 first) and `evidence[].context`
(`{"first": N, "lines": [...]}`, the lines around the quoted one). Without them the report shows the quoted
line alone and says that the raw text is not in the result.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rdmadoctor.render.html.values import _d, _s

CONTEXT = 3                # lines shown before and after a quoted line
MAX_RAW_LINES = 5000       # lines of one input shown in the raw log section
MAX_LINE_CHARS = 2000      # characters of one line shown (the rest is cut, and says so)
MAX_RAW_FACTS = 400_000    # characters of the raw facts JSON shown

_COMMAND_START = re.compile(
    r"^(?:sudo\s+)?(?:ib_\w+|ibv_\w+|rping|rdma|ip|nft|modprobe|ulimit|systemctl|ss|nc|firewall-cmd|show_gids|"
    r"ibstat|sminfo|ls|lsmod|rdmadoctor|apt|dnf|docker|kubectl|pkill|echo|sysctl|mlnx\w*|cma_roce_\w+)\b")


# -- fix text: prose with commands ---------------------------------------------------------------------

def fix_segments(text: Any) -> List[Dict[str, str]]:
    """'Run X: `cmd a` or b: ib_write_bw -q 2' -> text / code segments; code gets a copy button."""
    text = _s(text)
    segments: List[Dict[str, str]] = []
    parts = text.split("`")
    if len(parts) % 2 == 0:            # an unpaired backtick: take it literally
        parts = [text]
    for i, part in enumerate(parts):
        if not part:
            continue
        if i % 2 == 1:
            segments.append({"kind": "code", "text": part})
            continue
        starts = [0] + [m.end() for m in re.finditer(r":\s+", part)]
        at = next((i for i in starts if _COMMAND_START.match(part[i:])), None)
        if at is not None:
            tail = part[at:]
            head = part[:at]
            rest = ""
            cut = re.search(r"\s+\((?=[a-z])", tail)
            if cut:
                tail, rest = tail[:cut.start()], tail[cut.start():]
            else:
                stripped = tail.rstrip(".")
                rest = tail[len(stripped):]
                tail = stripped
            if head:
                segments.append({"kind": "text", "text": head})
            segments.append({"kind": "code", "text": tail})
            if rest:
                segments.append({"kind": "text", "text": rest})
        else:
            segments.append({"kind": "text", "text": part})
    return segments


# -- evidence and excerpts -----------------------------------------------------------------------------

def _mark(line: str, needle: str) -> List[Tuple[str, bool]]:
    """Split `line` into (text, matched) pieces around `needle` (whitespace-tolerant)."""
    needle = (needle or "").strip()
    if not needle:
        return [(line, False)]
    at = line.find(needle)
    if at >= 0:
        return [(line[:at], False), (needle, True), (line[at + len(needle):], False)]
    words = needle.split()
    if words:
        pattern = r"\s+".join(re.escape(w) for w in words)
        m = re.search(pattern, line)
        if m:
            return [(line[:m.start()], False), (m.group(0), True), (line[m.end():], False)]
    return [(line, True)]


def _cut(line: str) -> Tuple[str, bool]:
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS], True
    return line, False


class Sources:
    """The raw text the document carries: per input, its kept lines (when the document has them)."""

    def __init__(self, inputs: Sequence[Dict[str, Any]]):
        self.index: Dict[str, int] = {}
        self.lines: Dict[str, List[str]] = {}
        for i, inp in enumerate(inputs):
            name = _s(inp.get("name"))
            self.index.setdefault(name, i)
            excerpt = inp.get("excerpt")
            if isinstance(excerpt, list):
                self.lines[name] = [_s(x) for x in excerpt]

    def anchor(self, source: str, line: Optional[int]) -> Optional[str]:
        i = self.index.get(source)
        if i is None or not isinstance(line, int):
            return None
        kept = self.lines.get(source)
        if kept is None or line > min(len(kept), MAX_RAW_LINES):
            return None
        return f"src{i}-L{line}"

    def context(self, evidence: Dict[str, Any]) -> List[Dict[str, Any]]:
        """The excerpt rows around one quoted line: [{n, pieces, hit}]; [] when there is no log line."""
        line = evidence.get("line")
        text = _s(evidence.get("text"))
        if not isinstance(line, int) or isinstance(line, bool):
            return []
        ctx = _d(evidence.get("context"))
        first, lines = ctx.get("first"), ctx.get("lines")
        if not (isinstance(first, int) and isinstance(lines, list)):
            kept = self.lines.get(_s(evidence.get("source")))
            if kept is not None and 1 <= line <= len(kept):
                first = max(1, line - CONTEXT)
                lines = kept[first - 1:min(len(kept), line + CONTEXT)]
            else:
                first, lines = line, [text]
        rows = []
        for k, raw in enumerate(lines):
            n = first + k
            shown, cut = _cut(_s(raw))
            hit = n == line
            rows.append({"n": n, "hit": hit, "cut": cut,
                         "pieces": _mark(shown, text) if hit else [(shown, False)]})
        if not any(r["hit"] for r in rows):       # the context did not reach the quoted line
            rows = [{"n": line, "hit": True, "cut": False, "pieces": [(text, True)]}]
        return rows


def evidence_view(ev: Any, sources: Sources) -> Dict[str, Any]:
    ev = _d(ev)
    source = _s(ev.get("source"))
    line = ev.get("line") if isinstance(ev.get("line"), int) else None
    rows = sources.context(ev)
    return {"source": source, "line": line, "text": _s(ev.get("text")), "note": _s(ev.get("note")),
            "rows": rows, "anchor": sources.anchor(source, line),
            "is_fact": not rows}


# -- raw text ------------------------------------------------------------------------------------------

def raw_logs_view(inputs: Sequence[Any], hits: Dict[str, set]) -> List[Dict[str, Any]]:
    out = []
    for i, inp in enumerate(inputs):
        inp = _d(inp)
        name = _s(inp.get("name"))
        excerpt = inp.get("excerpt")
        lines: Optional[List[Dict[str, Any]]] = None
        if isinstance(excerpt, list):
            lines = []
            for k, raw in enumerate(excerpt[:MAX_RAW_LINES]):
                shown, cut = _cut(_s(raw))
                lines.append({"n": k + 1, "text": shown, "cut": cut, "hit": (k + 1) in hits.get(name, set()),
                              "id": f"src{i}-L{k + 1}"})
        total = inp.get("lines")
        kept = len(lines) if lines is not None else 0
        out.append({"name": name, "id": f"src{i}", "lines": lines, "total": total,
                    "bytes": inp.get("bytes"), "decode_errors": inp.get("decode_errors") or 0,
                    "flattened": inp.get("flattened_lines") or 0,
                    "truncated": bool(inp.get("truncated")) or (isinstance(total, int) and lines is not None
                                                                and total > kept)})
    return out


def raw_facts_view(facts: Any) -> Optional[Dict[str, Any]]:
    if not facts:
        return None
    text = json.dumps(facts, indent=2, sort_keys=False, default=str)
    cut = len(text) > MAX_RAW_FACTS
    return {"text": text[:MAX_RAW_FACTS], "cut": cut, "size": len(text)}
