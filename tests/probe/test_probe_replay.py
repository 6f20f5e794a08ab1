"""Verdicts from facts recorded live in the Soft-RoCE lab (`check --peer --save`), replayed offline.

tests/probe/data/<scenario>.json are the client's facts with the probe's and the peer's sections, recorded by
tests/lab/test_probe.py (h2 probing h1; peer-rxe-on-dummy, egress-udp-4791-drop and static-neighbour-other-mac by the
same `check --peer` in a bookworm pair, h2 probing h1: h1's rxe0 on a dummy netdev without an address; h2 dropping the
UDP 4791 it sends; h2 holding h1's address at a MAC nobody has, `ip neigh replace 192.0.2.1 lladdr 02:00:00:00:00:01
dev eth0 nud permanent`).
Replaying them checks the view, the rungs and the rules without a lab; the lab test checks the same verdicts live."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rdmadoctor.engine.diagnose import check
from rdmadoctor.engine import rules as rule_table
from rdmadoctor.logparse.streams import parse_paths
from rdmadoctor.engine import ladder as probe_ladder
from tests.probe.helpers import DATA

REPO = Path(__file__).resolve().parents[2]
LAB_LOGS = REPO / "fixtures" / "lab" / "bookworm"

# scenario -> (verdict status, cause, rule, {probe rung: state})
EXPECTED = {
    "healthy": ("ok", None, None, {n: "passed" for n in range(1, 8)}),
    "agent-not-running": ("ok", None, None, {2: "passed", 5: "passed", 6: "not-inspected", 7: "not-inspected"}),
    "tcp-drop": ("failure", "firewall-blocks-port", "PEER-TCP-FILTERED", {2: "failed", 3: "skipped"}),
    "tcp-reject": ("failure", "firewall-blocks-port", "PEER-TCP-REJECTED", {2: "failed", 7: "skipped"}),
    "udp-4791-drop": ("failure", "firewall-blocks-port", "PEER-REMOTE-FIREWALL-ROCE", {4: "passed", 5: "failed"}),
    "mtu-mismatch": ("failure", "mtu-mismatch", "PEER-MTU-MISMATCH-BREAKS", {5: "passed", 6: "failed"}),
    "peer-netdev-down": ("failure", "port-down", "PEER-GONE", {2: "failed"}),
    "netem-loss-1pct": ("warning", "packet-loss", "PEER-BURST-LOSS", {6: "passed", 7: "warning"}),
    "wrong-peer-address": ("failure", "wrong-peer-address", None, {2: "failed"}),
    "peer-rxe-on-dummy": ("failure", "gid-missing", "PEER-REMOTE-NO-IPV4-GID", {4: "passed", 5: "failed"}),
    "egress-udp-4791-drop": ("failure", "firewall-blocks-port", "HOST-FIREWALL-EGRESS", {2: "passed"}),
    "static-neighbour-other-mac": ("failure", "wrong-neighbour-mac", "PEER-NEIGHBOUR-STATIC-OTHER-MAC", {2: "failed"}),
}


def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def diagnose(facts: dict, logs=()):
    parsed = parse_paths([str(p) for p in logs]) if logs else None
    peer = (facts.get("host") or {}).get("peer")
    return check(copy.deepcopy(facts), parsed, peer)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_recorded_scenario(scenario):
    status, cause, rule, rungs = EXPECTED[scenario]
    d = diagnose(load(scenario))
    assert d.verdict.status == status, d.verdict
    assert d.verdict.cause == cause, d.verdict
    if rule:
        assert d.verdict.rule == rule, d.verdict
    probe = {int(r.name and n + 1): r for n, r in enumerate(r for r in d.rungs if r.name.startswith("peer-"))}
    assert len(probe) == 7
    for n, state in rungs.items():
        assert probe[n].state == state, (n, probe[n])
    first_failed = next((r for r in probe.values() if r.state == "failed"), None)
    if first_failed is not None:
        n = [k for k, r in probe.items() if r is first_failed][0]
        assert all(probe[k].state == "skipped" and probe[k].blocked_by == first_failed.name for k in range(n + 1, 8))


def test_two_sided_findings_carry_both_values():
    d = diagnose(load("mtu-mismatch"))
    mtu = next(f for f in d.findings if f.rule == "PEER-MTU-MISMATCH-BREAKS")
    assert "9000 here, 1500 on the peer" in mtu.title and "4096 here, 1024 on the peer" in mtu.title
    d = diagnose(load("udp-4791-drop"))
    rule = next(f for f in d.findings if f.rule == "PEER-REMOTE-FIREWALL-ROCE")
    assert "inet filter input handle" in rule.title                  # the peer's own rule, by name
    # let in, on the peer, from the address the peer's ruleset was asked about: this host's
    assert "`nft insert rule inet filter input ip saddr 192.0.2.2 udp dport 4791 accept`" in rule.fix[0], rule.fix


def test_the_probe_confirms_a_qp_mismatch_the_logs_show():
    logs = [LAB_LOGS / "qp-mismatch-client-10" / "server.log", LAB_LOGS / "qp-mismatch-client-10" / "client.log"]
    d = diagnose(load("healthy"), logs)
    assert d.verdict.cause == "qp-count-mismatch" and d.verdict.rule == "PEER-CONFIRMS-QP-COUNT"
    explained = {f.rule: f.explained_by for f in d.findings}
    assert explained.get("PT-QP-COUNT") == "PEER-CONFIRMS-QP-COUNT"


def test_a_transport_failure_in_the_logs_names_the_peers_rule():
    logs = [LAB_LOGS / "firewall-drop-udp-4791" / "server.log", LAB_LOGS / "firewall-drop-udp-4791" / "client.log"]
    d = diagnose(load("udp-4791-drop"), logs)
    assert d.verdict.cause == "firewall-blocks-port" and d.verdict.rule == "PEER-REMOTE-FIREWALL-ROCE"
    live = [f.rule for f in d.findings if f.explained_by is None and f.severity == "fail"]
    assert live == ["PEER-REMOTE-FIREWALL-ROCE"], live


def test_without_the_peers_facts_it_points_at_the_rdma_path():
    logs = [LAB_LOGS / "firewall-drop-udp-4791" / "server.log", LAB_LOGS / "firewall-drop-udp-4791" / "client.log"]
    facts = load("udp-4791-drop")
    facts["sections"]["peer"] = {"status": "unavailable", "reason": "no rdmadoctor agent", "unreadable": []}
    d = diagnose(facts, logs)
    transport = next(f for f in d.findings if f.rule == "PEER-TRANSPORT-CONFIRMED")
    assert transport.explained_by is None and transport.cause == "packet-loss"
    assert d.verdict.cause in ("packet-loss", "unknown")
    assert "firewall-blocks-port" in next(f for f in d.findings if f.rule == "PEER-CM-SILENT").candidates


def test_every_rule_about_the_peer_sits_on_a_probe_rung():
    peer_rules = [r for r in rule_table.load() if r.file == "host-peer.toml"]
    assert len(peer_rules) >= 30
    assert all(r.probe_rung in probe_ladder.PROBE_RUNG_NUMBERS for r in peer_rules), \
        [r.id for r in peer_rules if r.probe_rung not in probe_ladder.PROBE_RUNG_NUMBERS]


def test_a_broken_rung_no_rule_explains_is_not_ok():
    facts = load("healthy")
    facts["sections"]["probe"]["data"]["tcp"][0].update(state="error", error="Invalid argument")
    d = diagnose(facts)
    reach = next(r for r in d.rungs if r.name == "peer-reach")
    assert reach.state == "failed"
    assert d.verdict.status == "unknown" and "Peer 2" in d.verdict.summary


def test_facts_without_a_probe_are_judged_as_before():
    facts = load("healthy")
    del facts["sections"]["probe"], facts["sections"]["peer"]
    d = diagnose(facts)
    assert not [r for r in d.rungs if r.name.startswith("peer-")]
    assert not [f for f in d.findings if f.rule.startswith("PEER-")]
