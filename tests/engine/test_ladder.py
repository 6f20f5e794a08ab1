"""engine/ladder.py: the host ladder and the --peer ladder; a failed rung skips the rungs that depend on it
and folds their findings under its own."""
from __future__ import annotations

from typing import Any, Dict, Optional

from rdmadoctor.engine import ladder
from rdmadoctor.model import Evidence, Finding

SECTIONS = ("devices", "kernel", "netlink", "firewall", "ports", "limits", "pci")


def finding(rule: str, rung: Optional[str] = None, severity: str = "fail", probe_rung: Optional[str] = None) -> Finding:
    return Finding(rule=rule, cause="port-down", severity=severity, title=f"{rule} title", explanation="",
                   evidence=[Evidence("facts", f"{rule} evidence")], fix=["fix it"], rung=rung,
                   probe_rung=probe_rung)


def view(**unreadable: str) -> Dict[str, Any]:
    return {"readable": {s: s not in unreadable for s in SECTIONS}, "reasons": dict(unreadable),
            "devices": [{"name": "mlx5_0", "driver": "mlx5_core"}],
            "ports": [{"label": "mlx5_0 port 1", "state": "ACTIVE", "ipv4_gids": ["::ffff:192.0.2.1"]}],
            "memlock": {"exempt": True}, "firewall": {}}


def states(rungs) -> Dict[str, str]:
    return {r.name: r.state for r in rungs}


def test_a_healthy_host_passes_with_what_each_rung_saw():
    rungs = ladder.host([], view(), peer=None)
    assert states(rungs)["device"] == "passed" and rungs[0].detail == "mlx5_0 (mlx5_core)"
    assert states(rungs)["route"] == "not-inspected"                     # no --peer
    assert states(rungs)["limits"] == "passed" and "CAP_IPC_LOCK" in rungs[7].detail


def test_a_failed_rung_skips_its_dependants_and_folds_their_findings():
    device, port, firewall = finding("DEV-1", "device"), finding("PORT-1", "port"), finding("FW-1", "firewall")
    rungs = {r.name: r for r in ladder.host([device, port, firewall], view(), peer="192.0.2.2")}
    assert rungs["device"].state == "failed" and rungs["device"].detail == "DEV-1 title"
    for name in ("driver", "port", "address", "route", "performance"):        # all depend on the device, in turn
        assert rungs[name].state == "skipped" and rungs[name].blocked_by == "device", name
    assert port.explained_by == "DEV-1"                                      # shown under the device failure
    assert rungs["firewall"].state == "failed" and firewall.explained_by is None     # independent of the device


def test_unreadable_facts_make_a_rung_not_inspected_and_say_why():
    rungs = {r.name: r for r in ladder.host([], view(kernel="permission denied"), peer=None)}
    assert rungs["driver"].state == "not-inspected"
    assert rungs["driver"].detail == "could not read kernel: permission denied"
    assert rungs["port"].state == "passed"                     # not inspected is no failure: nothing is skipped


def test_a_warning_does_not_skip_anything():
    rungs = ladder.host([finding("PORT-W", "port", severity="warn")], view(), peer=None)
    assert states(rungs)["port"] == "warning" and states(rungs)["address"] == "passed"


def probe_view(failed_at: int) -> Dict[str, Any]:
    rungs = [{"n": n, "name": name, "title": f"Peer {n}", "state": "failed" if n == failed_at else "passed",
              "detail": f"rung {n} saw this", "evidence": [], "seconds": 0.1}
             for n, name in ladder.RUNG_NAMES.items()]
    return {**view(), "probe": {"rungs": rungs}}


def test_the_probe_ladder_stops_at_the_first_failed_rung():
    top = finding("PEER-REACH", probe_rung="peer-reach")
    above = finding("PEER-CM", probe_rung="peer-cm-connect")
    rungs, named = ladder.probe([top, above], probe_view(2))
    assert [r.state for r in rungs] == ["passed", "failed", "skipped", "skipped", "skipped", "skipped", "skipped"]
    assert named is top and rungs[1].detail == "PEER-REACH title"
    assert rungs[1].evidence[0].text == "rung 2 saw this"                    # what the rung saw stays as evidence
    assert all(r.blocked_by == "peer-reach" for r in rungs[2:])
    assert above.explained_by == "PEER-REACH"


def test_a_probe_rung_without_a_finding_keeps_its_own_detail():
    rungs, named = ladder.probe([], probe_view(5))
    assert named is None and rungs[4].state == "failed" and rungs[4].detail == "rung 5 saw this"


def test_without_a_probe_there_is_no_probe_ladder():
    built = ladder.build([finding("DEV-1", "device")], view(), peer=None)
    assert built.probe == [] and built.probe_top is None and built.all == built.host
