"""Offline checks of the fault matrix and of the recorded fixtures (no VM needed).

* the scenario table is consistent (kebab-case names, known cause slugs, hosts, pairs);
* every recording under fixtures/lab/ belongs to a scenario, has its meta.json, the prompt line, and
  still contains the lines the scenario says the lab reproduces (so the table and the fixtures
  cannot drift apart).
"""
from __future__ import annotations

import json

import pytest

from tests.lab.scenarios import BY_NAME, CAUSES, PAIRS, SCENARIOS, validate
from tests.lab.vm import REPO

FIXTURES = REPO / "fixtures" / "lab"
RECORDINGS = sorted(p.parent for p in FIXTURES.glob("*/*/meta.json"))


def test_scenario_table_is_consistent():
    assert validate() == []


def test_causes_match_the_docs():
    """The slug list mirrors docs/causes.md, the project's cause vocabulary."""
    import re
    slugs = set(re.findall(r"^\| `([a-z0-9-]+)` \|", (REPO / "docs" / "causes.md").read_text(), re.M))
    assert slugs
    assert CAUSES <= slugs | {"unknown"}, sorted(CAUSES - slugs)


def test_the_matrix_covers_the_issue():
    names = set(BY_NAME)
    for required in ("healthy-write-bw", "qp-mismatch-client-10", "qp-mismatch-server-10", "server-not-running",
                     "port-in-use-stale-server", "firewall-drop-tcp-18515", "firewall-reject-tcp-18515",
                     "firewall-drop-udp-4791", "mtu-netdev-mismatch", "wrong-device-name-client",
                     "memlock-64k-nonroot-server", "device-permission-denied-server", "wrong-address-tcp"):
        assert required in names
    assert len(SCENARIOS) >= 30


@pytest.mark.parametrize("folder", RECORDINGS, ids=[f"{p.parent.name}-{p.name}" for p in RECORDINGS])
def test_recording(folder):
    pair, name = folder.parent.name, folder.name
    assert pair in PAIRS
    assert name in BY_NAME, "recording of an unknown scenario: %s" % folder
    sc = BY_NAME[name]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["scenario"] == name and meta["pair"] == pair
    assert meta["hosts"]["h1"]["kernel"] and meta["hosts"]["h2"]["perftest"]
    for (side_name, lines), side in zip(sc.expected_lines(meta), (sc.server, sc.client)):
        path = folder / (side_name + ".log")
        if side is None:
            assert not path.exists()
            continue
        text = path.read_text()
        assert text.splitlines()[0] == side.prompt()
        missing = [line for line in lines if line not in text]
        assert not missing, "%s lacks %s" % (path, missing)
