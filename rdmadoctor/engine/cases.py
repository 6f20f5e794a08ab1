"""A rule's own test cases, run: every input under `fires` must make it fire (with evidence and every value of
its title filled in), every input under `quiet` must not; `verdict` is the cause the first firing input must be
diagnosed with. `rdmadoctor rules check` and the test suite both run them.

An input is one of
  * a log: inline text ("--- FILE name ---" starts another file, {{name}} inserts a snippet), or fixture
    paths joined by " + " (a directory stands for its *.log files);
  * facts for check: { input = "facts:<file>" | "tree:<dir>" | "host", with = { "dotted.path" = value },
    peer = "192.0.2.2", log = <a log as above> } (`with` hand-modifies a recording; "@null" is None and
    "@<file>" a JSON file's content);
  * a bench sweep: { results = [[qp, size, gbps], ...], facts = "<facts file>" | "tree:<dir>", link_rate,
    earlier = [[qp, size, gbps]], failed_by_agent = [label, summary] } or { sweep = "<recorded sweep>",
    peer_with = {...} }.
Paths are relative to the rule's own directory first, then to the repository's fixtures/.
"""
from __future__ import annotations

import copy
import io
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from rdmadoctor.engine.rules import Rule, Table

REPO_FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
NONE = "none"


class CaseError(Exception):
    """A case that cannot be run (a missing fixture, an unknown snippet)."""


@dataclass
class Outcome:
    rule: str
    kind: str            # fires | quiet
    index: int
    ok: bool
    message: str = ""

    @property
    def name(self) -> str:
        return f"{self.rule}-{self.kind}-{self.index}"


def cases_of(rule: Rule) -> List[Tuple[str, int, Any, Optional[str], Optional[float]]]:
    """(kind, index, input, verdict, link_rate) for each input of each case; `index` counts per kind."""
    out = []
    counters = {"fires": 0, "quiet": 0}
    for case in rule.case:
        for kind in ("fires", "quiet"):
            for spec in case.get(kind, []):
                verdict = case.get("verdict") if kind == "fires" and counters[kind] == 0 else None
                out.append((kind, counters[kind], spec, verdict, case.get("link_rate")))
                counters[kind] += 1
    return out


# -- inputs -------------------------------------------------------------------------------------------------

def _path(name: str, rule: Rule, fixtures: Path) -> Path:
    for base in (Path(rule.directory), fixtures):
        candidate = base / name
        if candidate.exists():
            return candidate
    raise CaseError(f"{rule.id}: fixture {name!r} not found (looked in {rule.directory} and {fixtures})")


def expand(text: str, snippets: Dict[str, str], depth: int = 0) -> str:
    if depth > 5:
        return text

    def one(m: "re.Match[str]") -> str:
        if m.group(1) not in snippets:
            raise CaseError(f"unknown snippet {{{{{m.group(1)}}}}}")
        return expand(snippets[m.group(1)].strip("\n"), snippets, depth + 1)
    return re.sub(r"\{\{(\w+)\}\}", one, text)


def is_inline(spec: str) -> bool:
    return "\n" in spec or spec.lstrip().startswith(("$", "Couldn", " ")) or "{{" in spec


def log_streams(spec: str, rule: Rule, snippets: Dict[str, str], fixtures: Path) -> List[Tuple[str, BinaryIO]]:
    if is_inline(spec):
        text = expand(spec, snippets)
        parts = re.split(r"^--- FILE (\S+) ---$", text, flags=re.M)
        if len(parts) == 1:
            return [("case.log", io.BytesIO(text.encode()))]
        return [(parts[i], io.BytesIO(parts[i + 1].encode())) for i in range(1, len(parts), 2)]
    out: List[Tuple[str, BinaryIO]] = []
    for item in spec.split(" + "):
        path = _path(item.strip(), rule, fixtures)
        files = sorted(path.glob("*.log")) if path.is_dir() else [path]
        out += [(f.name if path.is_dir() else item.strip(), io.BytesIO(f.read_bytes())) for f in files]
    return out


@lru_cache(maxsize=64)
def _facts_json(spec: str, base: str) -> str:
    from rdmadoctor.collectors import collect_facts, load_facts
    from rdmadoctor.collectors.base import CollectContext
    if spec == "host":
        facts = collect_facts(CollectContext(sample_seconds=0))
    elif spec.startswith("facts:"):
        facts = load_facts(Path(base) / spec[6:])
    elif spec.startswith("tree:"):
        facts = collect_facts(CollectContext(root=Path(base) / spec[5:], live=False, sample_seconds=0))
    else:
        raise CaseError(f"facts input {spec!r}: use facts:<file>, tree:<dir> or host")
    return json.dumps(facts)


def facts_of(spec: str, rule: Rule, fixtures: Path) -> Dict[str, Any]:
    if spec == "host":
        return json.loads(_facts_json(spec, ""))
    kind, _, name = spec.partition(":")
    path = _path(name, rule, fixtures)
    return json.loads(_facts_json(f"{kind}:{path.name}", str(path.parent)))


def patched(facts: Dict[str, Any], changes: Dict[str, Any], rule: Rule, fixtures: Path) -> Dict[str, Any]:
    """`changes`: dotted paths into the facts document -> new values (a case's `with`)."""
    for path, value in changes.items():
        if value == "@null":
            value = None
        elif isinstance(value, str) and value.startswith("@"):
            value = json.loads(_path(value[1:], rule, fixtures).read_text())
        node, parts = facts, path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(parts[-1])] = value
        else:
            node[parts[-1]] = value
    return facts


# -- running ------------------------------------------------------------------------------------------------

def _diagnose(rule: Rule, spec: Any, link_rate: Optional[float], table: Table, fixtures: Path):
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_streams
    if isinstance(spec, str):
        return diagnose.explain(parse_streams(log_streams(spec, rule, table.snippets, fixtures)), link_rate,
                                table=table)
    if "input" in spec:
        parsed = parse_streams(log_streams(spec["log"], rule, table.snippets, fixtures)) if spec.get("log") else None
        facts = patched(copy.deepcopy(facts_of(spec["input"], rule, fixtures)), spec.get("with", {}), rule, fixtures)
        return diagnose.check(facts, parsed, spec.get("peer", "192.0.2.2"), table=table)
    return _bench(rule, spec, table, fixtures)


def _combos(rows: Sequence[Sequence[Any]]):
    from rdmadoctor.views.bench import ComboResult
    return [ComboResult("ib_write_bw", qp, size, "ok", 1.0, ["ib_write_bw"], bw_avg_gbps=bw) for qp, size, bw in rows]


def _bench(rule: Rule, spec: Dict[str, Any], table: Table, fixtures: Path):
    from rdmadoctor.engine import diagnose
    from rdmadoctor.views.bench import BenchResult, ComboResult
    if spec.get("sweep"):
        doc = json.loads(_path(spec["sweep"], rule, fixtures).read_text())
        result = BenchResult(doc["peer"], doc["started"], doc["link_rate_gbps"],
                             [ComboResult(**r) for r in doc["results"]], doc["interrupted"], doc["facts"])
        peer = patched(copy.deepcopy(result.facts["peer"]), spec.get("peer_with", {}), rule, fixtures)
        return diagnose.bench(result, result.facts["local"], peer, table=table)
    source = spec["facts"] if spec["facts"].startswith(("tree:", "facts:")) else "facts:" + spec["facts"]
    facts = patched(copy.deepcopy(facts_of(source, rule, fixtures)), spec.get("with", {}), rule, fixtures)
    earlier = BenchResult("192.0.2.2", "", None, _combos(spec["earlier"])).to_dict() if spec.get("earlier") else None
    result = BenchResult("192.0.2.2", "2026-11-29T00:00:00+00:00", spec.get("link_rate"), _combos(spec["results"]))
    if spec.get("failed_by_agent"):
        _, summary = spec["failed_by_agent"]
        result.results.append(ComboResult("ib_write_bw", 2, 65536, "failed", 0.1, ["ib_write_bw"],
                                          verdict={"status": "unknown", "cause": "unknown", "summary": summary}))
    return diagnose.bench(result, facts, None, earlier, table=table)


def run_case(rule: Rule, kind: str, index: int, spec: Any, verdict: Optional[str], link_rate: Optional[float],
             table: Table, fixtures: Path = REPO_FIXTURES) -> Outcome:
    try:
        d = _diagnose(rule, spec, link_rate, table, fixtures)
    except CaseError as exc:
        return Outcome(rule.id, kind, index, False, str(exc))
    fired = [f for f in d.findings if f.rule == rule.id]
    if kind == "quiet":
        return Outcome(rule.id, kind, index, not fired, f"fired on a quiet case: {fired[0].title}" if fired else "")
    if not fired:
        return Outcome(rule.id, kind, index, False, f"did not fire; findings: {[f.rule for f in d.findings]}")
    for f in fired:
        if not f.evidence:
            return Outcome(rule.id, kind, index, False, "fired without evidence")
        if "?" in f.title.replace("(?)", ""):
            return Outcome(rule.id, kind, index, False, f"unfilled value in its title: {f.title}")
    if verdict is not None and (d.verdict.cause or NONE) != verdict:
        return Outcome(rule.id, kind, index, False, f"verdict {d.verdict.cause} ({d.verdict.rule}), not {verdict}")
    return Outcome(rule.id, kind, index, True)


def run_all(table: Table, rules: Optional[Sequence[Rule]] = None, fixtures: Path = REPO_FIXTURES) -> List[Outcome]:
    out = []
    for rule in rules if rules is not None else table.rules:
        for kind, index, spec, verdict, link_rate in cases_of(rule):
            out.append(run_case(rule, kind, index, spec, verdict, link_rate, table, fixtures))
    return out


def coverage(rule: Rule) -> List[str]:
    """What a rule's cases lack: a firing input, a quiet input."""
    kinds = {kind for kind, *_ in cases_of(rule)}
    return [f"no '{k}' case" for k in ("fires", "quiet") if k not in kinds]
