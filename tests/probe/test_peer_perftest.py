"""`check --peer` with the peer's perftest processes (views/peerperftest.py, rules/peer-perftest.toml), on facts
recorded in the lab (h2 probing h1) with the peer's processes put where its agent reports them."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rdmadoctor.engine.diagnose import check
from rdmadoctor.logparse.streams import parse_paths
from tests.probe.helpers import DATA

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab" / "bookworm"


def server(tool="ib_write_bw", port=18515, **options):
    options = {"ib-dev": "rxe0", **{k.replace("_", "-") if k == "ib_dev" else k: str(v) for k, v in options.items()}}
    if port != 18515:
        options["port"] = str(port)
    return {"tool": tool, "role": "server", "options": options, "port": port, "listening": [port],
            "connected": False, "rdma_cm": False}


def run(processes, log=None):
    facts = json.loads((DATA / "healthy.json").read_text())
    facts["sections"]["peer"]["data"]["facts"]["sections"]["ports"]["data"]["perftest"] = copy.deepcopy(processes)
    parsed = parse_paths([str(LAB / log / "client.log")]) if log else None
    return check(facts, parsed, "192.0.2.1")


CASES = {
    "another port": ([server(port=18520, size=65536)], "server-not-running", "option-mismatch",
                     "PEER-PERFTEST-ELSEWHERE",
                     "The peer's ib_write_bw on port 18520 with -s 65536; this client connects to 18515"),
    "another size": ([server(size=1024, iters=100)], "size-client-larger", "option-mismatch", "PEER-PERFTEST-OPTIONS",
                     "message size (-s): 1024 on the peer, 65536 here"),
    "another binary": ([server("ib_read_bw", iters=100)], "size-client-larger", "option-mismatch",
                       "PEER-PERFTEST-OPTIONS", "RDMA operation (test binary): READ on the peer, WRITE here"),
    "another QP count": ([server()], "qp-mismatch-client-10", "qp-count-mismatch", "PEER-PERFTEST-QP-COUNT",
                         "number of QPs (--qp): 1 on the peer, 10 here"),
    "no server": ([], "server-not-running", "server-not-running", "PEER-PERFTEST-NONE-CONNECT",
                  "No perftest server runs on 192.0.2.1"),
    "another host": ([server(iters=100)], "wrong-address-tcp", "wrong-peer-address", "PEER-PERFTEST-TARGET",
                     "The client aimed at 192.0.2.3, but the perftest server runs on 192.0.2.1"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_peers_perftest_against_the_log(name):
    processes, log, cause, rule, text = CASES[name]
    d = run(processes, log)
    assert (d.verdict.cause, d.verdict.rule) == (cause, rule), d.verdict
    assert text in d.verdict.summary, d.verdict.summary


def test_without_a_log_no_server_is_said_and_a_matching_command_given():
    d = run([])
    assert d.verdict.status == "ok"
    note = next(f for f in d.findings if f.rule == "PEER-PERFTEST-NONE")
    assert "ib_write_bw -d rxe0" in note.fix[0]


def test_an_agent_that_reports_no_processes_says_nothing_about_them():
    facts = json.loads((DATA / "healthy.json").read_text())
    d = check(facts, parse_paths([str(LAB / "server-not-running" / "client.log")]), "192.0.2.1")
    assert not any(f.rule.startswith("PEER-PERFTEST-") and f.rule not in ("PEER-PERFTEST-DIFFERS",
                                                                            "PEER-PERFTEST-INCOMPATIBLE")
                   for f in d.findings)


def test_a_matching_server_now_leaves_the_failed_connect_open():
    d = run([server(iters=100)], "firewall-reject-tcp-18515")
    assert d.verdict.cause != "server-not-running"
    assert any(f.rule == "PEER-PERFTEST-WAITING-NOW" for f in d.findings)


# recorded live in the lab (tests/lab/test_probe.py, pair bookworm: h2 checks h1 whose agent reports a perftest
# server), replayed with the same client log
RECORDED = {
    "peer-perftest-other-port": ("server-not-running", "option-mismatch", "PEER-PERFTEST-ELSEWHERE",
                                 "The peer's ib_write_bw on port 18520 with -s 65536 -n 100; this client connects "
                                 "to 18515"),
    "peer-perftest-other-size": ("size-client-larger", "option-mismatch", "PEER-PERFTEST-OPTIONS",
                                 "message size (-s): 1024 on the peer, 65536 here"),
    "peer-perftest-other-binary": ("binary-write-server-read-client", "option-mismatch", "PEER-PERFTEST-OPTIONS",
                                   "RDMA operation (test binary): WRITE on the peer, READ here"),
    "peer-perftest-none": ("server-not-running", "server-not-running", "PEER-PERFTEST-NONE-CONNECT",
                           "No perftest server runs on 192.0.2.1"),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_in_the_lab(name):
    log, cause, rule, text = RECORDED[name]
    facts = json.loads((DATA / f"{name}.json").read_text())
    d = check(facts, parse_paths([str(LAB / log / "client.log")]), "192.0.2.1")
    assert (d.verdict.cause, d.verdict.rule) == (cause, rule), d.verdict
    assert text in d.verdict.summary, d.verdict.summary
    peer_ports = facts["sections"]["peer"]["data"]["facts"]["sections"]["ports"]["data"]
    assert all("cmdline" not in p and "pid" not in p for p in peer_ports["perftest"])


def test_the_peers_perftest_in_chinese():
    facts = json.loads((DATA / "healthy.json").read_text())
    facts["sections"]["peer"]["data"]["facts"]["sections"]["ports"]["data"]["perftest"] = [server(size=1024, iters=100)]
    d = check(facts, parse_paths([str(LAB / "size-client-larger" / "client.log")]), "192.0.2.1", lang="zh")
    finding = next(f for f in d.findings if f.rule == "PEER-PERFTEST-OPTIONS")
    assert "ib_write_bw（端口 18515，参数 -s 1024" in finding.title, finding.title
    assert "对端 1024，本端 65536" in finding.title and "on the peer" not in finding.title + finding.explanation
