"""The probe's orchestration on loopback: a real agent (fake facts and listener), a fake verbs child."""
from __future__ import annotations

import socket
import time

import pytest

from rdmadoctor.collectors.base import CollectContext
from rdmadoctor.probe.run import DEADLINES, Probe, ProbeOptions, collect_with_probe
from tests.probe.helpers import FAKE_CHILD, TOKEN, running_agent


@pytest.fixture
def child_mode(monkeypatch):
    def set_mode(mode):
        monkeypatch.setenv("RDMADOCTOR_FAKE_CHILD", mode)
    return set_mode


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def options(port, **kw):
    deadlines = dict(DEADLINES, **kw.pop("deadlines", {}))
    return ProbeOptions("127.0.0.1", port, child_script=FAKE_CHILD, deadlines=deadlines, **kw)


def test_with_an_agent_the_exchange_and_burst_run_and_the_peer_reports(child_mode):
    child_mode("established")
    with running_agent(token=TOKEN) as (_, port):
        probe = Probe(options(port, token=TOKEN))
        data = probe.run()
        sections = probe.sections()
    assert data["agent"]["state"] == "answered" and data["agent"]["auth"] == "hmac-sha256"
    assert data["tcp"][0] == dict(data["tcp"][0], port=port, state="open", role="agent")
    assert data["cm"]["mode"] == "agent" and data["cm"]["connect"]["state"] == "established"
    assert data["exchange"]["state"] == "passed" and set(data["exchange"]["ops"]) == {"info", "write", "read", "send",
                                                                                       "verdict"}
    assert data["burst"]["state"] == "passed"
    assert data["listener"]["state"] == "finished"
    assert sections["peer"]["status"] == "ok" and sections["peer"]["data"]["facts"]["host"]["peer"] == "127.0.0.1"
    assert sections["probe"]["status"] == "ok"
    whats = [t["what"] for t in data["timeline"]]
    assert whats.index("agent: listener report") < whats.index("agent: facts")   # facts after the burst


def test_an_agent_client_slow_to_start_still_gets_the_exchange(child_mode, monkeypatch):
    """On a slow guest the client's agent thread starts late (its validators take seconds to build) while the
    verbs child is already up: the child waits for the agent's answer instead of a bare connect that a listener
    not yet started rejects."""
    from rdmadoctor.runtime import jsonio
    prepare = jsonio.prepare

    def slow_prepare(*args, **kwargs):
        time.sleep(2.0)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(jsonio, "prepare", slow_prepare)
    child_mode("established")
    with running_agent(token=TOKEN) as (_, port):
        data = Probe(options(port, token=TOKEN)).run()
    assert data["cm"]["mode"] == "agent" and data["exchange"]["state"] == "passed", data["timeline"]


def test_without_an_agent_a_bare_connect_still_runs(child_mode):
    child_mode("rejected")
    port = closed_port()
    probe = Probe(options(port))
    data = probe.run()
    assert data["tcp"][0]["state"] == "refused" and data["agent"]["state"] == "refused"
    assert data["cm"]["mode"] == "bare" and data["cm"]["port"] == port + 1
    assert data["cm"]["connect"]["state"] == "rejected" and data["exchange"] is None
    peer = probe.sections()["peer"]
    assert peer["status"] == "unavailable" and "connection refused" in peer["reason"]


def test_a_silent_connect_is_killed_at_its_deadline(child_mode):
    child_mode("hang-connect")
    started = time.monotonic()
    data = Probe(options(closed_port(), deadlines={"connect": 1.0})).run()
    assert data["cm"]["connect"]["state"] == "timeout" and 0.9 < data["cm"]["connect"]["seconds"] < 2.0
    assert any("deadline: connect" in t["what"] for t in data["timeline"])
    assert time.monotonic() - started < 8


def test_a_hung_write_is_killed_and_named(child_mode):
    child_mode("hang-write")
    with running_agent() as (_, port):
        data = Probe(options(port, deadlines={"write": 1.0})).run()
    assert data["exchange"]["state"] == "timeout" and data["exchange"]["failed_op"] == "write"
    assert data["listener"]["state"] == "finished"        # the agent was still asked for its report


def test_without_pyverbs_rungs_4_to_7_are_not_inspected(child_mode):
    child_mode("import")
    probe = Probe(options(closed_port()))
    data = probe.run()
    assert data["cm"]["run"] is False and "pyverbs" in data["cm"]["why"]
    probe_section = probe.sections()["probe"]
    assert probe_section["status"] == "partial" and probe_section["unreadable"][0]["what"].startswith("rdma_cm")


def test_a_child_that_does_not_start_is_given_up_on(child_mode):
    child_mode("slow-start")
    started = time.monotonic()
    data = Probe(options(closed_port(), deadlines={"startup": 1.0})).run()
    assert data["cm"]["run"] is False and "did not start" in data["cm"]["why"]
    assert time.monotonic() - started < 5


def test_collect_with_probe_adds_two_sections_and_starts_collecting_after_the_child(child_mode):
    child_mode("rejected")
    seen = {}

    def collect(ctx):
        seen["at"] = time.monotonic()
        return {"schema": "rdmadoctor-facts/1", "host": {"peer": ctx.peer}, "sections": {}}

    started = time.monotonic()
    facts = collect_with_probe(CollectContext(peer="127.0.0.1"), options(closed_port()), collect=collect)
    assert set(facts["sections"]) == {"probe", "peer"}
    assert facts["sections"]["probe"]["data"]["cm"]["connect"]["state"] == "rejected"
    assert seen["at"] - started < 3.5


def test_a_dead_peer_costs_one_timeout_not_two(child_mode, monkeypatch):
    """The agent's TCP attempt and the bare rdma_cm connect run side by side: the connect does not wait for a
    TCP timeout before it starts."""
    from rdmadoctor.probe import run

    def silent_agent(peer, port, timeout, token, source=None, before_validators=None):
        time.sleep(2.0)
        return None, {"port": port, "state": "timeout", "seconds": 2.0}

    monkeypatch.setattr(run, "agent_connect", silent_agent)
    child_mode("rejected")
    data = Probe(options(closed_port())).run()
    whats = [t["what"] for t in data["timeline"]]
    tcp = next(i for i, w in enumerate(whats) if w.startswith("TCP ") and w.endswith("timeout"))
    assert data["cm"]["mode"] == "bare" and data["cm"]["connect"]["state"] == "rejected", whats
    assert any(w.startswith("rdma_cm") for w in whats[:tcp]), whats
