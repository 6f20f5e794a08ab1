"""`check --peer IP`: run the probe ladder's network work alongside this host's fact collection.

The rungs are judged in order (probe/view.py, probe/ladder.py), but their work overlaps in time, so that a
dead or filtered peer costs one deadline and not the sum of them (the verdict must come within 10 s, not
after TCP's two minutes):

    t=0   TCP connect to the agent port          thread: hello/auth, listen; after the exchange: result, facts
    t≈1   facts collection (this host)          thread, once the verbs child is up (its start is on the
                                                 path to a dead peer's verdict; the collectors compete)
          (and to the perftest port, if asked)   thread
    t=0   verbs child (Python + pyverbs import)  then one rdma_cm connect, phase by phase, each with its
                                                 own deadline; killed at the first one that passes
          ARP request (root), only when TCP got no answer at all

The child connects to the agent's listener when the agent answered in time (exchange and burst follow), else
to the same rdma_cm port with nobody listening ("bare": REJECTED proves the RDMA path, UNREACHABLE or no
answer does not). Everything found goes into two facts sections, so `--save` keeps it and `--from` replays it:
    sections.probe   what each rung saw (this module's `data`)
    sections.peer    what the peer's agent answered: its facts, asked about this host's address
"""
from __future__ import annotations

import datetime as _dt
import socket
import threading
import time

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from rdmadoctor.knowledge.perftest import DEFAULT_PORT as PERFTEST_PORT
from rdmadoctor.probe import protocol as proto
from rdmadoctor.probe.agent_client import AgentFailure, AgentSession, connect as agent_connect
from rdmadoctor.probe import child as child_mod
from rdmadoctor.probe import reach
from rdmadoctor.runtime.net import ipv4_of

DEADLINES = {            # seconds per phase of the verbs child (each starts when the phase does)
    "startup": 8.0,      # Python + pyverbs import (1-2 s on a slow VM)
    "first": 3.0,        # from the instruction to the first phase event
    "addr": 3.0,         # rdma_resolve_addr(timeout 2000 ms) + margin
    "route": 3.0,
    "setup": 5.0,        # QP creation and memory registration
    "connect": 5.0,      # one CM retry (~4.3 s) fits; a silent peer would take ~60 s
    "info": 5.0, "write": 5.0, "read": 5.0, "send": 5.0, "verdict": 5.0,
    "burst": 6.0,        # burst_seconds + the last completions
}
EXCHANGE_PHASES = ("info", "write", "read", "send", "verdict")
TCP_TIMEOUT = 3.5        # a SYN retransmission (1 s) and the kernel's ARP attempts (3 x 1 s) fit
LISTEN_TIMEOUT = 25.0    # the agent starts its listener child (Python + pyverbs on the peer)
FACTS_TIMEOUT = 95.0     # the peer collects its facts (agent/server.py: 60 s budget, maybe after another client's)
LOCAL_FACTS_BUDGET = 45.0     # this host's collection while the probe runs: the command waits for the peer's
LOCAL_COLLECTOR_TIMEOUT = 30.0  # facts anyway, so slow collectors get time to finish instead of "timed out"
RESULT_WAIT = 5.0
CLIENT_START = 20.0      # the agent client builds its answer validators once connected and the verbs child is up
ARP_TIMEOUT = 1.0
FACTS_AFTER = DEADLINES["startup"]
BAD_ANSWER_CODES = ("bad-answer", "unauthenticated")   # agent_client's codes for an answer not to be believed


@dataclass
class ProbeOptions:
    peer: str
    agent_port: int = proto.DEFAULT_PORT
    token: Optional[bytes] = None
    perftest_port: Optional[int] = None       # also try a TCP connect to the peer's perftest port
    facts_port: int = PERFTEST_PORT           # the perftest port the peer's facts are asked about
    burst_seconds: float = 1.0
    deadlines: Dict[str, float] = field(default_factory=lambda: dict(DEADLINES))
    tcp_timeout: float = TCP_TIMEOUT
    use_agent: bool = True
    child_script: str = child_mod.SCRIPT      # tests point it at a fake child


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def source_for(peer: str) -> Dict[str, Optional[str]]:
    """The address and interface the kernel would send from (a UDP connect sends nothing)."""
    out: Dict[str, Optional[str]] = {"address": None, "ifname": None}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((peer, 9))
            out["address"] = s.getsockname()[0]
    except OSError:
        return out
    try:
        for _, name in socket.if_nameindex():
            if ipv4_of(name) == out["address"]:
                out["ifname"] = name
                break
    except OSError:
        pass
    return out


class Probe:
    def __init__(self, opts: ProbeOptions):
        self.opts = opts
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.agent_tcp_done = threading.Event()
        self.child_ready = threading.Event()          # the verbs child started (or could not): facts may begin
        self.listener_decided = threading.Event()
        self.exchange_done = threading.Event()
        self.listen: Optional[Dict[str, Any]] = None
        self.peer_facts: Optional[Dict[str, Any]] = None
        self.peer_error: Optional[str] = None
        self.source = source_for(opts.peer)
        self.data: Dict[str, Any] = {
            "peer": opts.peer, "agent_port": opts.agent_port, "rdma_port": opts.agent_port + 1,
            "started": _now(), "source": self.source, "tcp": [], "arp": {"state": "not-run"},
            "neighbour_before": reach.arp_entry(opts.peer), "agent": {"state": None},
            "cm": {"run": False}, "exchange": None, "burst": None, "listener": None, "timeline": [],
            "deadlines": dict(opts.deadlines, tcp=opts.tcp_timeout),
        }

    def mark(self, what: str) -> None:
        with self.lock:
            self.data["timeline"].append({"t": round(time.monotonic() - self.t0, 3), "what": what})

    # -- the agent (its own thread) -----------------------------------------------------------------------
    def agent_thread(self) -> None:
        opts = self.opts
        if not opts.use_agent:
            self.data["agent"] = {"state": "not-asked"}
            self.agent_tcp_done.set()
            self.listener_decided.set()
            return
        # the verbs child starts first: its deadline is on a dead peer's path, the validators' build is not
        session, outcome = agent_connect(opts.peer, opts.agent_port, opts.tcp_timeout, opts.token,
                                         source=self.source.get("address"),
                                         before_validators=lambda: self.child_ready.wait(FACTS_AFTER))
        outcome["role"] = "agent"
        with self.lock:
            self.data["tcp"].insert(0, outcome)
        self.mark(f"TCP {opts.agent_port}: {outcome['state']}")
        self.agent_tcp_done.set()
        if session is None:
            self.data["agent"] = {"state": outcome["state"]}
            self.listener_decided.set()
            if outcome["state"] == "timeout" or (outcome["state"] == "unreachable" and not outcome.get("no_arp")):
                self.arp()
            return
        try:
            self._talk(session)
        finally:
            self.listener_decided.set()
            session.close()

    def _talk(self, session: AgentSession) -> None:
        opts = self.opts
        try:
            hello = session.greet()
        except AgentFailure as exc:
            self.data["agent"] = {"state": exc.code, "error": exc.message}
            self._note_bad(exc)
            self.peer_error = f"the agent at {opts.peer}:{opts.agent_port} {exc.message}"
            self.mark(f"agent: {exc.code}")
            return
        self.data["agent"] = {"state": "answered", "version": hello.get("version"), "protocol": hello.get("protocol"),
                              "auth": hello.get("auth"), "seen_as": hello.get("client"), "bind": hello.get("bind"),
                              "ops": hello.get("ops")}
        self.mark("agent: hello")
        try:
            self.listen = session.call("listen", LISTEN_TIMEOUT)
            self.data["agent"]["listener"] = {k: self.listen.get(k) for k in ("address", "rdma_port", "deadline")}
            self.mark(f"agent: listening on rdma_cm {self.listen.get('address')}:{self.listen.get('rdma_port')}")
        except AgentFailure as exc:
            self.data["agent"]["listen_error"] = f"{exc.code}: {exc.message}"
            self._note_bad(exc)
            self.mark(f"agent: listen failed ({exc.code})")
        self.listener_decided.set()
        if self.listen is not None:
            # the peer collects its facts after the exchange and burst, so they do not disturb the measurement
            self.exchange_done.wait(sum(opts.deadlines.values()) + LISTEN_TIMEOUT)
            try:
                # the listener's report ends with the burst; nothing more comes after a failure
                connected = (self.data["cm"].get("connect") or {}).get("state") == "established"
                passed = (self.data.get("exchange") or {}).get("state") == "passed"
                wait = RESULT_WAIT if passed else (1.0 if connected else 0.0)
                answer = session.call("result", wait + 5.0, wait=wait)
                self.data["listener"] = answer.get("listener")
                self.mark("agent: listener report")
            except AgentFailure as exc:
                self.data["listener"] = {"state": "error", "error": f"{exc.code}: {exc.message}"}
                self._note_bad(exc)
        try:
            started = time.monotonic()
            answer = session.call("facts", FACTS_TIMEOUT, port=opts.facts_port)
            self.peer_facts = answer.get("facts")
            self.data["agent"]["facts_seconds"] = round(time.monotonic() - started, 3)
            self.mark("agent: facts")
        except AgentFailure as exc:
            self.peer_error = f"the agent did not give its facts: {exc.code}: {exc.message}"
            self._note_bad(exc)
            self.mark(f"agent: facts failed ({exc.code})")

    def _note_bad(self, exc: AgentFailure) -> None:
        """An answer that is not a valid one (wrong shape, failed its MAC): the agent is not to be believed,
        and `check` says so instead of judging with half of what it sent (agent.bad_answer)."""
        if exc.code in BAD_ANSWER_CODES and "bad_answer" not in self.data["agent"]:
            self.data["agent"]["bad_answer"] = f"{exc.code}: {exc.message}"

    def perftest_thread(self, port: int) -> None:
        _, outcome = reach.tcp_connect(self.opts.peer, int(port), self.opts.tcp_timeout,
                                       source=self.source.get("address"))
        outcome["role"] = "perftest"
        with self.lock:
            self.data["tcp"].append(outcome)
        self.mark(f"TCP {self.opts.perftest_port}: {outcome['state']}")

    def arp(self) -> None:
        ifname, address = self.source.get("ifname"), self.source.get("address")
        if not ifname or not address:
            self.data["arp"] = {"state": "not-run", "why": "no egress interface for the peer"}
            return
        self.data["arp"] = reach.arp_probe(ifname, address, self.opts.peer, ARP_TIMEOUT)
        self.mark(f"ARP: {self.data['arp']['state']}")

    # -- the verbs child (the calling thread) ---------------------------------------------------------------
    def verbs(self) -> None:
        opts = self.opts
        deadline = self.t0 + opts.deadlines["startup"]
        try:
            child, ready = child_mod.start_ready("client", deadline=deadline, script=opts.child_script)
        finally:
            self.child_ready.set()
        cm = self.data["cm"]
        if child is None:
            kind = ready.get("kind")
            cm.update(run=False, why=("pyverbs is not importable here: " + str(ready.get("error"))
                                      if kind == "import" else str(ready.get("error"))), python=ready.get("python"))
            self.mark("verbs child: " + str(kind))
            return
        cm.update(pyverbs=ready.get("pyverbs"), python=ready.get("python"), executable=ready.get("executable"))
        self.mark("verbs child ready")
        try:
            if self._agent_answered():
                self.listener_decided.wait(LISTEN_TIMEOUT)
            if self.listen is not None:
                self.connect(child, agent=True)
                return
            # a bare connect runs alongside the agent's TCP attempt, so a dead peer costs one timeout, not two
            self.connect(child, agent=False)
            # a peer whose agent answers late rejected that connect: its listener was not up yet
            self.agent_tcp_done.wait(opts.tcp_timeout + CLIENT_START)
            if self._agent_answered():
                self.listener_decided.wait(LISTEN_TIMEOUT)
            if self.listen is not None and child.alive():
                self.connect(child, agent=True)
        finally:
            self.exchange_done.set()
            child.close()

    def _agent_answered(self) -> bool:
        return self.agent_tcp_done.is_set() and bool(self.data["tcp"]) and self.data["tcp"][0].get("state") == "open"

    def connect(self, child: child_mod.Child, agent: bool) -> None:
        opts = self.opts
        rdma_port: Any = (self.listen or {}).get("rdma_port")
        port = int(rdma_port) if agent and self.listen else opts.agent_port + 1
        dst = (self.listen or {}).get("address") if agent else None
        instr = {"op": "connect", "dst": dst or opts.peer, "src": None, "port": port, "exchange": agent,
                 "nonce": (self.listen or {}).get("nonce") if agent else None, "burst_seconds": opts.burst_seconds}
        cm: Dict[str, Any] = {"run": True, "mode": "agent" if agent else "bare", "port": port,
                              "pyverbs": self.data["cm"].get("pyverbs"), "python": self.data["cm"].get("python")}
        self.data["cm"] = cm
        exchange: Dict[str, Any] = {"ops": {}, "seconds": 0.0}
        if not child.send(instr):
            cm["error"] = "the verbs child is gone"
            return
        self.mark(f"rdma_cm connect to {instr['dst']}:{port} ({cm['mode']})")
        phase, deadline = "first", time.monotonic() + opts.deadlines["first"]
        started = time.monotonic()
        while True:
            event = child.next_event(deadline)
            if event is None:
                self.timeout(phase, started, cm, exchange)
                child.kill()
                break
            if event.get("ev") == "phase":
                phase = event.get("phase") or "?"
                started = time.monotonic()
                deadline = started + opts.deadlines.get(phase, 5.0) + (
                    opts.burst_seconds if phase == "burst" else 0.0)
            elif self.record(event, cm, exchange, child):
                break

    def record(self, event: Dict[str, Any], cm: Dict[str, Any], exchange: Dict[str, Any],
               child: child_mod.Child) -> bool:
        """Keeps what one event of the verbs child says; True when the child is done with the instruction."""
        kind = event.get("ev")
        if kind in ("addr", "route", "setup", "connect"):
            cm[kind] = {k: v for k, v in event.items() if k not in ("ev", "t")}
            self.mark(f"rdma_cm {kind}: {event.get('state')}")
        elif kind == "op":
            exchange["ops"][event.get("op")] = "ok" if event.get("ok") else "failed"
            exchange["seconds"] = round(exchange["seconds"] + (event.get("seconds") or 0.0), 3)
        elif kind == "exchange":
            exchange.update({k: v for k, v in event.items() if k not in ("ev", "t", "ops")})
            self.data["exchange"] = exchange
            self.mark(f"exchange: {event.get('state')}")
        elif kind == "burst":
            self.data["burst"] = {k: v for k, v in event.items() if k not in ("ev", "t")}
            self.mark(f"burst: {event.get('state')} {event.get('gbps')} Gb/s")
        elif kind == "error":
            cm["error"] = event.get("error")
        elif kind in ("idle", "eof", "fatal", "exit"):
            if kind != "idle":
                cm.setdefault("error", event.get("error") or f"the verbs child ended ({kind}): "
                                                              f"{child.stderr_tail() or 'no output'}")
            return True
        return False

    def timeout(self, phase: str, started: float, cm: Dict[str, Any], exchange: Dict[str, Any]) -> None:
        seconds = round(time.monotonic() - started, 3)
        self.mark(f"deadline: {phase} after {seconds} s (child killed)")
        if phase in ("first", "addr"):
            cm["addr"] = {"state": "timeout", "seconds": seconds}
        elif phase in ("route", "setup", "connect"):
            cm[phase] = {"state": "timeout", "seconds": seconds}
        elif phase in EXCHANGE_PHASES:
            exchange.update(state="timeout", failed_op=phase, seconds=round(exchange["seconds"] + seconds, 3),
                            failure={"op": phase, "status_name": f"no completion within {seconds:g} s"})
            self.data["exchange"] = exchange
        elif phase == "burst":
            self.data["burst"] = {"state": "timeout", "seconds": seconds,
                                  "failure": {"op": "burst", "status_name": f"no completion within {seconds:g} s"}}

    # -- all of it ------------------------------------------------------------------------------------------
    def run(self) -> Dict[str, Any]:
        threads: List[threading.Thread] = [threading.Thread(target=self.agent_thread, daemon=True,
                                                            name="rdmadoctor-probe-agent")]
        if self.opts.perftest_port:
            threads.append(threading.Thread(target=self.perftest_thread, args=(self.opts.perftest_port,), daemon=True,
                                            name="rdmadoctor-probe-tcp"))
        for t in threads:
            t.start()
        try:
            self.verbs()
        finally:
            self.exchange_done.set()
        for t in threads:
            t.join(max(0.0, FACTS_TIMEOUT + RESULT_WAIT + 10.0 - (time.monotonic() - self.t0)))
        if self.data["agent"].get("state") in ("timeout", "unreachable") and self.data["arp"]["state"] == "not-run" \
                and not any(t.get("no_arp") for t in self.data["tcp"]) \
                and self.data["cm"].get("connect", {}).get("state") not in ("established", "rejected"):
            self.arp()
        self.data["seconds"] = round(time.monotonic() - self.t0, 3)
        # when the ladder was decided: the last network answer or deadline (not the peer's facts afterwards)
        network = [e["t"] for e in self.data["timeline"]
                   if not e["what"].startswith(("agent: facts", "agent: listener report"))]
        self.data["network_seconds"] = max(network) if network else None
        return self.data

    def sections(self) -> Dict[str, Dict[str, Any]]:
        probe: Dict[str, Any] = {"status": "ok", "data": self.data, "unreadable": [],
                                 "seconds": self.data.get("seconds"), "source": "probe"}
        if not self.data["cm"].get("run"):
            probe["status"] = "partial"
            probe["unreadable"] = [{"what": "rdma_cm probe (rungs 4-7)", "why": str(self.data["cm"].get("why"))}]
            probe["reason"] = "could not read: rdma_cm probe (rungs 4-7)"
        agent = self.data["agent"]
        where = f"{self.opts.peer}:{self.opts.agent_port}"
        if self.peer_facts is not None:
            peer = {"status": "ok", "data": {"agent": agent, "facts": self.peer_facts}, "unreadable": [],
                    "seconds": agent.get("facts_seconds"), "source": f"rdmadoctor agent at {where}"}
        else:
            state = agent.get("state")
            why = {"refused": f"no rdmadoctor agent on {where} (connection refused)",
                   "timeout": f"no answer from TCP {where} within {self.opts.tcp_timeout:g} s",
                   "rejected": f"TCP {where} rejected by a packet filter",
                   "unreachable": f"{self.opts.peer} is unreachable",
                   "not-asked": "the peer's agent was not asked (--no-agent)"}.get(
                str(state), self.peer_error or f"the agent at {where} did not answer ({state})")
            peer = {"status": "unavailable", "reason": why, "unreadable": [], "seconds": None,
                    "source": f"rdmadoctor agent at {where}"}
        return {"probe": probe, "peer": peer}


def collect_with_probe(ctx: Any, opts: ProbeOptions,
                       collect: Optional[Callable[[Any], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """This host's facts (collected meanwhile) with the probe's two sections added."""
    if collect is None:
        from rdmadoctor.collectors import ORDER, collect_facts

        def collect(c: Any) -> Dict[str, Any]:
            return collect_facts(c, total_timeout=LOCAL_FACTS_BUDGET,
                                 timeouts={name: LOCAL_COLLECTOR_TIMEOUT for name in ORDER})
    box: Dict[str, Any] = {}

    def facts_work() -> None:
        try:
            box["facts"] = collect(ctx)
        except Exception as exc:    # noqa: BLE001 - collect_facts never raises; a replacement might
            box["error"] = exc

    probe = Probe(opts)

    def staggered() -> None:
        # the verbs child's start (Python + pyverbs) is on the path to a dead peer's verdict: on a slow host
        # the collectors' own children would compete with it, so they start once it is up (or FACTS_AFTER s)
        probe.child_ready.wait(FACTS_AFTER)
        facts_work()

    worker = threading.Thread(target=staggered, daemon=True, name="rdmadoctor-probe-facts")
    worker.start()
    try:
        probe.run()
    except Exception as exc:    # noqa: BLE001 - a probe bug must not cost this host's facts
        probe.child_ready.set()
        probe.data["cm"] = {"run": False, "why": f"the probe failed: {type(exc).__name__}: {exc}"}
        probe.data["seconds"] = round(time.monotonic() - probe.t0, 3)
    worker.join(LOCAL_FACTS_BUDGET + 15.0)
    facts = box.get("facts")
    if facts is None:
        raise RuntimeError(f"collecting this host's facts failed: {box.get('error') or 'did not finish'}")
    facts["sections"].update(probe.sections())
    return facts
