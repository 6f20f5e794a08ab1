"""The JSON contract (docs/json-schema.md): versioned by `schema`; additive changes keep the version.

The document stays under MAX_BYTES whatever the input (a soak log of a gigabyte, thousands of files): a run's
result rows are its summary (`row_summary`) and the rows that matter, and what does not fit the budget (excerpt
lines, a run's messages, whole runs, findings) is left out and counted (`omitted`).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Dict, List, Optional

from rdmadoctor import __version__
from rdmadoctor.model import Diagnosis, SourceText

SCHEMA = "rdmadoctor/1"
EXCERPT_LINES = 5000     # lines of each input the result carries (the HTML report's raw log)
EXCERPT_CHARS = 4096     # characters kept of one such line
CONTEXT_LINES = 3        # lines before and after a quoted log line (evidence[].context)
MAX_BYTES = 300_000      # the whole document, compact (indented, and the HTML report drawn from it, under 1 MB)
EXCERPT_BUDGET = 1 << 16  # characters of excerpt, all inputs together
RUN_MESSAGES = 40        # messages listed per run once the runs do not fit (the first ones, then the last)


def _context(evidence, by_name: Dict[str, SourceText]) -> Optional[Dict[str, Any]]:
    source = by_name.get(evidence.source)
    if source is None or not isinstance(evidence.line, int) or not 1 <= evidence.line <= len(source.lines):
        return None
    first = max(1, evidence.line - CONTEXT_LINES)
    return {"first": first,
            "lines": [line[:EXCERPT_CHARS] for line in source.lines[first - 1:evidence.line + CONTEXT_LINES]]}


def _with_context(item, by_name: Dict[str, SourceText]) -> Dict[str, Any]:
    """A finding or rung as a dict, each quoted log line with the lines around it."""
    out = asdict(item)
    for evidence, as_dict in zip(item.evidence, out["evidence"]):
        context = _context(evidence, by_name)
        if context is not None:
            as_dict["context"] = context
    return out


def _excerpts(sources: List[SourceText]) -> List[List[str]]:
    """The first lines of each input, within EXCERPT_BUDGET characters shared fairly between the inputs."""
    share = EXCERPT_BUDGET // max(1, len(sources))
    out = []
    for s in sources:
        lines, used = [], 0
        for line in s.lines[:EXCERPT_LINES]:
            line = line[:EXCERPT_CHARS]
            used += len(line) + 4
            if used > share:
                break
            lines.append(line)
        out.append(lines)
    return out


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def _brief(run: Dict[str, Any]) -> Dict[str, Any]:
    """A run reduced to what identifies it and its counts."""
    keep = ("source", "index", "first_line", "last_line", "side", "tool", "producer", "label", "row_summary")
    out = {k: run.get(k) for k in keep}
    out["command"] = {"text": run["command"]["text"], "line": run["command"]["line"]} if run.get("command") else None
    out["messages"] = len(run.get("messages", [])) + run.get("messages_dropped", 0)
    out["errors"] = sum(1 for m in run.get("messages", []) if m.get("kind") == "error")
    out["brief"] = True
    return out


def _shorten_messages(run: Dict[str, Any]) -> None:
    messages = run.get("messages", [])
    if len(messages) > RUN_MESSAGES:
        half = RUN_MESSAGES // 2
        run["messages_dropped"] = run.get("messages_dropped", 0) + len(messages) - RUN_MESSAGES
        run["messages"] = messages[:half] + messages[-half:]


# What each list may take of MAX_BYTES (compact JSON) before its later items are left out (and counted).
SHARES = {"findings": 0.35, "comparisons": 0.1, "runs": 0.3, "rungs": 0.1}


def _cap(items: List[Any], budget: float) -> int:
    """Keeps the first items that fit `budget` bytes; returns how many were left out."""
    used = 0
    for i, item in enumerate(items):
        used += _size(item) + 2
        if used > budget and i > 0:
            left = len(items) - i
            del items[i:]
            return left
    return 0


def _fit(doc: Dict[str, Any]) -> None:
    """Leave out what does not fit MAX_BYTES: long message lists, then the later items of each list beyond its
    share (runs become brief first, the runs a finding quotes kept whole), then the excerpts, then the lines
    around each quoted line."""
    if _size(doc) <= MAX_BYTES:
        return
    omitted: Dict[str, int] = {}

    def count(key: str, n: int) -> None:
        if n:
            omitted[key] = omitted.get(key, 0) + n

    for run in doc["runs"]:
        before = run.get("messages_dropped", 0)
        _shorten_messages(run)
        count("run_messages", run.get("messages_dropped", 0) - before)
    budget = MAX_BYTES * SHARES["runs"]
    runs = doc["runs"]
    if sum(map(_size, runs)) > budget:
        quoted = {(e.get("source"), e.get("line")) for f in doc["findings"] for e in f.get("evidence", [])}
        for i, run in enumerate(runs):
            if not any((run.get("source"), m.get("line")) in quoted for m in run.get("messages", [])):
                runs[i] = _brief(run)
                count("runs_brief", 1)
        count("runs", _cap(runs, budget))
    for key in ("findings", "comparisons", "rungs"):
        count(key, _cap(doc[key], MAX_BYTES * SHARES[key]))
    if _size(doc) > MAX_BYTES:
        for inp in doc["inputs"]:
            count("excerpt_lines", len(inp["excerpt"]))
            inp["excerpt"] = []
    if _size(doc) > MAX_BYTES:
        for item in doc["findings"] + doc["rungs"]:
            for evidence in item.get("evidence", []):
                if evidence.pop("context", None) is not None:
                    count("evidence_context", 1)
    doc["omitted"] = omitted


def to_dict(diagnosis: Diagnosis) -> Dict[str, Any]:
    by_name = {s.name: s for s in diagnosis.sources}
    excerpts = _excerpts(diagnosis.sources)
    doc = {
        "schema": SCHEMA,
        "command": diagnosis.command,
        "rdmadoctor": __version__,
        "verdict": asdict(diagnosis.verdict),
        "findings": [_with_context(f, by_name) for f in diagnosis.findings],
        "rungs": [_with_context(r, by_name) for r in diagnosis.rungs],
        "comparisons": diagnosis.comparisons,
        "runs": [asdict(r) for r in diagnosis.runs],
        "inputs": [{"name": s.name, "lines": s.total_lines, "bytes": s.bytes_read, "decode_errors": s.decode_errors,
                    "flattened_lines": s.flattened, "truncated": s.truncated, "excerpt": excerpt}
                   for s, excerpt in zip(diagnosis.sources, excerpts)],
        "link_rate_gbps": diagnosis.link_rate_gbps,
        "facts": diagnosis.facts,
        "bench": diagnosis.bench,
        "notes": diagnosis.notes,
    }
    _fit(doc)
    return doc


def dumps(document: Dict[str, Any]) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"


def render(diagnosis: Diagnosis) -> str:
    return dumps(to_dict(diagnosis))
