"""Offline checks of the producer table and its recordings (no VM needed).

Every run of tests/lab/producers.py is recorded on each of its pairs under
fixtures/lab/<pair>/<scenario>/<producer>/, has a readable meta.json that agrees with the table (commands,
fault, expect, alternatives), and each side's log still begins with its prompt and contains the run's key
lines.
"""
from __future__ import annotations

import json

import pytest

from tests.lab.producers import BY_NAME, PRODUCERS, RUNS, validate
from tests.lab.scenarios import PAIRS
from tests.lab.vm import REPO

FIXTURES = REPO / "fixtures" / "lab"
RECORDINGS = sorted(p.parent for p in FIXTURES.glob("*/*/*/meta.json"))


def test_producer_table_is_consistent():
    assert validate() == []
    assert {r.producer.name for r in RUNS} == set(PRODUCERS)
    for run in RUNS:
        if run.run_pairs():
            assert any(run.lines(pair)["server"] or run.lines(pair)["client"] for pair in run.run_pairs()), (
                "%s: a run keeps at least one key line" % run.name)


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_every_run_is_recorded_on_its_pairs(run):
    missing = [pair for pair in run.run_pairs()
               if not (FIXTURES / pair / run.scenario / run.producer.name / "meta.json").is_file()]
    assert not missing, "%s has no recording on %s (python -m tests.lab.producers --pair ... --producer %s " \
        "--scenario %s)" % (run.name, missing, run.producer.name, run.scenario)


@pytest.mark.parametrize("folder", RECORDINGS, ids=["%s-%s-%s" % (p.parents[1].name, p.parent.name, p.name)
                                                    for p in RECORDINGS])
def test_producer_recording(folder):
    pair, scenario, producer = folder.parents[1].name, folder.parent.name, folder.name
    assert pair in PAIRS
    run = BY_NAME.get("%s/%s" % (scenario, producer))
    assert run is not None, "recording of a run that is not in producers.py: %s" % folder
    assert pair in run.run_pairs()
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["producer"], meta["scenario"], meta["pair"]) == (producer, scenario, pair)
    judged = run.judgement(pair)
    assert (meta["fault"], meta["expect"], meta["alternatives"]) == (
        judged.fault, judged.expect, list(judged.alternatives))
    assert meta["client"]["exit_code"] is not None or meta["client"]["timed_out"]
    assert isinstance(meta["env"]["client"], dict) and meta["hosts"]["h1"]["kernel"]
    for role, side, lines in (("server", run.server_side(), run.lines(pair)["server"]),
                              ("client", run.client_side(), run.lines(pair)["client"])):
        path = folder / (role + ".log")
        if side is None:
            assert not path.exists() and meta[role] is None
            continue
        assert meta[role]["command"] == side.cmd
        text = path.read_text()
        assert text.splitlines()[0] == side.prompt()
        assert text.endswith("^C\n") == bool(meta[role]["timed_out"]), path
        missing = [line for line in lines if line not in text]
        assert not missing, "%s lacks %s" % (path, missing)


@pytest.mark.parametrize("folder", RECORDINGS, ids=["%s-%s-%s" % (p.parents[1].name, p.parent.name, p.name)
                                                    for p in RECORDINGS])
def test_producer_meta_states_the_table(folder):
    """meta.json carries the table's lines (python -m tests.lab.producers --refresh-meta after a table edit)."""
    run = BY_NAME["%s/%s" % (folder.parent.name, folder.name)]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["lines"] == {role: list(keep) for role, keep in run.lines(folder.parents[1].name).items()}
