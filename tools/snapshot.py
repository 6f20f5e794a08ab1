"""What rdmadoctor concludes from every fixture, as one JSON document, and the difference between two.

    python tools/snapshot.py save OUT.json          # parse and diagnose every fixture
    python tools/snapshot.py diff OLD.json NEW.json # run by run, verdict by verdict

A refactoring or a faster parser must leave this unchanged: the same runs (side, tool, lines, header,
addresses, result rows, messages) and the same verdict for every log fixture (fixtures/real,
fixtures/lab, fixtures/handwritten) and every recorded facts file (check), and what the run's parameters
(views/params.py) and features (views/features.py) answer.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent
LOG_NAMES = ("server.log", "client.log", "paste.log")


def _value(value: Any) -> Any:
    """A parameter's or a feature's answer as comparable JSON (records and rows become dicts)."""
    from dataclasses import asdict, is_dataclass
    if is_dataclass(value) and not isinstance(value, type):
        return _value(asdict(value))
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, float) and value != value:
        return "nan"
    return value


def _views(run: Any, runs: List[Any]) -> Dict[str, Any]:
    """What views/params.py and views/features.py answer for the run: a new row representation must keep them."""
    from rdmadoctor.views import features, params
    ctx: Dict[str, Any] = {"runs": runs, "link_rate_gbps": 100.0}
    out: Dict[str, Any] = {}
    for name in params.PARAMETERS:
        v = params.read(run, name)
        out[f"param.{name}"] = None if v is None else _value([v.value, v.source, v.line, v.text])
    for name in features.FEATURES:
        out[f"feature.{name}"] = _value(features.feature(run, name, ctx))
    return out


def _run(run: Any, runs: List[Any]) -> Dict[str, Any]:
    rows = run.results
    return {
        "views": _views(run, runs),
        "source": Path(run.source).name, "index": run.index, "side": run.side, "tool": run.tool,
        "lines": [run.first_line, run.last_line],
        "command": run.command.text if run.command else None,
        "header": {k: v.value for k, v in sorted(run.header.items())},
        "addresses": [[a.role, a.qpn, a.gid] for a in run.addresses],
        "rows": len(rows) + run.results_dropped,
        "first_row": [rows[0].size, rows[0].iterations] if rows else None,
        "last_row": [rows[-1].size, rows[-1].iterations] if rows else None,
        "messages": [[m.id, m.line] for m in run.messages],
        "messages_dropped": run.messages_dropped,
    }


def _verdict(diagnosis: Any) -> Dict[str, Any]:
    v = diagnosis.verdict
    return {"status": v.status, "cause": v.cause, "rule": v.rule, "confidence": v.confidence,
            "findings": sorted({f.rule for f in diagnosis.findings})}


def log_sets() -> Dict[str, List[Path]]:
    sets: Dict[str, List[Path]] = {}
    for base in ("real", "handwritten"):
        for d in sorted((ROOT / "fixtures" / base).iterdir()):
            logs = [d / n for n in LOG_NAMES if (d / n).is_file()]
            if logs:
                sets[f"{base}/{d.name}"] = logs
    for meta in sorted((ROOT / "fixtures" / "lab").glob("*/*/meta.json")):
        d = meta.parent
        logs = [d / n for n in ("server.log", "client.log") if (d / n).is_file()]
        if logs:
            sets[str(d.relative_to(ROOT / "fixtures"))] = logs
    return sets


def save() -> Dict[str, Any]:
    from rdmadoctor.engine import diagnose
    from rdmadoctor.collectors import load_facts
    from rdmadoctor.logparse.streams import parse_paths
    out: Dict[str, Any] = {"explain": {}, "check": {}}
    for name, logs in log_sets().items():
        parsed = parse_paths([str(p) for p in logs])
        d = diagnose.explain(parsed)
        out["explain"][name] = {"verdict": _verdict(d), "runs": [_run(r, parsed.runs) for r in parsed.runs]}
    for path in sorted((ROOT / "fixtures").rglob("*.json")):
        if path.name == "meta.json" or "bench" in path.parts:
            continue
        try:
            facts = load_facts(path)
        except Exception:       # noqa: BLE001 - not a facts file
            continue
        out["check"][str(path.relative_to(ROOT / "fixtures"))] = _verdict(diagnose.check(facts))
    return out


def diff(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    lines = []
    for kind in ("explain", "check"):
        for name in sorted(set(old[kind]) | set(new[kind])):
            a, b = old[kind].get(name), new[kind].get(name)
            if a == b:
                continue
            if a is None or b is None:
                lines.append(f"{kind} {name}: {'added' if a is None else 'removed'}")
                continue
            va, vb = (a.get("verdict", a), b.get("verdict", b))
            if va != vb:
                lines.append(f"{kind} {name}: verdict {va} -> {vb}")
            for i, (ra, rb) in enumerate(zip(a.get("runs", []), b.get("runs", []))):
                for key in sorted(set(ra) | set(rb)):
                    if ra.get(key) != rb.get(key):
                        lines.append(f"{kind} {name} run {i} {key}: {ra.get(key)} -> {rb.get(key)}")
            if len(a.get("runs", [])) != len(b.get("runs", [])):
                lines.append(f"{kind} {name}: {len(a['runs'])} runs -> {len(b['runs'])}")
    return lines


def main(argv: List[str]) -> int:
    if len(argv) == 2 and argv[0] == "save":
        Path(argv[1]).write_text(json.dumps(save(), indent=1, sort_keys=True, default=str))
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        changes = diff(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()))
        print("\n".join(changes) if changes else "no change")
        return 1 if changes else 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
