"""What a bench sweep recorded, one result per combination, and what is derived from it: each combination's
numbers (from the parser reading both sides' real output), the best one, and regressions against an
earlier sweep. rdmadoctor.bench.results saves and loads it."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from rdmadoctor.knowledge.perftest import UNIT_TO_GBPS
from rdmadoctor.views.params import real_rows
from rdmadoctor.model import Run

SCHEMA = "rdmadoctor-bench/1"


@dataclass
class ComboResult:
    tool: str
    qp: int
    size: Optional[int]
    status: str                          # ok | failed | interrupted
    seconds: float
    argv: List[str]
    bw_avg_gbps: Optional[float] = None
    bw_peak_gbps: Optional[float] = None
    msg_rate_mpps: Optional[float] = None
    lat_typical_us: Optional[float] = None
    lat_avg_us: Optional[float] = None
    verdict: Optional[Dict[str, Any]] = None     # explain's verdict for a failed combination
    client_log: str = ""
    server_log: str = ""

    @property
    def key(self):
        return (self.tool, self.qp, self.size)

    @property
    def label(self) -> str:
        return f"{self.tool} qp={self.qp}" + (f" size={self.size}" if self.size is not None else "")


def metrics(run: Optional[Run]) -> Dict[str, Optional[float]]:
    """The client's measured numbers (its own row: the server of a unidirectional test shows them too)."""
    out: Dict[str, Optional[float]] = {"bw_avg_gbps": None, "bw_peak_gbps": None, "msg_rate_mpps": None,
                                       "lat_typical_us": None, "lat_avg_us": None}
    if run is None:
        return out
    rows = real_rows(run)
    if not rows:
        return out
    row = max(rows, key=lambda r: r.values.get("bw_avg", r.values.get("t_avg", 0)) or 0)
    if row.kind == "bw":
        factor = UNIT_TO_GBPS.get(row.unit or "MB/sec", UNIT_TO_GBPS["MB/sec"])
        out["bw_avg_gbps"] = _finite(row.values.get("bw_avg"), factor)
        out["bw_peak_gbps"] = _finite(row.values.get("bw_peak"), factor)
        out["msg_rate_mpps"] = _finite(row.values.get("msg_rate"))
    else:
        out["lat_typical_us"] = _finite(row.values.get("t_typical"))
        out["lat_avg_us"] = _finite(row.values.get("t_avg"))
    return out


def _finite(value: Optional[float], factor: float = 1.0) -> Optional[float]:
    if value is None or math.isnan(value):
        return None
    return float(f"{value * factor:.6g}")          # six significant digits: Mpps can be 0.000231


@dataclass
class BenchResult:
    peer: str
    started: str
    link_rate_gbps: Optional[float]
    results: List[ComboResult] = field(default_factory=list)
    interrupted: bool = False
    facts: Dict[str, Any] = field(default_factory=dict)     # {"local": facts, "peer": facts} when read

    def best(self) -> Optional[ComboResult]:
        done = [r for r in self.results if r.status == "ok" and r.bw_avg_gbps is not None]
        return max(done, key=lambda r: r.bw_avg_gbps or 0.0) if done else None

    def to_dict(self) -> Dict[str, Any]:
        best = self.best()
        return {"schema": SCHEMA, "peer": self.peer, "started": self.started, "link_rate_gbps": self.link_rate_gbps,
                "interrupted": self.interrupted, "best": best.label if best else None,
                "results": [asdict(r) for r in self.results], "facts": self.facts}


def regressions(current: BenchResult, earlier: Dict[str, Any], threshold: float) -> List[Dict[str, Any]]:
    """Combinations that got slower than `threshold` (a fraction: 0.1 = 10%) against an earlier sweep."""
    before = {(r["tool"], r["qp"], r["size"]): r for r in earlier.get("results", [])}
    out = []
    for r in current.results:
        old = before.get(r.key)
        if old is None:
            continue
        for metric, worse in (("bw_avg_gbps", lambda new, prev: new < prev * (1 - threshold)),
                              ("msg_rate_mpps", lambda new, prev: new < prev * (1 - threshold)),
                              ("lat_typical_us", lambda new, prev: new > prev * (1 + threshold))):
            new_value, old_value = getattr(r, metric), old.get(metric)
            if new_value is not None and old_value and worse(new_value, old_value):
                out.append({"label": r.label, "metric": metric, "before": old_value, "now": new_value,
                            "change": f"{(new_value - old_value) / old_value * 100:+.0f}%",
                            "threshold": f"{threshold * 100:.0f}%"})
        if r.status != "ok" and old.get("status") == "ok":
            out.append({"label": r.label, "metric": "status", "before": "ok", "now": r.status,
                        "change": "now fails", "threshold": f"{threshold * 100:.0f}%"})
    return out
