"""engine/conditions.needed_messages and evaluate.find's use of it: a rule is left untried only where it cannot hold,
so every finding is the one trying every rule everywhere gives."""
from __future__ import annotations

from pathlib import Path

import pytest

from rdmadoctor.engine import diagnose, evaluate, rules
from rdmadoctor.engine.conditions import needed_messages
from rdmadoctor.logparse.streams import parse_paths

ROOT = Path(__file__).resolve().parents[2]


def test_a_message_condition_needs_its_ids_in_its_run_or_in_the_input():
    assert needed_messages({"message": "C02"}) == (("run", frozenset({"C02"})),)
    assert needed_messages({"message": ["C02", "C03"], "of": "run"}) == (("run", frozenset({"C02", "C03"})),)
    assert needed_messages({"message": "C02", "of": "other"}) == (("input", frozenset({"C02"})),)
    assert needed_messages({"message": "*", "kind": "error"}) == ()


def test_all_needs_each_part_any_needs_one_of_its_parts_and_not_needs_nothing():
    both = {"all": [{"message": "A"}, {"differ": "num_qps"}, {"message": "B", "of": "input"}]}
    assert needed_messages(both) == (("run", frozenset({"A"})), ("input", frozenset({"B"})))
    either = {"any": [{"message": "A"}, {"all": [{"message": "B", "of": "server"}, {"message": "C"}]}]}
    assert needed_messages(either) == (("input", frozenset({"A", "B"})),)
    assert needed_messages({"any": [{"message": "A"}, {"feature": "garbage_row"}]}) == ()
    assert needed_messages({"not": {"message": "A"}}) == ()
    assert needed_messages({"side": "server"}) == ()


def _findings(d):
    return [(f.rule, f.key, f.severity, f.confidence, f.explained_by,
             [(e.source, e.line, e.text, e.note) for e in f.evidence]) for f in d.findings]


def _inputs():
    groups = {}
    for path in sorted((ROOT / "fixtures").rglob("*.log")):
        groups.setdefault(path.parent, []).append(str(path))
    every = sorted(groups.items())
    return [files for _, files in every[::12]]       # a spread of real, lab and hand-written inputs


@pytest.mark.parametrize("files", _inputs(), ids=lambda files: Path(files[0]).parent.name)
def test_find_gives_what_trying_every_rule_gives(files, monkeypatch):
    table = rules.load()
    parsed = parse_paths(files)
    kept = diagnose.explain(parsed, table=table)
    monkeypatch.setattr(evaluate._Present, "needs", lambda self, rule: ())
    every = diagnose.explain(parsed, table=table)
    assert _findings(kept) == _findings(every)
    assert (kept.verdict.status, kept.verdict.cause) == (every.verdict.status, every.verdict.cause)


def test_a_rule_whose_message_the_input_lacks_is_not_tried(monkeypatch):
    table = rules.load()
    parsed = parse_paths([str(ROOT / "fixtures" / "real" / "3fs-175-ibsocket-accept-timeout" / "paste.log")])
    tried = []
    real_scopes = evaluate.scopes_for
    monkeypatch.setattr(evaluate, "scopes_for", lambda rule, *a: tried.append(rule.id) or real_scopes(rule, *a))
    diagnose.explain(parsed, table=table)
    present = {m.id for r in parsed.runs for m in r.messages}
    lacking = [r for r in table.rules if needed_messages(r.when) and
               any(not (ids & present) for _, ids in needed_messages(r.when))]
    assert lacking and not {r.id for r in lacking} & set(tried)
    assert len(tried) < len(table.rules) / 2
