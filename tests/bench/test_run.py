"""run_sweep's control flow, with the peer and the local client replaying what the lab printed
(fixtures/lab/bench/sweep-memlock.json: a real sweep between the two VMs, 4K and 64K ok, 1M out of locked
memory): Ctrl-C stops both sides and keeps what was done, a combination the agent refuses is recorded and
the sweep goes on or stops as asked, and a failed combination is explained from both logs."""
import json
from pathlib import Path

import pytest

from rdmadoctor.bench import plan
from rdmadoctor.engine.diagnose import explain_combo
from rdmadoctor.bench.remote import BenchAgentError
from rdmadoctor.bench.run import run_sweep

ROOT = Path(__file__).resolve().parents[2]
RECORDED = {r["size"]: r for r in json.loads((ROOT / "fixtures/lab/bench/sweep-memlock.json").read_text())["results"]}
PEER = "192.0.2.1"


def output(log: str) -> str:
    """The recorded log without the prompt line the sweep put in front of it."""
    return log.split("\n", 1)[1]


class ScriptedPeer:
    """The agent's side: starts 'servers' whose output is the recorded one; refuses the sizes in `refuse`."""

    def __init__(self, refuse=()):
        self.refuse, self.started, self.stopped, self.waited = set(refuse), [], [], []

    def start_server(self, spec):
        size = int(spec.get("size"))
        if size in self.refuse:
            raise BenchAgentError(f"the agent refused: size {size}")
        self.started.append(size)
        return {"handle": size, "port": 18520, "argv": spec.argv(port=18520)}

    def wait_server(self, handle, wait):
        self.waited.append(handle)
        return {"output": output(RECORDED[handle]["server_log"]), "rc": 0, "timed_out": False}

    def stop_server(self, handle):
        self.stopped.append(handle)


def client_replay(interrupt_at=None):
    def client(argv, timeout):
        size = int(next(a for a in argv if a.startswith("--size=")).split("=")[1])
        if size == interrupt_at:
            raise KeyboardInterrupt
        rc = 0 if RECORDED[size]["status"] == "ok" else 1
        return {"output": output(RECORDED[size]["client_log"]), "rc": rc, "timed_out": False}
    return client


def specs():
    return plan.Sweep("ib_write_bw", [1], plan.parse_sizes("4K,64K,1M"), {"iters": 100}).specs()


def test_a_sweep_measures_the_good_combinations_and_explains_the_failed_one():
    peer = ScriptedPeer()
    result = run_sweep(specs(), PEER, peer, client=client_replay())
    assert [(r.size, r.status) for r in result.results] == [(4096, "ok"), (65536, "ok"), (1048576, "failed")]
    assert all(r.bw_avg_gbps for r in result.results[:2])
    failed = result.results[2]
    assert failed.verdict is None                  # recorded, not yet judged
    assert explain_combo(failed).verdict.cause == "memlock-limit"
    assert failed.verdict["cause"] == "memlock-limit" and explain_combo(failed) is explain_combo(failed)
    assert failed.server_log.startswith("server$ ib_write_bw") and "--port=18520" in failed.server_log
    assert peer.waited == [4096, 65536, 1048576] and not peer.stopped and not result.interrupted


def test_ctrl_c_stops_the_peer_server_and_keeps_what_was_done():
    peer = ScriptedPeer()
    result = run_sweep(specs(), PEER, peer, client=client_replay(interrupt_at=65536))
    assert result.interrupted
    assert [r.size for r in result.results] == [4096]
    assert peer.stopped == [65536]           # the server of the interrupted combination, not a later one
    assert peer.started == [4096, 65536]


@pytest.mark.parametrize("stop_on_failure, sizes", [(False, [4096, 65536, 1048576]), (True, [4096])])
def test_a_refused_combination_is_recorded_and_the_sweep_goes_on_or_stops_as_asked(stop_on_failure, sizes):
    peer = ScriptedPeer(refuse={65536})
    result = run_sweep(specs(), PEER, peer, client=client_replay(), stop_on_failure=stop_on_failure)
    assert [r.size for r in result.results] == [4096, 65536] + ([1048576] if not stop_on_failure else [])
    refused = result.results[1]
    assert refused.status == "failed" and "size 65536" in refused.verdict["summary"]
    assert peer.started == [s for s in sizes if s != 65536]


def test_an_unexpected_agent_error_is_not_swallowed():
    class Broken(ScriptedPeer):
        def start_server(self, spec):
            raise ConnectionResetError("peer went away")
    with pytest.raises(ConnectionResetError):
        run_sweep(specs(), PEER, Broken(), client=client_replay())
