"""fleet check from saved facts and over ClusterShell's ssh (a loopback stand-in for ssh): every node gets a
record, grouped by verdict and cause with folded node sets, and the drift names the odd node."""
from __future__ import annotations

import json
import shutil

from tests.fleet.helpers import FACTS, FAKESSH, write_plan
from rdmadoctor.fleet import check, commands, report
from rdmadoctor.fleet.remote import Shell
from rdmadoctor.runtime import jsonio


def _group(doc, label):
    return next(g for g in doc["groups"] if g["label"] == label)


def test_from_dir_groups_and_drift(facts_dir):
    doc = commands.check(None, facts_dir, "rdmadoctor check")
    jsonio.validate(doc, "fleet", "fleet result")
    assert doc["summary"]["nodes"] == 8 and doc["status"] == "failure"
    memlock = _group(doc, "memlock-limit")
    assert memlock["nodes"] == "node03" and memlock["status"] == "failure" and "64 KiB" in memlock["summary"]
    assert _group(doc, "ok")["nodes"] == "node[01-02,04-08]"
    mtu = next(r for r in doc["drift"] if r["attribute"] == "netdev_mtu")
    assert mtu["majority"] == "1500" and mtu["odd"] == "node07"
    memlock_drift = next(r for r in doc["drift"] if r["attribute"] == "memlock")
    assert memlock_drift["odd"] == "node03"
    assert report.exit_code(doc) == 2


def test_a_node_without_a_file_is_reported_not_dropped(facts_dir):
    (facts_dir / "node05.json").unlink()
    (facts_dir / "node06.json").write_text("{not json")
    doc = commands.check("node[01-09]", facts_dir, "rdmadoctor check")
    states = {r["node"]: r["state"] for r in doc["nodes"]}
    assert len(states) == 9
    assert states["node05"] == "no-facts" and states["node09"] == "no-facts" and states["node06"] == "bad-facts"
    assert _group(doc, "no facts file")["nodes"] == "node[05,09]"
    assert doc["status"] == "failure"            # node03's memlock outranks what could not be seen


def test_results_and_jsonl_are_read_too(tmp_path):
    from tests.fleet.helpers import result_of
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "a1.json").write_text(json.dumps(result_of(FACTS["port-down"])))        # a saved check --json
    lines = [json.dumps(result_of(FACTS["healthy"]), separators=(",", ":")),
             json.dumps(json.load(open(FACTS["firewall"])), separators=(",", ":"))]
    (d / "more.jsonl").write_text("\n".join(lines) + "\n")
    doc = commands.check(None, d, "rdmadoctor check")
    by = {r["node"]: r for r in doc["nodes"]}
    assert by["a1"]["cause"] == "port-down"
    assert by["h2"]["status"] == "ok" and by["h1"]["cause"] == "firewall-blocks-port"   # named by their facts


def test_parallel_and_serial_agree(facts_dir):
    for n in range(9, 70):
        shutil.copy(FACTS["healthy"], facts_dir / f"node{n:02d}.json")
    serial = check.from_dir(facts_dir, jobs=1)
    parallel = check.from_dir(facts_dir, jobs=2)
    assert [(r["node"], r["status"], r["cause"]) for r in serial] == \
           [(r["node"], r["status"], r["cause"]) for r in parallel]


def test_over_ssh_every_node_answers_something(tmp_path, monkeypatch, facts_dir):
    import sys
    from tests.fleet.helpers import result_of
    recorded = {}
    for n in range(2, 9):                 # the nodes print recorded results; node01 runs the real command
        path = tmp_path / f"node{n:02d}.result.json"
        path.write_text(json.dumps(result_of(facts_dir / f"node{n:02d}.json")))
        recorded[f"node{n:02d}"] = {"file": str(path), "rc": 0}
    plan = write_plan(tmp_path, {**recorded, "node09": {"unreachable": True}, "node10": {"sleep": 60},
                                 "node11": {"missing": True}, "node12": {"stdout": "Welcome!\nno json\n", "rc": 1}})
    monkeypatch.setenv("FAKESSH_PLAN", str(plan))
    monkeypatch.setenv("PYTHONPATH", str(check.Path(__file__).resolve().parents[2]))
    command = f"{sys.executable} -m rdmadoctor check --from {facts_dir}/$FLEET_NODE.json"
    shell = Shell(fanout=16, timeout=15, ssh_path=FAKESSH)
    doc = commands.check("node[01-12]", None, command, shell)
    jsonio.validate(doc, "fleet", "fleet result")
    by = {r["node"]: r for r in doc["nodes"]}
    assert len(by) == 12
    assert by["node01"]["state"] == "checked" and by["node01"]["status"] == "ok", by["node01"]
    assert by["node03"]["cause"] == "memlock-limit"
    assert by["node09"]["state"] == "unreachable" and "Connection refused" in by["node09"]["error"]
    assert by["node10"]["state"] == "timeout" and by["node10"]["seconds"] == 15
    assert by["node11"]["state"] == "not-installed" and by["node11"]["rc"] == 127
    assert by["node12"]["state"] == "no-result" and "exit code 1" in by["node12"]["summary"]
    assert doc["settings"]["command"].endswith("--json")
    mtu = next(r for r in doc["drift"] if r["attribute"] == "netdev_mtu")
    assert mtu["odd"] == "node07" and mtu["unknown"] == ""      # drift compares the nodes that answered
    assert [g["label"] for g in doc["groups"]][:1] == ["memlock-limit"]


def test_the_short_summary_gives_the_same_record_as_the_full_result():
    from rdmadoctor.collectors import load_facts
    from rdmadoctor.engine import diagnose
    from rdmadoctor.fleet import nodes
    from rdmadoctor.render import json_out
    for kind in ("healthy", "memlock", "firewall", "port-down"):
        diagnosis = diagnose.check(load_facts(FACTS[kind]))
        assert nodes.from_result("n", check._summary(diagnosis)) == nodes.from_result("n", json_out.to_dict(diagnosis))


def test_many_answers_are_summarised_in_parallel_in_order(tmp_path):
    from tests.fleet.helpers import result_of
    from rdmadoctor.fleet.remote import Reply
    outputs = [json.dumps(result_of(FACTS[k])).encode() for k in ("healthy", "memlock", "port-down")]
    names = [f"n{i:03d}" for i in range(70)]
    replies = {n: Reply(n, rc=0, stdout=outputs[i % 3], seconds=1.0) for i, n in enumerate(names)}
    replies["n005"] = Reply("n005", rc=255, stderr=b"ssh: connect to host n005 port 22: No route to host")

    class Replayed:
        timeout = 30.0

        def run(self, commands):
            return {n: replies[n] for n in commands}

    serial = check.over_ssh(names, Replayed(), jobs=1)
    parallel = check.over_ssh(names, Replayed(), jobs=2)
    assert serial == parallel
    assert [r["node"] for r in parallel] == names
    assert parallel[1]["cause"] == "memlock-limit" and parallel[5]["state"] == "unreachable"
