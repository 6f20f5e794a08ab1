"""The rule table from the cache: its rules' translations and cases are kept in a file of their own and read only
when first asked, and they are the same as a table built from the rule files."""
from __future__ import annotations

import json

from rdmadoctor.engine import rules


def _extras(table: rules.Table) -> str:
    return json.dumps({r.id: {"zh": r.zh, "case": r.case} for r in table.rules}, sort_keys=True, default=str)


def test_a_cached_table_reads_its_translations_and_cases_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    load = rules._load.__wrapped__             # (the lru_cache would give the table of an earlier test)
    built = load(())
    assert any(r.zh for r in built.rules) and any(r.case for r in built.rules)
    folder = tmp_path / "rdmadoctor"
    assert len(list(folder.glob("rules-*.pickle"))) == len(list(folder.glob("rule-extras-*.pickle"))) == 1

    cached = load(())
    shared = {id(r.extras) for r in cached.rules}
    assert len(shared) == 1 and cached.rules[0].extras.values is None   # nothing of them read yet
    assert [r.id for r in cached.rules] == [r.id for r in built.rules]
    assert _extras(cached) == _extras(built)

    # the second file gone (pruned, removed): the table is built again for them
    for path in folder.glob("rule-extras-*.pickle"):
        path.unlink()
    again = load(())
    assert again.rules[0].extras.values is None
    assert _extras(again) == _extras(built)


def test_a_rule_of_a_table_built_here_holds_its_own():
    table = rules.build([rules.rules_dir()], check_names=False)
    rule = next(r for r in table.rules if r.zh)
    assert rule.text("title", "zh") == rule.zh["title"] != rule.title
    assert rule.extras.values is not None
