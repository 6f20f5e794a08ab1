"""The JSON contract (docs/json-schema.md): versioned by `schema`; additive changes keep the version."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Dict

from rdmadoctor import __version__
from rdmadoctor.model import Diagnosis

SCHEMA = "rdmadoctor/1"


def to_dict(diagnosis: Diagnosis) -> Dict[str, Any]:
    return {
        "schema": SCHEMA,
        "command": diagnosis.command,
        "rdmadoctor": __version__,
        "verdict": asdict(diagnosis.verdict),
        "findings": [asdict(f) for f in diagnosis.findings],
        "rungs": [asdict(r) for r in diagnosis.rungs],
        "comparisons": diagnosis.comparisons,
        "runs": [asdict(r) for r in diagnosis.runs],
        "inputs": [{"name": s.name, "lines": s.total_lines, "bytes": s.bytes_read, "decode_errors": s.decode_errors,
                    "flattened_lines": s.flattened, "truncated": s.truncated} for s in diagnosis.sources],
        "facts": diagnosis.facts,
        "notes": diagnosis.notes,
    }


def render(diagnosis: Diagnosis) -> str:
    return json.dumps(to_dict(diagnosis), indent=2, default=str) + "\n"
