"""bench's sweep: its charts and its table of combinations."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from rdmadoctor.render import svg
from rdmadoctor.render.html.values import _d, _l, _num, _s


def bench_view(bench: Any, rate: Optional[float]) -> Optional[Dict[str, Any]]:
    """bench's sweep: bandwidth and message rate against size, one line per QP count, the best combination
    marked, failed combinations with the cause their own logs gave."""
    bench = _d(bench)
    rows = [_d(r) for r in _l(bench.get("results"))]
    if not rows:
        return None
    best = _s(bench.get("best"))
    charts = []
    for metric, title, unit in (("bw_avg_gbps", "Bandwidth", "Gb/s"), ("msg_rate_mpps", "Message rate", "Mpps"),
                                ("lat_typical_us", "Latency", "usec")):
        series: Dict[str, List[Dict[str, Any]]] = {}
        for r in rows:
            value = _num(r.get(metric))
            if r.get("status") == "ok" and value is not None and value > 0 and isinstance(r.get("size"), int):
                series.setdefault(f"{_s(r.get('tool'))} qp={r.get('qp')}", []).append(
                    {"size": r["size"], "value": value})
        if series:
            kind = "bw" if metric == "bw_avg_gbps" else ("lat" if metric == "lat_typical_us" else "rate")
            chart = svg.chart([{"label": k, "unit": unit, "points": v} for k, v in series.items()], kind=kind,
                              link_rate_gbps=rate if kind == "bw" else None, title=f"{title} ({unit})")
            if chart:
                charts.append({"kind": kind, "unit": unit, "title": f"{title} against message size, one line per QP "
                                                                    f"count ({unit})", "svg": chart})
    table = []
    for r in rows:
        label = f"{_s(r.get('tool'))} qp={r.get('qp')}" + (f" size={r.get('size')}" if r.get("size") else "")
        verdict = _d(r.get("verdict"))
        table.append({"label": label, "best": label == best, "status": _s(r.get("status")),
                      "bw": _num(r.get("bw_avg_gbps")), "rate": _num(r.get("msg_rate_mpps")),
                      "lat": _num(r.get("lat_typical_us")), "seconds": _num(r.get("seconds")),
                      "cause": _s(verdict.get("cause")), "summary": _s(verdict.get("summary"))})
    return {"peer": _s(bench.get("peer")), "best": best, "charts": charts, "rows": table,
            "failed": sum(1 for r in table if r["status"] != "ok"), "interrupted": bool(bench.get("interrupted"))}
