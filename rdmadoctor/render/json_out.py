"""The JSON contract (docs/json-schema.md): versioned by `schema`; additive changes keep the version."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Dict, Optional

from rdmadoctor import __version__
from rdmadoctor.model import Diagnosis, SourceText

SCHEMA = "rdmadoctor/1"
EXCERPT_LINES = 5000     # lines of each input the result carries (the HTML report's raw log)
EXCERPT_CHARS = 4096     # characters kept of one such line
CONTEXT_LINES = 3        # lines before and after a quoted log line (evidence[].context)


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


def to_dict(diagnosis: Diagnosis) -> Dict[str, Any]:
    by_name = {s.name: s for s in diagnosis.sources}
    return {
        "schema": SCHEMA,
        "command": diagnosis.command,
        "rdmadoctor": __version__,
        "verdict": asdict(diagnosis.verdict),
        "findings": [_with_context(f, by_name) for f in diagnosis.findings],
        "rungs": [_with_context(r, by_name) for r in diagnosis.rungs],
        "comparisons": diagnosis.comparisons,
        "runs": [asdict(r) for r in diagnosis.runs],
        "inputs": [{"name": s.name, "lines": s.total_lines, "bytes": s.bytes_read, "decode_errors": s.decode_errors,
                    "flattened_lines": s.flattened, "truncated": s.truncated,
                    "excerpt": [line[:EXCERPT_CHARS] for line in s.lines[:EXCERPT_LINES]]}
                   for s in diagnosis.sources],
        "link_rate_gbps": diagnosis.link_rate_gbps,
        "facts": diagnosis.facts,
        "bench": diagnosis.bench,
        "notes": diagnosis.notes,
    }


def dumps(document: Dict[str, Any]) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"


def render(diagnosis: Diagnosis) -> str:
    return dumps(to_dict(diagnosis))
