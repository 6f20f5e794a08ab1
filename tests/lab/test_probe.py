"""`rdmadoctor check --peer` live in the Soft-RoCE lab: each fault made for real, the verdict asserted, the time
to verdict recorded.

One boot for everything (the session's lab, pair RDMADOCTOR_LAB_PROBE_PAIR, default "mixed": h1 = 192.0.2.1
bookworm, h2 = 192.0.2.2 trixie, so pyverbs 44 and 56, Python 3.11 and 3.13 both run the verbs child). The
check runs inside h2 against h1 (the reverse scenario swaps them); the agent on the peer runs with a token.
Every scenario starts from Lab.reset()'s healthy baseline (the guests' kernel logs are not reset: the scenarios
that end in "ok" or a warning come first, before any that makes rxe log completion errors) and leaves its recording in
artifacts/lab/probe/<pair>/<scenario>/check.json; the table of verdicts and times is printed at the end and
written to artifacts/lab/probe/<pair>/results.md (docs/probe.md quotes it).

    pytest tests/lab/test_probe.py -s          (about 10 minutes on a 2-core machine, boot included)
"""
from __future__ import annotations

import json
import os
import time
import weakref
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import pytest

from tests.lab.agents import start_agent
from tests.lab.vm import REPO

PAIR = os.environ.get("RDMADOCTOR_LAB_PROBE_PAIR", "mixed")
OUT = REPO / "artifacts" / "lab" / "probe" / PAIR
TOKEN = "lab-probe-token-0123456789"
TOKEN_FILE = "/tmp/rdmadoctor-agent.token"
WRONG_ADDRESS = "192.0.2.3"          # TEST-NET-1, nobody on the wire has it
CHECK_TIMEOUT = 240
VERDICT_BUDGET = 10.0                 # a dead or filtered peer: the probe's verdict within this many seconds
RESULTS: List[Dict] = []


def _nft(rule: str, hook: str = "input") -> str:
    """Shell that adds `rule` to an inet filter chain on `hook` (input: what arrives; output: what this host sends)."""
    return ("nft add table inet filter && "
            f"nft add chain inet filter {hook} '{{ type filter hook {hook} priority 0; policy accept; }}' && "
            f"nft add rule inet filter {hook} " + rule)


@dataclass(frozen=True)
class ProbeScenario:
    name: str
    description: str
    expect_status: str
    expect_cause: Optional[str]
    expect_rules: Tuple[str, ...] = ()             # the verdict's rule is one of these (when given)
    rungs: Dict[int, str] = field(default_factory=dict)
    agent: bool = True
    setup: Tuple[Tuple[str, str], ...] = ()        # (host, root shell) after the agent started
    client: str = "h2"
    target: Optional[str] = None                    # default: the other host's address
    args: Tuple[str, ...] = ()
    dead_or_filtered: bool = False                  # the verdict must come within VERDICT_BUDGET
    title_has: Tuple[str, ...] = ()
    peer_server: Optional[str] = None               # a perftest server left waiting on the peer
    log: Optional[str] = None                       # a recorded client log (fixtures/lab/bookworm/<this>) for --log


SCENARIOS = [
    ProbeScenario("healthy", "healthy pair, agent on the peer", "ok", None,
                  rungs={n: "passed" for n in range(1, 8)}),
    ProbeScenario("healthy-reverse", "healthy pair, the other way round (h1 probes h2's agent)", "ok", None,
                  rungs={n: "passed" for n in range(1, 8)}, client="h1"),
    ProbeScenario("agent-not-running", "no agent on the peer: the rungs that need none", "ok", None,
                  rungs={1: "passed", 2: "passed", 3: "passed", 4: "passed", 5: "passed", 6: "not-inspected",
                         7: "not-inspected"}, agent=False),
    # check reads the probing host's own qdiscs: the netem itself is the verdict, ahead of the loss the burst saw
    ProbeScenario("netem-loss-1pct", "tc netem drops 1% of the probing host's packets (the burst's data)",
                  "failure", "packet-loss", ("HOST-NETEM-SOFT-ROCE",), rungs={5: "passed", 6: "passed"},
                  setup=(("client", "tc qdisc add dev eth0 root netem loss 1%"),),
                  title_has=("loses 1% of packets",)),
    ProbeScenario("tcp-drop", "nft on the peer drops TCP 18515 and 18600", "failure", "firewall-blocks-port",
                  ("PEER-TCP-FILTERED",), rungs={1: "passed", 2: "failed", 3: "skipped", 7: "skipped"},
                  setup=(("peer", _nft("tcp dport { 18515, 18600 } drop")),), args=("--probe-perftest",),
                  dead_or_filtered=True),
    ProbeScenario("tcp-reject", "nft on the peer rejects TCP 18515 and 18600", "failure", "firewall-blocks-port",
                  ("PEER-TCP-REJECTED",), rungs={2: "failed", 3: "skipped"},
                  setup=(("peer", _nft("tcp dport { 18515, 18600 } reject")),), args=("--probe-perftest",),
                  dead_or_filtered=True),
    ProbeScenario("udp-4791-drop", "nft on the peer drops UDP 4791 (RoCEv2); TCP passes", "failure",
                  "firewall-blocks-port", ("PEER-REMOTE-FIREWALL-ROCE",), rungs={4: "passed", 5: "failed"},
                  setup=(("peer", _nft("udp dport 4791 drop")),), title_has=("inet filter input handle",)),
    ProbeScenario("mtu-mismatch", "netdev MTU 9000 on the probing host, 1500 on the peer", "failure",
                  "mtu-mismatch", ("PEER-MTU-MISMATCH-BREAKS",), rungs={5: "passed", 6: "failed"},
                  setup=(("client", "ip link set eth0 mtu 9000"),), title_has=("9000 here, 1500 on the peer",)),
    ProbeScenario("peer-netdev-down", "the peer's eth0 (under rxe0) is down", "failure", "port-down",
                  ("PEER-GONE",), rungs={2: "failed", 3: "skipped"},
                  setup=(("peer", "ip link set eth0 down"),), dead_or_filtered=True),
    # what the peer's perftest runs, set against a client log that failed (the peer's agent reports its processes)
    ProbeScenario("peer-perftest-other-port", "the peer's ib_write_bw listens on 18520; the log's client used 18515",
                  "failure", "option-mismatch", ("PEER-PERFTEST-ELSEWHERE",), rungs={6: "passed"},
                  peer_server="ib_write_bw -d rxe0 -n 100 -s 65536 -p 18520", log="server-not-running/client.log",
                  title_has=("The peer's ib_write_bw on port 18520 with -s 65536 -n 100; this client connects "
                             "to 18515",)),
    ProbeScenario("peer-perftest-other-size", "the peer's ib_write_bw runs -s 1024; the log's client -s 65536",
                  "failure", "option-mismatch", ("PEER-PERFTEST-OPTIONS",), rungs={6: "passed"},
                  peer_server="ib_write_bw -d rxe0 -s 1024 -n 100", log="size-client-larger/client.log",
                  title_has=("message size (-s): 1024 on the peer, 65536 here",)),
    ProbeScenario("peer-perftest-other-binary", "the peer runs ib_write_bw; the log's client ib_read_bw",
                  "failure", "option-mismatch", ("PEER-PERFTEST-OPTIONS",), rungs={6: "passed"},
                  peer_server="ib_write_bw -d rxe0 -n 100", log="binary-write-server-read-client/client.log",
                  title_has=("RDMA operation (test binary): WRITE on the peer, READ here",)),
    ProbeScenario("peer-perftest-none", "no perftest server on the peer; the log's client could not connect",
                  "failure", "server-not-running", ("PEER-PERFTEST-NONE-CONNECT",), rungs={6: "passed"},
                  log="server-not-running/client.log", title_has=("No perftest server runs on",)),
    ProbeScenario("wrong-peer-address", f"check --peer {WRONG_ADDRESS}: nobody has it", "failure",
                  "wrong-peer-address", ("HOST-PEER-NEIGHBOUR-FAILED", "PEER-NO-ARP"), rungs={2: "failed"},
                  agent=False, target=WRONG_ADDRESS, dead_or_filtered=True),
    ProbeScenario("peer-rxe-on-other-netdev", "the peer's rxe0 sits on a dummy netdev without an address; its "
                  "address stays on eth0", "failure", "gid-missing", ("PEER-REMOTE-NO-IPV4-GID",),
                  rungs={2: "passed", 5: "failed"},
                  setup=(("peer", "rdma link delete rxe0 && ip link add rdt0 type dummy && ip link set rdt0 up && "
                                  "rdma link add rxe0 type rxe netdev rdt0"),)),
    ProbeScenario("route-via-other-netdev", "a /32 route on the probing host sends the peer's address through a "
                  "dummy netdev", "failure", "route-via-wrong-interface", ("HOST-PEER-ROUTE-NOT-RDMA",),
                  rungs={2: "failed"},
                  setup=(("client", "ip link add rdt0 type dummy && ip link set rdt0 up && "
                                    "ip addr add 198.51.100.2/24 dev rdt0 && ip route add 192.0.2.1/32 dev rdt0"),)),
    ProbeScenario("static-neighbour-other-mac", "a permanent neighbour entry on the probing host holds the peer's "
                  "address at a MAC nobody has", "failure", "wrong-neighbour-mac", ("PEER-NEIGHBOUR-STATIC-OTHER-MAC",),
                  rungs={2: "failed"}, dead_or_filtered=True,
                  setup=(("client", "ip neigh replace 192.0.2.1 lladdr 02:00:00:00:00:01 dev eth0 nud permanent"),)),
    # last: the verbs child stays stuck in the kernel (cm_destroy_id) after its deadline; the check must still end
    ProbeScenario("egress-udp-4791-drop", "nft on the probing host drops the UDP 4791 it sends (RoCEv2)", "failure",
                  "firewall-blocks-port", ("HOST-FIREWALL-EGRESS",), rungs={2: "passed"},
                  setup=(("client", _nft("udp dport 4791 drop", hook="output")),)),
]


_PREPARED: "weakref.WeakSet" = weakref.WeakSet()      # the guests that have the token and warm caches


def _prepared(lab):
    """The lab, every guest given the agents' token and its caches warmed once (first imports over 9p), so that
    the first scenario is timed like the others; a guest booted afresh after one was gone is prepared too."""
    for vm in lab.hosts.values():
        if vm not in _PREPARED:
            vm.sh(f"umask 077 && printf '%s\\n' '{TOKEN}' > {TOKEN_FILE}")
            vm.run(["python3", "-m", "rdmadoctor", "check", "--sample", "0"], timeout=CHECK_TIMEOUT,
                   env=vm.python_env())
            _PREPARED.add(vm)
    return lab


@pytest.fixture(scope="module")
def lab(lab_manager):
    lab = _prepared(lab_manager.get(PAIR))
    yield lab
    if RESULTS:
        table = results_table(RESULTS, lab)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.md").write_text(table + "\n")
        print("\n" + table)


def results_table(rows: List[Dict], lab) -> str:
    head = (f"Pair `{PAIR}`: h1 {lab.releases['h1']}, h2 {lab.releases['h2']} (TCG guests, 1 vCPU each)\n\n"
            "| scenario | verdict | rule | first broken rung | probe decided (s) | check --peer total (s) |\n"
            "|---|---|---|---|---:|---:|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['status']} {r['cause'] or ''} | {r['rule'] or '-'} | "
                     f"{r['broken'] or '-'} | {r['probe']:.1f} | {r['total']:.1f} |")
    return "\n".join(lines)


def _wait_for_banner(vm, handle: int, deadline: float = 20.0) -> None:
    """A perftest server is listening once it printed its banner."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        state = vm.peek(handle)
        if "Waiting for client" in state.get("stdout", "") + state.get("stderr", ""):
            return
        if not state.get("running", True):
            pytest.fail(f"the perftest server on {vm.name} exited: {state}")
        time.sleep(0.3)
    pytest.fail(f"the perftest server on {vm.name} printed no banner within {deadline} s")


@pytest.mark.lab
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_probe(lab_manager, lab, scenario: ProbeScenario):
    # a guest gone in the middle runs the scenario again on a fresh one (LabManager.run, test_guest_gone.py)
    result, total = lab_manager.run(PAIR, lambda lab: _check_peer(_prepared(lab), scenario), OUT / scenario.name)
    assert not result.timed_out, result.output[-3000:]
    _verdict(result, total, scenario)


def _check_peer(lab, scenario: ProbeScenario):
    """The scenario's fault made from the healthy baseline, and `check --peer` run: (its Result, seconds)."""
    lab.reset()
    client = lab.hosts[scenario.client]
    peer = lab.hosts["h1" if scenario.client == "h2" else "h2"]
    agent = start_agent(peer, TOKEN_FILE) if scenario.agent else None
    server = peer.spawn(scenario.peer_server, pty=True) if scenario.peer_server else None
    try:
        for where, sh in scenario.setup:
            (peer if where == "peer" else client).sh(sh)
        target = scenario.target or peer.address
        log_args: Tuple[str, ...] = ()
        if scenario.log:
            text = (REPO / "fixtures" / "lab" / "bookworm" / scenario.log).read_text()
            client.put("/tmp/client.log", text.replace("192.0.2.1", peer.address))
            log_args = ("--log", "/tmp/client.log")
        if server is not None:
            _wait_for_banner(peer, server)
        argv = ["python3", "-m", "rdmadoctor", "check", "--peer", target, "--token-file", TOKEN_FILE, "--json",
                *scenario.args, *log_args]
        started = time.monotonic()
        result = client.run(argv, timeout=CHECK_TIMEOUT, env=client.python_env())
        return result, time.monotonic() - started
    finally:
        if agent is not None:
            peer.kill(agent)
        if server is not None:
            peer.kill(server)


def _verdict(result, total: float, scenario: ProbeScenario) -> None:
    try:
        doc = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"check --peer gave no JSON (rc {result.rc}):\n{result.output[-3000:]}")
    out = OUT / scenario.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "check.json").write_text(json.dumps(doc, indent=1))
    probe = doc["facts"]["sections"]["probe"]["data"]
    rungs = {i + 1: r for i, r in enumerate(r for r in doc["rungs"] if r["name"].startswith("peer-"))}
    broken = next((f"{n} {r['name']}" for n, r in rungs.items() if r["state"] == "failed"), None)
    verdict = doc["verdict"]
    RESULTS.append({"scenario": scenario.name, "status": verdict["status"], "cause": verdict["cause"],
                    "rule": verdict["rule"], "broken": broken, "probe": probe.get("network_seconds") or 0.0,
                    "total": result.seconds or total})
    summary = f"{verdict}; rungs {[(n, r['state'], r['detail'][:80]) for n, r in rungs.items()]}"
    assert verdict["status"] in scenario.expect_status.split("|"), summary
    assert verdict["cause"] == scenario.expect_cause, summary
    if scenario.expect_rules:
        assert verdict["rule"] in scenario.expect_rules, summary
    for n, state in scenario.rungs.items():
        assert rungs[n]["state"] == state, (n, rungs[n], summary)
    for text in scenario.title_has:
        assert any(text in f["title"] for f in doc["findings"]), [f["title"] for f in doc["findings"]]
    if scenario.dead_or_filtered:
        assert probe["network_seconds"] < VERDICT_BUDGET, probe["timeline"]
    if scenario.agent and scenario.name.startswith("healthy"):
        assert doc["facts"]["sections"]["peer"]["data"]["agent"]["auth"] == "hmac-sha256"
        assert probe["listener"]["state"] == "finished"
