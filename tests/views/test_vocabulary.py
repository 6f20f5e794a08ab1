"""views/vocabulary.py declares every name of the facts view: the view built from each recorded facts file
has no name the vocabulary lacks (so the rule loader's name check knows all of them)."""
from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from rdmadoctor.collectors import FactsError, load_facts
from rdmadoctor.views import factview, vocabulary

ROOT = Path(__file__).resolve().parent.parent.parent


def facts_files(*dirs: Path) -> List[Path]:
    out = []
    for d in dirs:
        for path in sorted(d.rglob("*.json")):
            try:
                load_facts(path)
            except (FactsError, ValueError):
                continue
            out.append(path)
    return out


FIXTURES = facts_files(ROOT / "fixtures")
PROBE_REPLAYS = facts_files(ROOT / "tests" / "probe" / "data")


def test_there_are_facts_files_to_check():
    assert len(FIXTURES) >= 50 and len(PROBE_REPLAYS) >= 5


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_the_view_of_every_recorded_facts_file_is_declared(path):
    assert vocabulary.undeclared(factview.build(load_facts(path))) == []


def test_the_view_of_the_probe_replays_is_declared():
    assert [p.name for p in PROBE_REPLAYS if vocabulary.undeclared(factview.build(load_facts(p)))] == []


def test_an_undeclared_name_is_reported_with_its_path():
    view = factview.build(load_facts(FIXTURES[0]))
    view["ports"] = [dict(p, invented=1) for p in view["ports"]] or [{"invented": 1}]
    view["memlock"]["made_up"] = True
    assert {"ports[].invented", "memlock.made_up"} <= set(vocabulary.undeclared(view))
