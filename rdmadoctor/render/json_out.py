"""The JSON contract (docs/json-schema.md): versioned by `schema`; additive changes keep the version.

The document stays under MAX_BYTES whatever the input (a soak log of a gigabyte, thousands of files): a run's
result rows are its summary (`row_summary`) and the rows that matter, and what does not fit the budget (excerpt
lines, a run's messages, whole runs, findings, inputs) is left out and counted (`omitted`). Only what can be kept is
converted to dicts: thousands of runs and findings cost what the kept ones do.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Callable, Dict, List, Optional, Tuple

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
        lines: List[str] = []
        used = 0
        for i in range(min(len(s.lines), EXCERPT_LINES)):      # a line at a time: most inputs' share ends early
            line = s.lines[i][:EXCERPT_CHARS]
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
SHARES = {"findings": 0.35, "comparisons": 0.1, "runs": 0.3, "rungs": 0.1, "inputs": 0.1}


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


def _convert(items: List[Any], convert: Callable[[Any], Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Any]]:
    """The first items as dicts, until they take more than MAX_BYTES (no list is kept beyond that: see _fit), and the
    items left unconverted. Thousands of runs or findings are not all converted to be left out."""
    out: List[Dict[str, Any]] = []
    used = 0
    for i, item in enumerate(items):
        if used > MAX_BYTES:
            return out, items[i:]
        out.append(convert(item))
        used += _size(out[-1]) + 2
    return out, []


def _quoted_run(messages, source, quoted) -> bool:
    return any((source, m.get("line") if isinstance(m, dict) else m.line) in quoted for m in messages)


def _shortened(messages: List[Any]) -> List[Any]:
    half = RUN_MESSAGES // 2
    return messages if len(messages) <= RUN_MESSAGES else messages[:half] + messages[-half:]


def _brief_of(run) -> Dict[str, Any]:
    """_brief() of a run not converted to a dict."""
    out = {k: getattr(run, k) for k in ("source", "index", "first_line", "last_line", "side", "tool", "producer",
                                         "label")}
    out["row_summary"] = run.row_summary
    out["command"] = {"text": run.command.text, "line": run.command.line} if run.command else None
    out["messages"] = len(run.messages) + run.messages_dropped
    out["errors"] = sum(1 for m in _shortened(run.messages) if m.kind == "error")
    out["brief"] = True
    return out


def _fit_runs(doc: Dict[str, Any], pending: List[Any], quoted: set, count: Callable[[str, int], None]) -> None:
    """Runs: long message lists shortened, then, when the runs take more than their share, each run not quoted by a
    finding made brief and the later ones left out. `pending`: the runs not converted (beyond MAX_BYTES); `quoted`:
    the lines the findings not converted quote."""
    runs = doc["runs"]
    for run in runs:
        before = run.get("messages_dropped", 0)
        _shorten_messages(run)
        count("run_messages", run.get("messages_dropped", 0) - before)
    for run in pending:
        count("run_messages", max(0, len(run.messages) - RUN_MESSAGES))
    budget = MAX_BYTES * SHARES["runs"]
    if not pending and sum(map(_size, runs)) <= budget:
        return
    quoted = quoted | {(e.get("source"), e.get("line")) for f in doc["findings"] for e in f.get("evidence", [])}
    for i, run in enumerate(runs):
        if not _quoted_run(run.get("messages", []), run.get("source"), quoted):
            runs[i] = _brief(run)
            count("runs_brief", 1)
    used = sum(_size(run) + 2 for run in runs)
    for run in pending:
        brief = not _quoted_run(_shortened(run.messages), run.source, quoted)
        count("runs_brief", int(brief))
        if used <= budget:
            if brief:
                runs.append(_brief_of(run))
            else:
                runs.append(asdict(run))
                _shorten_messages(runs[-1])
            used += _size(runs[-1]) + 2
        else:
            count("runs", 1)
    count("runs", _cap(runs, budget))


def _fit(doc: Dict[str, Any], pending: Dict[str, List[Any]], quoted: set) -> None:
    """Leave out what does not fit MAX_BYTES: long message lists, then the later items of each list beyond its
    share (runs become brief first, the runs a finding quotes kept whole), then the excerpts, then the lines
    around each quoted line. `pending`: the items of each list not converted (beyond MAX_BYTES, and so left out);
    `quoted`: the lines the findings not converted quote."""
    if not any(pending.values()) and _size(doc) <= MAX_BYTES:
        return
    omitted: Dict[str, int] = {}

    def count(key: str, n: int) -> None:
        if n:
            omitted[key] = omitted.get(key, 0) + n

    _fit_runs(doc, pending.get("runs", []), quoted, count)
    for key in ("findings", "comparisons", "rungs", "inputs"):
        count(key, _cap(doc[key], MAX_BYTES * SHARES[key]) + len(pending.get(key, [])))
    if _size(doc) > MAX_BYTES:
        _drop_excerpts(doc, count)
    if _size(doc) > MAX_BYTES:
        _drop_evidence_context(doc, count)
    doc["omitted"] = omitted


def _drop_excerpts(doc: Dict[str, Any], count: Callable[[str, int], None]) -> None:
    for inp in doc["inputs"]:
        count("excerpt_lines", len(inp["excerpt"]))
        inp["excerpt"] = []


def _drop_evidence_context(doc: Dict[str, Any], count: Callable[[str, int], None]) -> None:
    """The lines around each line a finding or a rung quotes (the quoted line stays)."""
    for item in doc["findings"] + doc["rungs"]:
        for evidence in item.get("evidence", []):
            if evidence.pop("context", None) is not None:
                count("evidence_context", 1)


def to_dict(diagnosis: Diagnosis) -> Dict[str, Any]:
    by_name = {s.name: s for s in diagnosis.sources}
    excerpts = _excerpts(diagnosis.sources)
    findings, more_findings = _convert(diagnosis.findings, lambda f: _with_context(f, by_name))
    rungs, more_rungs = _convert(diagnosis.rungs, lambda r: _with_context(r, by_name))
    runs, more_runs = _convert(diagnosis.runs, asdict)
    comparisons, more_comparisons = _convert(diagnosis.comparisons, asdict)
    doc = {
        "schema": SCHEMA,
        "command": diagnosis.command,
        "rdmadoctor": __version__,
        "lang": diagnosis.lang,
        "verdict": asdict(diagnosis.verdict),
        "findings": findings,
        "rungs": rungs,
        "comparisons": comparisons,
        "runs": runs,
        "inputs": [{"name": s.name, "lines": s.total_lines, "bytes": s.bytes_read, "decode_errors": s.decode_errors,
                    "flattened_lines": s.flattened, "truncated": s.truncated, "compression": s.compression,
                    "excerpt": excerpt}
                   for s, excerpt in zip(diagnosis.sources, excerpts)],
        "link_rate_gbps": diagnosis.link_rate_gbps,
        "facts": diagnosis.facts,
        "bench": diagnosis.bench,
        "notes": diagnosis.notes,
    }
    quoted = {(e.source, e.line) for f in more_findings for e in f.evidence}      # a run they quote is kept whole
    _fit(doc, {"findings": more_findings, "rungs": more_rungs, "runs": more_runs, "comparisons": more_comparisons},
         quoted)
    return doc


def dumps(document: Dict[str, Any]) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"


def render(diagnosis: Diagnosis) -> str:
    return dumps(to_dict(diagnosis))
