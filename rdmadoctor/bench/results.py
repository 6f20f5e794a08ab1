"""A bench sweep on disk: JSON for --save/--compare, CSV for spreadsheets."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, Union

from rdmadoctor.runtime import jsonio
from rdmadoctor.runtime.files import write_private
from rdmadoctor.views.bench import SCHEMA, BenchResult

CSV_COLUMNS = ("tool", "qp", "size", "status", "bw_avg_gbps", "bw_peak_gbps", "msg_rate_mpps", "lat_typical_us",
               "lat_avg_us", "seconds", "cause", "summary")


def save_json(result: BenchResult, path: Union[str, Path]) -> None:
    """Raises OSError (runtime/files.py: mode 0600, never through a planted name)."""
    write_private(path, json.dumps(result.to_dict(), indent=2) + "\n")


def save_csv(result: BenchResult, path: Union[str, Path]) -> None:
    write_private(path, to_csv(result))


def to_csv(result: BenchResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for r in result.results:
        verdict = r.verdict or {}
        writer.writerow([r.tool, r.qp, r.size if r.size is not None else "", r.status,
                         *("" if v is None else v for v in (r.bw_avg_gbps, r.bw_peak_gbps, r.msg_rate_mpps,
                                                           r.lat_typical_us, r.lat_avg_us)),
                         round(r.seconds, 2), verdict.get("cause") or "", verdict.get("summary") or ""])
    return out.getvalue()


class BenchFileError(ValueError):
    pass


def load_json(path: Union[str, Path]) -> Dict[str, Any]:
    """An earlier `bench --save`, checked against rdmadoctor/schemas/bench.schema.json; BenchFileError (one
    line) for anything else."""
    try:
        doc = jsonio.read(path, str(path))
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise BenchFileError(f"{path}: not a bench result (expected \"schema\": \"{SCHEMA}\")")
        return jsonio.validate(doc, "bench", str(path))
    except jsonio.JsonInputError as exc:
        raise BenchFileError(str(exc)) from None
