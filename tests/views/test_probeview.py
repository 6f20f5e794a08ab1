"""views/probeview.py: each rung of the --peer ladder from what the probe saw, one function a rung."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict

import pytest

from rdmadoctor.collectors import load_facts
from rdmadoctor.views import factview, probeview as pv_mod
from rdmadoctor.views.probeview import Seen

DATA = Path(__file__).resolve().parent.parent / "probe" / "data"


@pytest.fixture(scope="module")
def healthy():
    return factview.build(load_facts(DATA / "healthy.json"))


@pytest.fixture
def view(healthy):
    return copy.deepcopy(healthy)


def probe(view: Dict[str, Any], **changes: Any) -> Dict[str, Any]:
    pv = view["probe"]
    pv.update(changes)
    return pv


def test_the_recorded_healthy_probe_passes_every_rung(healthy):
    assert [r["word"] for r in healthy["probe"]["rungs"]] == ["passed", "passed", "passed", "passed", "established",
                                                              "passed", "passed"]
    assert [r["name"] for r in healthy["probe"]["rungs"]] == list(pv_mod.RUNG_NAMES.values())
    assert healthy["probe"]["rung5"] == "established"


def test_port_rung(view):
    pv = view["probe"]
    assert pv_mod.port_rung(pv, view, Seen.of(pv, view))["word"] == "passed"
    view["ports"][0]["state"] = "DOWN"
    rung = pv_mod.port_rung(pv, view, Seen.of(pv, view))
    assert (rung["state"], rung["word"], rung["detail"]) == ("failed", "port-down", "rxe0 port 1 is DOWN")
    view["ports"][0].update(state="ACTIVE", netdev_up=False)
    assert pv_mod.port_rung(pv, view, Seen.of(pv, view))["word"] == "netdev-down"
    view["readable"]["devices"] = False
    assert pv_mod.port_rung(pv, view, Seen.of(pv, view))["state"] == "passed"     # rdma_cm routed on rxe0
    pv["cm_route"] = "error"
    assert pv_mod.port_rung(pv, view, Seen.of(pv, view))["state"] == "not-inspected"


def test_reach_rung(view):
    pv = view["probe"]
    rung = pv_mod.reach_rung(pv, Seen.of(pv, view))
    assert rung["state"] == "passed" and rung["evidence"][0].startswith("TCP 18600 (agent): open")
    view["peer"]["via_rdma_netdev"] = False
    assert pv_mod.reach_rung(pv, Seen.of(pv, view))["word"] == "not-rdma-netdev"
    view["peer"]["via_rdma_netdev"] = True
    probe(view, tcp_rejected=[{"label": "TCP 18600 (agent)", "icmp_name": "admin-prohibited",
                               "icmp_from": "192.0.2.1"}])
    rung = pv_mod.reach_rung(pv, Seen.of(pv, view))
    assert rung["word"] == "rejected" and "ICMP admin-prohibited from 192.0.2.1" in rung["detail"]
    probe(view, tcp_rejected=[], agent_tcp="timeout", answers_above_l2=False, tcp=[])
    assert pv_mod.reach_rung(pv, Seen.of(pv, view))["word"] == "silent"
    probe(view, agent_tcp=None)
    assert pv_mod.reach_rung(pv, Seen.of(pv, view))["state"] == "not-inspected"


def test_gid_rung(view):
    pv = view["probe"]
    assert pv_mod.gid_rung(pv, Seen.of(pv, view))["detail"] == "rxe0 port 1: RoCE v2 GID for 192.0.2.2"
    view["ports"][0]["ipv4_v2_gids"] = []
    assert pv_mod.gid_rung(pv, Seen.of(pv, view))["word"] == "gid-v1-only"
    view["ports"][0]["ipv4_gids"] = []
    assert pv_mod.gid_rung(pv, Seen.of(pv, view))["word"] == "no-gid"
    view["ports"][0].update(is_ib=True, lid=0)
    assert pv_mod.gid_rung(pv, Seen.of(pv, view))["word"] == "no-lid"
    view["ports"][0].update(lid=5, sm_lid=0)
    assert pv_mod.gid_rung(pv, Seen.of(pv, view))["word"] == "no-sm"


def test_cm_resolve_rung(view):
    pv = view["probe"]
    assert pv_mod.cm_resolve_rung(pv)["state"] == "passed"
    probe(view, cm_addr="timeout")
    assert pv_mod.cm_resolve_rung(pv)["word"] == "addr-timeout"
    probe(view, cm_addr="resolved", cm_route="error")
    assert pv_mod.cm_resolve_rung(pv)["word"] == "route-error"


def test_cm_connect_rung(view):
    pv = view["probe"]
    assert pv_mod.cm_connect_rung(pv)["word"] == "established"
    probe(view, cm_connect="rejected", cm_mode="bare")
    rung = pv_mod.cm_connect_rung(pv)
    assert (rung["state"], rung["word"]) == ("passed", "rejected")         # without an agent a reject is an answer
    probe(view, cm_mode="agent")
    assert pv_mod.cm_connect_rung(pv)["state"] == "failed"
    probe(view, cm_setup="error", cm_error="ENOMEM")
    assert pv_mod.cm_connect_rung(pv)["word"] == "setup-error"


def test_exchange_rung(view):
    pv = view["probe"]
    assert pv_mod.exchange_rung(pv)["state"] == "passed"
    probe(view, exchange={"state": "mismatch", "failed_op": "rdma read", "failure": {"mismatch": "byte 3 differs"}})
    rung = pv_mod.exchange_rung(pv)
    assert (rung["word"], rung["detail"]) == ("mismatch", "rdma read: byte 3 differs")
    probe(view, exchange={"state": "failed", "failure": {"status_name": "remote access error"}})
    assert pv_mod.exchange_rung(pv)["word"] == "failed"
    probe(view, exchange=None)
    assert pv_mod.exchange_rung(pv)["state"] == "not-inspected"


def test_burst_rung(view):
    pv = view["probe"]
    rung = pv_mod.burst_rung(pv)
    assert rung["state"] == "passed" and "(within what a working link shows)" in rung["detail"]
    probe(view, loss=dict(pv["loss"], significant=True))
    assert pv_mod.burst_rung(pv)["word"] == "loss"
    probe(view, loss=dict(pv["loss"], significant=False), soft_roce=False, burst_fraction=0.1)
    assert pv_mod.burst_rung(pv)["word"] == "slow"
    probe(view, burst={"state": "failed", "failure": {"error": "retry exceeded"}})
    assert pv_mod.burst_rung(pv)["detail"] == "burst: retry exceeded"


def test_without_the_rdma_cm_probe_rungs_4_to_7_did_not_run(view):
    pv = probe(view, cm_run=False, cm_why="no pyverbs")
    out = pv_mod.rungs(pv, view)
    assert [r["word"] for r in out[3:]] == ["not-run"] * 4 and out[3]["detail"] == "no pyverbs"


def test_without_an_agent_rungs_6_and_7_need_one(view):
    pv = probe(view, cm_mode="bare", cm_connect="rejected", agent_state="refused", agent_error=None)
    out = pv_mod.rungs(pv, view)
    assert out[4]["word"] == "rejected"
    assert out[5]["detail"] == out[6]["detail"] == "needs `rdmadoctor serve` on 192.0.2.1 (agent: refused)"


def test_receiver_not_ready_naks_are_not_counted_as_loss():
    deltas = {"hw_counters": {"rnr_nak_retry_err": 40, "retry_rnr_exceeded_err": 2, "local_ack_timeout_err": 3,
                              "out_of_sequence": 5}}
    assert pv_mod._counter_sum(deltas, pv_mod.RETRANSMIT) == 3
    assert pv_mod._moved(deltas, pv_mod.RETRANSMIT + pv_mod.OUT_OF_SEQUENCE) == ["local_ack_timeout_err +3",
                                                                                "out_of_sequence +5"]


def _loss_after_burst(local: Dict[str, int], peer: Dict[str, int]) -> Dict[str, Any]:
    facts = load_facts(DATA / "healthy.json")
    data = facts["sections"]["probe"]["data"]
    data["burst"]["deltas"] = {"counters": {}, "hw_counters": local}
    burst_event = next(e for e in data["listener"]["events"] if e.get("deltas") is not None)
    burst_event["deltas"] = {"counters": {}, "hw_counters": peer}
    return factview.build(facts)["probe"]["loss"]


def test_a_go_back_n_resend_counts_its_loss_once_not_each_duplicate_packet():
    # a healthy lab pair's burst (Soft-RoCE under TCG): three retries, and the responder saw 50 packets twice
    local = {"completer_retry_err": 3, "rcvd_seq_err": 2, "sent_pkts": 13812}
    loss = _loss_after_burst(local, {"duplicate_request": 50, "out_of_seq_request": 2, "rcvd_pkts": 13810})
    assert loss["total"] == 3 and not loss["significant"]
    assert "peer duplicate_request +50" in loss["text"]
    # the same resends after a loss of one packet in a hundred are a lossy link
    lossy = _loss_after_burst(dict(local, completer_retry_err=140),
                              {"duplicate_request": 2000, "out_of_seq_request": 138, "rcvd_pkts": 13810})
    assert lossy["total"] == 140 and lossy["significant"]
