"""Each rule fires on its cases and stays quiet on the others (tests/rules/cases.toml), and the table
itself is sound: causes from docs/causes.md, symptoms never named as causes, explains pointing at
rules that exist."""
import io
import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import copy
import json
from functools import lru_cache

from rdmadoctor.collectors import collect_facts, load_facts
from rdmadoctor.collectors.base import CollectContext
from rdmadoctor.engine.diagnose import check, explain
from rdmadoctor.engine import rules as rule_table
from rdmadoctor.logparse import parse_streams

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES = tomllib.loads((ROOT / "tests" / "rules" / "cases.toml").read_text(encoding="utf-8"))
FACT_CASES = tomllib.loads((ROOT / "tests" / "rules" / "fact_cases.toml").read_text(encoding="utf-8"))
BENCH_CASES = tomllib.loads((ROOT / "tests" / "rules" / "bench_cases.toml").read_text(encoding="utf-8"))
SNIPPETS = CASES["snippets"]
TABLE = rule_table.load()
CAUSES = set(re.findall(r"^\| `([a-z0-9-]+)` \|", (ROOT / "docs" / "causes.md").read_text(), re.M))


def expand(text: str, depth: int = 0) -> str:
    if depth > 5:
        return text
    return re.sub(r"\{\{(\w+)\}\}", lambda m: expand(SNIPPETS[m.group(1)].strip("\n"), depth + 1), text)


def streams(spec: str):
    """An inline log ("--- FILE name ---" separated) or fixture paths joined by ' + '."""
    if "\n" in spec or spec.lstrip().startswith(("$", "Couldn", " ")) or "{{" in spec:
        text = expand(spec)
        parts = re.split(r"^--- FILE (\S+) ---$", text, flags=re.M)
        if len(parts) == 1:
            return [("case.log", io.BytesIO(text.encode()))]
        return [(parts[i], io.BytesIO(parts[i + 1].encode())) for i in range(1, len(parts), 2)]
    out = []
    for item in spec.split(" + "):
        path = FIXTURES / item.strip()
        files = sorted(path.glob("*.log")) if path.is_dir() else [path]
        out += [(str(f.relative_to(FIXTURES)), io.BytesIO(f.read_bytes())) for f in files]
    return out


def diagnose(spec: str, link_rate=None):
    return explain(parse_streams(streams(spec)), link_rate_gbps=link_rate)


CASE_PARAMS = [(c["rule"], kind, i, spec, c.get("link_rate"), c.get("verdict"))
               for c in CASES["case"] for kind in ("fires", "quiet") for i, spec in enumerate(c.get(kind, []))]


@pytest.mark.parametrize("rule,kind,index,spec,link_rate,verdict", CASE_PARAMS,
                         ids=[f"{p[0]}-{p[1]}-{p[2]}" for p in CASE_PARAMS])
def test_rule_case(rule, kind, index, spec, link_rate, verdict):
    d = diagnose(spec, link_rate)
    fired = [f for f in d.findings if f.rule == rule]
    if kind == "fires":
        assert fired, f"{rule} did not fire; findings: {[f.rule for f in d.findings]}"
        if verdict is not None and index == 0:
            cause = d.verdict.cause if d.verdict.cause is not None else "none"
            assert cause == verdict, f"verdict {d.verdict}"
        for f in fired:
            assert "?" not in f.title.replace("(?)", ""), f"unfilled value in title: {f.title}"
            assert f.evidence, f"{rule} fired without evidence"
    else:
        assert not fired, f"{rule} fired on a quiet case: {fired[0].title}"


@lru_cache(maxsize=None)
def _facts_of(spec: str) -> str:
    if spec == "host":
        facts = collect_facts(CollectContext(sample_seconds=0))
    elif spec.startswith("facts:"):
        facts = load_facts(FIXTURES / spec[6:])
    elif spec.startswith("tree:"):
        facts = collect_facts(CollectContext(root=FIXTURES / spec[5:], live=False, sample_seconds=0))
    else:
        raise ValueError(spec)
    return json.dumps(facts)


def _patched(value):
    if value == "@null":
        return None
    if isinstance(value, str) and value.startswith("@"):
        return json.loads((FIXTURES / value[1:]).read_text())
    return value


def facts_for(entry) -> dict:
    return patched(json.loads(_facts_of(entry["input"])), entry.get("with", {}))


def patched(facts: dict, changes: dict) -> dict:
    """`changes`: dotted paths into the facts document -> new values (a case's `with`)."""
    for path, value in changes.items():
        node, parts = facts, path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = _patched(value)
        else:
            node[last] = _patched(value)
    return facts


FACT_PARAMS = [(c["rule"], kind, i, entry, c.get("verdict"))
               for c in FACT_CASES["case"] for kind in ("fires", "quiet") for i, entry in enumerate(c.get(kind, []))]


@pytest.mark.parametrize("rule,kind,index,entry,verdict", FACT_PARAMS,
                         ids=[f"{p[0]}-{p[1]}-{p[2]}" for p in FACT_PARAMS])
def test_fact_rule_case(rule, kind, index, entry, verdict):
    parsed = parse_streams(streams(entry["log"])) if entry.get("log") else None
    d = check(copy.deepcopy(facts_for(entry)), parsed, entry.get("peer", "192.0.2.2"))
    fired = [f for f in d.findings if f.rule == rule]
    if kind == "fires":
        assert fired, f"{rule} did not fire; findings: {[f.rule for f in d.findings]}"
        assert all(f.evidence for f in fired)
        for f in fired:
            assert "?" not in f.title, f"unfilled value in title: {f.title}"
        if verdict is not None and index == 0:
            assert d.verdict.cause == verdict, f"verdict {d.verdict}"
    else:
        assert not fired, f"{rule} fired on a quiet case: {fired[0].title}"


def _bench_result(rows, link_rate=None):
    from rdmadoctor.bench.results import BenchResult, ComboResult
    combos = [ComboResult("ib_write_bw", qp, size, "ok", 1.0, ["ib_write_bw"], bw_avg_gbps=bw) for qp, size, bw in rows]
    return BenchResult("192.0.2.2", "2026-11-29T00:00:00+00:00", link_rate, combos)


def _recorded_sweep(name):
    from rdmadoctor.bench.results import BenchResult, ComboResult
    doc = json.loads((FIXTURES / name).read_text())
    return BenchResult(doc["peer"], doc["started"], doc["link_rate_gbps"], [ComboResult(**r) for r in doc["results"]],
                       doc["interrupted"], doc["facts"])


BENCH_PARAMS = [(c["rule"], kind, i, entry, c.get("verdict"))
                for c in BENCH_CASES["case"] for kind in ("fires", "quiet") for i, entry in enumerate(c.get(kind, []))]


@pytest.mark.parametrize("rule,kind,index,entry,verdict", BENCH_PARAMS,
                         ids=[f"{p[0]}-{p[1]}-{p[2]}" for p in BENCH_PARAMS])
def test_bench_rule_case(rule, kind, index, entry, verdict):
    from rdmadoctor.engine.diagnose import bench
    if entry.get("sweep"):
        # a sweep recorded in the lab, both sides' logs and both hosts' facts as they were
        result = _recorded_sweep(entry["sweep"])
        d = bench(result, result.facts["local"], patched(copy.deepcopy(result.facts["peer"]), entry.get("peer_with", {})))
        fired = [f for f in d.findings if f.rule == rule]
        assert bool(fired) == (kind == "fires"), [(f.rule, f.title) for f in d.findings]
        assert all(f.evidence and "?" not in f.title for f in fired), [f.title for f in fired]
        if verdict is not None and kind == "fires" and index == 0:
            assert d.verdict.cause == verdict and d.verdict.rule == rule, d.verdict
        return
    spec = entry["facts"] if entry["facts"].startswith("tree:") else "facts:" + entry["facts"]
    facts = facts_for({"input": spec, "with": entry.get("with", {})})
    earlier = _bench_result(entry["earlier"]).to_dict() if entry.get("earlier") else None
    result = _bench_result(entry["results"], entry.get("link_rate"))
    if entry.get("failed_by_agent"):
        from rdmadoctor.bench.results import ComboResult
        label, summary = entry["failed_by_agent"]
        result.results.append(ComboResult("ib_write_bw", 2, 65536, "failed", 0.1, ["ib_write_bw"],
                                          verdict={"status": "unknown", "cause": "unknown", "summary": summary}))
    d = bench(result, facts, None, earlier)
    fired = [f for f in d.findings if f.rule == rule]
    if kind == "fires":
        assert fired and all(f.evidence for f in fired), [f.rule for f in d.findings]
        assert all("?" not in f.title for f in fired), [f.title for f in fired]
        if verdict is not None and index == 0:
            assert d.verdict.cause == verdict, d.verdict
    else:
        assert not fired, fired[0].title


def test_every_rule_has_a_firing_and_a_quiet_case():
    covered = {}
    for case in CASES["case"] + FACT_CASES["case"] + BENCH_CASES["case"]:
        covered.setdefault(case["rule"], set()).update(k for k in ("fires", "quiet") if case.get(k))
    missing = [r.id for r in TABLE if covered.get(r.id) != {"fires", "quiet"}]
    assert not missing, f"rules without both a firing and a quiet case: {missing}"
    unknown = set(covered) - {r.id for r in TABLE}
    assert not unknown, f"cases for rules that do not exist: {unknown}"


def test_rule_table_is_sound():
    for rule in TABLE:
        assert rule.cause in CAUSES, f"{rule.id}: cause {rule.cause} is not in docs/causes.md"
        if rule.kind == "symptom":
            assert rule.cause == "unknown", f"{rule.id}: a symptom names no cause"
            assert all(c in CAUSES for c in rule.candidates), rule.id
        else:
            assert rule.cause != "unknown", f"{rule.id}: a cause rule must name a cause"
            assert rule.fix, rule.id


def test_rule_errors_are_reported_with_file_and_rule(tmp_path):
    (tmp_path / "bad.toml").write_text('[[rule]]\nid = "X-1"\ncause = "port-down"\nseverity = "fatal"\n'
                                       'title = "t"\nscope = "run"\nwhy = "w"\nfix = ["f"]\nwhen = { message = "D05" }\n')
    with pytest.raises(rule_table.RuleError, match="bad.toml: rule X-1: severity"):
        rule_table.load(str(tmp_path))
    (tmp_path / "bad.toml").write_text('[[rule]]\nid = "X-1"\ncause = "port-down"\nseverity = "fail"\n'
                                       'title = "t"\nscope = "run"\nwhy = "w"\nfix = ["f"]\nwhen = { mesage = "D05" }\n')
    with pytest.raises(rule_table.RuleError, match="unknown condition key"):
        rule_table.load(str(tmp_path))


@pytest.mark.parametrize("spec, rate", [("tree:sysfs/handmade-mlx5-pcie-degraded", 100.0),
                                        ("facts:facts/lab/bookworm/facts-root.json", None)])
def test_check_judges_against_the_hardware_port_rate_only(spec, rate):
    """A ConnectX port's rate is the reference line of check's charts; Soft-RoCE's nominal 2.5 Gb/s is not."""
    from rdmadoctor.engine.diagnose import check
    facts = json.loads(_facts_of(spec))
    assert check(facts).link_rate_gbps == rate
