"""fleet probe: each pair's record from the lab's check --peer recordings, the isolation on a simulated fleet
(a bad node, a bad link, a bad switch uplink, nothing to compare with), and the whole run over the loopback ssh
with no agent ever serving two probes at once."""
from __future__ import annotations

import json
from typing import Dict, List, Tuple

import pytest

from tests.fleet.helpers import FAKESSH, write_plan
from rdmadoctor.fleet import probe
from rdmadoctor.fleet.probe import ProbeOptions
from rdmadoctor.fleet.remote import Shell
from rdmadoctor.runtime import jsonio

CHECKED = {"state": "checked", "seconds": 5.0}


def _pair(probe_results, name):
    doc = json.loads(probe_results[name].read_text())
    return probe.classify("h2", "h1", "192.0.2.1", CHECKED, doc)


@pytest.mark.parametrize("name,outcome,rung,number,cause", [
    ("healthy", "passed", None, None, None),
    ("netem-loss-1pct", "warning", "peer-bandwidth", 7, "packet-loss"),
    ("agent-not-running", "incomplete", "peer-exchange", None, None),
    ("udp-4791-drop", "failed", "peer-cm-connect", 5, "firewall-blocks-port"),
    ("mtu-mismatch", "failed", "peer-exchange", 6, "mtu-mismatch"),
    ("tcp-drop", "failed", "peer-reach", 2, "firewall-blocks-port"),
    ("wrong-peer-address", "failed", "peer-reach", 2, "wrong-peer-address"),
])
def test_a_pair_is_classified_by_its_probe_rungs(probe_results, name, outcome, rung, number, cause):
    p = _pair(probe_results, name)
    assert (p["outcome"], p["rung"], p["rung_number"], p["cause"]) == (outcome, rung, number, cause)
    assert [r["name"] for r in p["rungs"]] == list(probe.PROBE_RUNGS)


def test_a_pair_carries_the_probes_own_evidence(probe_results):
    p = _pair(probe_results, "netem-loss-1pct")
    ev = p["evidence"]
    assert ev["burst"]["state"] == "passed" and ev["burst"]["gbps"] > 0
    assert ev["counters"]["client"]["hw_counters"]["completer_retry_err"] == 26
    assert ev["counters"]["agent"]["hw_counters"]["out_of_seq_request"] == 27
    assert ev["network_seconds"] and ev["tcp"]


def test_could_not_run_is_never_failed():
    record = {"state": "timeout", "seconds": 60, "summary": "timed out: no answer within 60 s"}
    p = probe.classify("n1", "n2", "192.0.2.2", record, None)
    assert p["outcome"] == "not-run" and "timed out" in p["summary"]
    old = {"schema": "rdmadoctor/1", "verdict": {"status": "ok", "summary": "fine"}, "rungs": [{"name": "port",
                                                                                                "state": "passed"}]}
    assert probe.classify("n1", "n2", "192.0.2.2", CHECKED, old)["outcome"] == "not-run"


# -- a simulated fleet ----------------------------------------------------------------------------------

def simulated(bad_nodes=(), bad_links=(), uplink=(), calls=None):
    """A prober for a fleet with faults: a bad node fails every probe it is in; a bad link fails between its two
    nodes only; the nodes behind a bad uplink fail with every node outside their group."""
    links = {frozenset(pair) for pair in bad_links}
    group = set(uplink)

    def prober(pairs: List[Tuple[str, str]], number: int, purpose: str) -> List[Dict]:
        seen = set()
        out = []
        for a, b in pairs:
            assert a not in seen and b not in seen, f"round {number}: a node in two probes"
            seen.update((a, b))
            if calls is not None:
                calls.append((number, purpose, a, b))
            if a in bad_nodes or b in bad_nodes:
                cause, rung = "mtu-mismatch", "peer-exchange"
            elif frozenset((a, b)) in links:
                cause, rung = "firewall-blocks-port", "peer-cm-connect"
            elif group and ((a in group) != (b in group)):
                cause, rung = "packet-loss", "peer-exchange"
            else:
                cause = rung = None
            out.append({"a": a, "b": b, "address": "x", "round": number, "purpose": purpose,
                        "outcome": "failed" if cause else "passed", "cause": cause, "rule": None,
                        "summary": f"{cause} between {a} and {b}" if cause else "ok", "rung": rung})
        return out
    return prober


def names(n):
    return [f"node{i:04d}" for i in range(1, n + 1)]


def test_isolation_names_the_bad_node_and_the_bad_link():
    calls = []
    plan, results, extra, blame, iso_rounds = probe.probe_plan(
        names(12), ProbeOptions(), simulated(bad_nodes={"node0003"}, bad_links=[("node0007", "node0010")], calls=calls))
    assert plan.kind == "all-pairs" and len(plan.rounds) == 11
    kinds = {(b["kind"], tuple(b["nodes"])): b for b in blame}
    assert ("node", ("node0003",)) in kinds and kinds[("node", ("node0003",))]["cause"] == "mtu-mismatch"
    assert len(kinds[("node", ("node0003",))]["pairs"]) == 11
    assert ("link", ("node0007", "node0010")) in kinds
    assert kinds[("link", ("node0007", "node0010"))]["cause"] == "firewall-blocks-port"
    assert len(blame) == 2                          # nobody else is blamed
    # retests: node0003 once per role, each of its partners once in its role, the link's two ends
    assert 1 <= iso_rounds <= 4 and all(r["purpose"] == "isolate" for r in extra)
    for number in {c[0] for c in calls}:
        in_round = [c for c in calls if c[0] == number]
        nodes = [n for c in in_round for n in c[2:]]
        assert len(nodes) == len(set(nodes))


def test_isolation_on_a_thousand_nodes():
    bad = {"node0042", "node0777"}
    plan, results, extra, blame, iso_rounds = probe.probe_plan(names(1000), ProbeOptions(), simulated(bad_nodes=bad))
    assert plan.kind == "sampled" and len(plan.rounds) == 8 and len(results) == 4000
    assert {b["nodes"][0] for b in blame if b["kind"] == "node"} == bad
    assert all(b["kind"] == "node" for b in blame)
    assert iso_rounds <= 2


def test_a_bad_uplink_blames_the_nodes_behind_it_as_a_group():
    group = [f"node{i:04d}" for i in range(1, 5)]
    _, results, _, blame, _ = probe.probe_plan(names(12), ProbeOptions(), simulated(uplink=group))
    assert [b["kind"] for b in blame] == ["group"]
    assert blame[0]["nodes"] == group and blame[0]["cause"] == "packet-loss"
    assert len(blame[0]["pairs"]) == 4 * 8
    inside = [p for p in results if p["a"] in group and p["b"] in group]
    assert inside and all(p["outcome"] == "passed" for p in inside)


def test_nothing_to_compare_with_is_undetermined():
    _, _, _, blame, _ = probe.probe_plan(names(2), ProbeOptions(), simulated(bad_links=[("node0001", "node0002")]))
    assert [b["kind"] for b in blame] == ["undetermined"]
    assert "no node passed" in blame[0]["summary"]


def test_no_isolation_when_asked():
    _, _, extra, blame, _ = probe.probe_plan(names(6), ProbeOptions(isolate=False), simulated(bad_nodes={"node0001"}))
    assert extra == [] and blame == []


# -- the whole run over the loopback ssh ----------------------------------------------------------------

def test_fleet_probe_over_ssh(tmp_path, monkeypatch, probe_results):
    nodes = [f"n{i}" for i in range(1, 7)]
    address = {n: f"192.0.2.{10 + i}" for i, n in enumerate(nodes, 1)}
    healthy, mtu, udp = (str(probe_results[k]) for k in ("healthy", "mtu-mismatch", "udp-4791-drop"))
    plan = {}
    for n in nodes:
        pairs = {address["n2"]: mtu}                 # n2's MTU breaks every probe it is in
        if n == "n2":
            pairs = {a: mtu for a in address.values()}
        if n == "n4":
            pairs[address["n5"]] = udp               # UDP 4791 dropped between n4 and n5
        if n == "n5":
            pairs[address["n4"]] = udp
        plan[n] = {"pairs": pairs, "default": healthy, "hold": 0.2}
    monkeypatch.setenv("FAKESSH_PLAN", str(write_plan(tmp_path, plan)))
    log = tmp_path / "log"
    monkeypatch.setenv("FAKESSH_LOG", str(log))
    shell = Shell(fanout=16, timeout=30, ssh_path=FAKESSH)
    options = ProbeOptions(command="rdmadoctor check", token_file="/etc/rdmadoctor/token", round_seconds=30)
    doc = probe.run(nodes, shell, options, addresses=address)
    jsonio.validate(doc, "fleet", "fleet probe result")
    assert doc["probe"]["plan"]["rounds"] == 5 and doc["probe"]["plan"]["pairs"] == 15
    blame = {(b["kind"], tuple(b["nodes"])): b for b in doc["probe"]["blame"]}
    assert blame[("node", ("n2",))]["cause"] == "mtu-mismatch"
    assert blame[("link", ("n4", "n5"))]["cause"] == "firewall-blocks-port"
    assert len(blame) == 2 and doc["status"] == "failure"
    failed = [p for p in doc["probe"]["pairs"] if p["outcome"] == "failed"]
    assert all(p["rung"] and p["rungs"] and p["evidence"] for p in failed)
    # what ran on the nodes: check --peer with the token file, and never two probes on one agent at once
    text = log.read_text()
    assert "--token-file /etc/rdmadoctor/token" in text and "--peer 192.0.2.1" in text
    busy = _intervals(text, {v: k for k, v in address.items()})
    for node, spans in busy.items():
        spans.sort()
        for (_, e1), (s2, _) in zip(spans, spans[1:]):
            assert s2 >= e1, f"{node} was in two probes at once"


def _intervals(text, node_of_address):
    """Each probe call's [start, end] on its client and on its agent."""
    busy: Dict[str, list] = {}
    open_calls: Dict[str, float] = {}
    target: Dict[str, str] = {}
    for line in text.splitlines():
        kind, node, rest = line.split(" ", 2)
        if kind == "start":
            open_calls[node] = float(rest)
        elif kind == "probe" and rest != "None":
            target[node] = node_of_address[rest]
        elif kind == "end" and node in target:
            span = (open_calls.pop(node), float(rest))
            busy.setdefault(node, []).append(span)
            busy.setdefault(target.pop(node), []).append(span)
    return busy


def test_fleet_probe_command_line(tmp_path, probe_results):
    import os
    import subprocess
    import sys
    from tests.fleet.helpers import ROOT
    nodes = [f"n{i}" for i in range(1, 5)]
    address = {n: f"192.0.2.{20 + i}" for i, n in enumerate(nodes, 1)}
    healthy, mtu = str(probe_results["healthy"]), str(probe_results["mtu-mismatch"])
    plan = {n: {"pairs": {address["n3"]: mtu}, "default": healthy} for n in nodes}
    plan["n3"] = {"pairs": {a: mtu for a in address.values()}, "default": healthy}
    (tmp_path / "addresses").write_text("".join(f"{n} {a}\n" for n, a in address.items()))
    env = dict(os.environ, FAKESSH_PLAN=str(write_plan(tmp_path, plan)), PYTHONPATH=str(ROOT))
    html = tmp_path / "probe.html"
    out = subprocess.run([sys.executable, "-m", "rdmadoctor", "fleet", "probe", "n[1-4]", "--ssh-path", FAKESSH,
                          "--addresses", str(tmp_path / "addresses"), "--format", "line", "--html", str(html)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "RDMA CRITICAL 3 of 6 pairs: node n3 mtu-mismatch\n"
    assert 'data-kind="node" data-nodes="n3"' in html.read_text()
    text = subprocess.run([sys.executable, "-m", "rdmadoctor", "fleet", "probe", "n[1-4]", "--ssh-path", FAKESSH,
                           "--addresses", str(tmp_path / "addresses")], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    assert "node         n3" in text.stdout and "peer-exchange" in text.stdout
