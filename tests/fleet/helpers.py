"""Shared pieces of the fleet tests: the loopback ssh (fakessh.py), facts and results recorded in the lab."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
LAB = ROOT / "fixtures" / "lab"
PROBES = ROOT / "tests" / "probe" / "data"
FAKESSH = f"{sys.executable} {HERE / 'fakessh.py'}"

# lab recordings of `check --save` (one host with the fault in place) by what they show
FACTS = {
    "healthy": LAB / "bookworm" / "gid-index-empty-client" / "check-h2.json",
    "healthy-trixie": LAB / "trixie" / "gid-index-empty-client" / "check-h2.json",
    "memlock": LAB / "bookworm" / "memlock-64k-nonroot-server" / "check-h1.json",
    "port-down": LAB / "bookworm" / "netdev-down-server" / "check-h1.json",
    "firewall": LAB / "bookworm" / "firewall-drop-udp-4791" / "check-h1.json",
    "mtu-9000": LAB / "bookworm" / "mtu-netdev-mismatch" / "check-h2.json",
    "no-device": LAB / "bookworm" / "no-rxe-link-server" / "check-h1.json",
}


def result_of(facts_path: Path) -> Dict:
    """What `rdmadoctor check --from FILE --json` prints for a recording."""
    from rdmadoctor.collectors import load_facts
    from rdmadoctor.engine import diagnose
    from rdmadoctor.render import json_out
    facts = load_facts(facts_path)
    return json_out.to_dict(diagnose.check(facts, None, (facts.get("host") or {}).get("peer")))


@pytest.fixture(scope="session")
def probe_results(tmp_path_factory) -> Dict[str, Path]:
    """The lab's check --peer recordings (tests/probe/data) as the results a node's `check --peer --json` prints."""
    out = tmp_path_factory.mktemp("probe-results")
    paths = {}
    for src in sorted(PROBES.glob("*.json")):
        if src.name.startswith("peer-section"):
            continue
        path = out / src.name
        path.write_text(json.dumps(result_of(src)))
        paths[src.stem] = path
    return paths


@pytest.fixture
def facts_dir(tmp_path) -> Path:
    """A small fleet of saved facts: node[01-08], two with faults (node03 memlock, node07 MTU 9000)."""
    d = tmp_path / "facts"
    d.mkdir()
    plan = {"node01": "healthy", "node02": "healthy", "node03": "memlock", "node04": "healthy",
            "node05": "healthy", "node06": "healthy", "node07": "mtu-9000", "node08": "healthy"}
    for node, kind in plan.items():
        shutil.copy(FACTS[kind], d / f"{node}.json")
    return d


def write_plan(tmp_path: Path, plan: Dict) -> Path:
    path = tmp_path / "sshplan.json"
    path.write_text(json.dumps(plan))
    return path
