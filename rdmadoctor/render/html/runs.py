"""The runs as the parser read them, and their results drawn against message size."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from rdmadoctor.knowledge.perftest import UNIT_TO_GBPS, is_real_row
from rdmadoctor.render import svg
from rdmadoctor.render.html.text import Sources
from rdmadoctor.render.html.values import _anchor, _d, _l, _num, _s


def run_ok(run: Dict[str, Any]) -> bool:
    """A run that printed results and no error message."""
    return bool(_l(run.get("results"))) and not any(_d(m).get("kind") == "error" for m in _l(run.get("messages")))


def sane_rows(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = []
    for row in _l(run.get("results")):
        row = _d(row)
        if is_real_row(row.get("size"), row.get("iterations")):
            rows.append(row)
    return rows


def _point(row: Dict[str, Any]) -> Optional[Tuple[str, str, Dict[str, Any]]]:
    """(kind, unit, point) for one result row, or None when it has no plottable value."""
    values = _d(row.get("values"))
    unit = _s(row.get("unit"))
    kind = _s(row.get("kind"))
    if kind == "bw":
        avg, peak = _num(values.get("bw_avg")), _num(values.get("bw_peak"))
        if avg is None or avg <= 0:
            return None
        factor = UNIT_TO_GBPS.get(unit)
        if factor is not None:
            avg, peak, unit = avg * factor, (peak * factor if peak is not None else None), "Gb/s"
        return "bw", unit or "?", {"size": row["size"], "value": avg, "high": peak, "high_label": "peak"}
    if kind in ("lat", "lat_dur"):
        typical = _num(values.get("t_typical"))
        if typical is None:
            typical = _num(values.get("t_avg"))
        if typical is None or typical <= 0:
            return None
        p99 = _num(values.get("t_99"))
        return "lat", unit or "usec", {"size": row["size"], "value": typical, "low": _num(values.get("t_min")),
                                       "low_label": "min", "high": p99, "high_label": "99%"}
    return None


def _run_label(run: Dict[str, Any], names: Dict[str, int]) -> str:
    side = _s(run.get("side"))
    tool = _s(run.get("tool")) or _s(_d(run.get("test_name")).get("value")) or "perftest"
    label = f"{side} · {tool}" if side and side != "unknown" else tool
    source = _s(run.get("source"))
    if names.get(label, 0) > 1 and source:
        label += f" ({source.rsplit('/', 1)[-1]})"
    return label


def link_rate(doc: Dict[str, Any]) -> Optional[float]:
    """The link rate to draw against: the one the diagnosis judged results by (--link-rate or the facts)."""
    for key in ("link_rate_gbps", "link_rate"):
        value = _num(doc.get(key))
        if value and value > 0:
            return value
    return None


def charts_view(runs: Sequence[Any], rate: Optional[float]) -> List[Dict[str, Any]]:
    ok = [_d(r) for r in runs if run_ok(_d(r))]
    labels = [_run_label(r, {}) for r in ok]
    counts: Dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for run in ok:
        per: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for row in sane_rows(run):
            got = _point(row)
            if got:
                per.setdefault((got[0], got[1]), []).append(got[2])
        for key, points in per.items():
            groups.setdefault(key, []).append({"label": _run_label(run, counts), "unit": key[1], "points": points})
    charts = []
    for (kind, unit), series in groups.items():
        title = ("Bandwidth" if kind == "bw" else "Latency") + f" ({unit})"
        chart = svg.chart(series, kind=kind, link_rate_gbps=rate, title=title)
        if chart:
            charts.append({"kind": kind, "unit": unit, "title": title, "svg": chart})
    return charts


def runs_view(runs: Sequence[Any], sources: Sources) -> List[Dict[str, Any]]:
    out = []
    for i, run in enumerate(runs):
        run = _d(run)
        header = _d(run.get("header"))
        command = _d(run.get("command"))
        errors = [m for m in (_d(x) for x in _l(run.get("messages"))) if m.get("kind") == "error"]
        rows = []
        for row in _l(run.get("results")):
            row = _d(row)
            values = _d(row.get("values"))
            sane = is_real_row(row.get("size"), row.get("iterations"))
            rows.append({"line": row.get("line"), "kind": _s(row.get("kind")), "size": row.get("size"),
                         "size_label": svg.human_size(row["size"]) if sane else _s(row.get("size")),
                         "iterations": _s(row.get("iterations")), "unit": _s(row.get("unit")),
                         "fields": [(k, _s(v)) for k, v in values.items()],
                         "sane": sane})
        out.append({
            "id": _anchor("run", i), "source": _s(run.get("source")), "side": _s(run.get("side")) or "unknown",
            "side_reason": _s(run.get("side_reason")), "tool": _s(run.get("tool")),
            "test": _s(_d(run.get("test_name")).get("value")),
            "device": _s(_d(header.get("device")).get("value")),
            "command": _s(command.get("text")), "command_line": command.get("line"),
            "lines": f"{run.get('first_line')}–{run.get('last_line')}" if run.get("first_line") else "",
            "label": _s(run.get("label")),
            "header": [(k.replace("_", " "), _s(_d(v).get("value")) if isinstance(v, dict) else _s(v))
                       for k, v in header.items()],
            "addresses": [_d(a) for a in _l(run.get("addresses"))],
            "results": rows, "errors": len(errors),
            "messages": [{"id": _s(m.get("id")), "kind": _s(m.get("kind")), "text": _s(m.get("text")),
                          "line": m.get("line"), "anchor": sources.anchor(_s(m.get("source")) or _s(run.get("source")),
                                                                           m.get("line"))}
                         for m in (_d(x) for x in _l(run.get("messages")))],
            "ok": run_ok(run),
        })
    return out
