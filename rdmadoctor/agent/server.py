"""`rdmadoctor serve`: the peer agent that `check --peer` talks to.

What it does for a client (protocol.py has the wire format):
  * answers with this host's facts, collected by the same collectors as `check`, asked about the client's
    address (the address the connection comes from: the client does not choose it);
  * on request, holds an rdma_cm listener for the probe's exchange: a child process (probe/verbs_child.py
    server) that accepts one connection, runs its side, reports, and is killed at its deadline or when the
    client leaves, whichever comes first.

What bounds it:
  * it binds to one address (default: this host's only RDMA address; see default_bind());
  * with a token, a client must pass an HMAC challenge before anything but hello; a failed auth closes the
    connection; the token never crosses the wire and is compared in constant time;
  * a request line is at most MAX_REQUEST bytes; an idle connection is closed after IDLE seconds, any
    connection after SESSION seconds; at most max_clients connections at once (more are answered
    "busy" and closed); one facts collection runs at a time (concurrent asks for the same client share it)
    and one rdma_cm listener;
  * it runs no shell and no command a client names: the collectors' fixed read-only commands and the
    verbs child are all it starts; it changes nothing on the host (the listener's memory registrations
    and QP go away with its process);
  * every request is logged: who, what, outcome, seconds.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from rdmadoctor.agent.perftest import PerftestRefused, PerftestServers
from rdmadoctor.probe import protocol as p
from rdmadoctor.runtime.net import ipv4_of

LOG = logging.getLogger("rdmadoctor.agent")
IDLE = 30.0                     # seconds a connection may wait between requests
UNAUTHENTICATED_IDLE = 10.0     # ... before it has authenticated (when a token is set)
SESSION = 180.0                 # seconds any connection may last
SEND_TIMEOUT = 10.0
FACTS_CACHE_SECONDS = 15.0
FACTS_BUDGET = 60.0             # the agent's fact collection (check's own: 30 s, 15 s per collector)
FACTS_COLLECTOR_TIMEOUT = 45.0
LISTENER_START = 20.0           # the verbs child must be listening within this (Python + pyverbs import)
LISTENER_LIFETIME = 60.0        # after this the listener is killed whatever happens
RESULT_WAIT_MAX = 30.0
MAX_BAD_REQUESTS = 3


class AgentError(Exception):
    pass


@dataclass
class Config:
    bind: str
    port: int = p.DEFAULT_PORT
    token: Optional[bytes] = None
    max_clients: int = 8
    rdma_port: Optional[int] = None            # default: port + 1
    facts: Optional[Callable[[str, int], Dict[str, Any]]] = None   # (client address, perftest port) -> facts
    listener: Optional[Callable[..., Any]] = None                  # tests: a fake listener factory
    idle: float = IDLE
    session: float = SESSION
    allow_perftest: bool = False                                   # serve --allow-perftest (bench)


def default_bind(root: str = "/") -> Tuple[Optional[str], List[str]]:
    """(the address to bind, the candidates): this host's IPv4 addresses that have an RDMA GID (RoCE), or that
    sit on an RDMA device's netdev (IPoIB). Exactly one -> it; none or several -> None (the user must choose).

    Why this default: the agent is for RDMA peers, so it listens on the RDMA network only, never on every
    interface (0.0.0.0 would expose it on management and public networks too)."""
    base = os.path.join(root, "sys/class/infiniband")
    found: List[str] = []
    netdevs: List[str] = []
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        devices = []
    for dev in devices:
        ports_dir = os.path.join(base, dev, "ports")
        try:
            ports = sorted(os.listdir(ports_dir))
        except OSError:
            continue
        for port in ports:
            gids_dir = os.path.join(ports_dir, port, "gids")
            try:
                names = os.listdir(gids_dir)
            except OSError:
                names = []
            for name in names:
                try:
                    with open(os.path.join(gids_dir, name)) as f:
                        gid = ipaddress.IPv6Address(f.read().strip())
                except (OSError, ValueError):
                    continue
                if gid.ipv4_mapped is not None and str(gid.ipv4_mapped) not in found:
                    found.append(str(gid.ipv4_mapped))
            ndevs = os.path.join(ports_dir, port, "gid_attrs", "ndevs")
            for name in (os.listdir(ndevs) if os.path.isdir(ndevs) else []):
                try:
                    with open(os.path.join(ndevs, name)) as f:
                        nd = f.read().strip()
                except OSError:
                    continue
                if nd and nd not in netdevs:
                    netdevs.append(nd)
    if not found:
        for nd in netdevs:
            address = ipv4_of(nd)
            if address and address not in found:
                found.append(address)
    return (found[0] if len(found) == 1 else None), found


# -- shared state -----------------------------------------------------------------------------------------

class FactsCache:
    """One collection at a time; asks for the same (client, port) within FACTS_CACHE_SECONDS share one."""

    def __init__(self, collect: Callable[[str, int], Dict[str, Any]]):
        self.collect = collect
        self.lock = threading.Lock()
        self.running = threading.Lock()
        self.cache: Dict[Tuple[str, int], Tuple[float, Dict[str, Any]]] = {}

    def get(self, client: str, port: int, timeout: float) -> Tuple[Dict[str, Any], bool]:
        key = (client, port)
        deadline = time.monotonic() + timeout
        if not self.running.acquire(timeout=max(0.0, timeout)):
            raise AgentError("busy: another facts collection did not finish in time")
        try:
            with self.lock:
                hit = self.cache.get(key)
                if hit and time.monotonic() - hit[0] < FACTS_CACHE_SECONDS:
                    return hit[1], True
            if time.monotonic() > deadline:
                raise AgentError("busy: no time left to collect facts")
            facts = self.collect(client, port)
            with self.lock:
                self.cache = {k: v for k, v in self.cache.items() if time.monotonic() - v[0] < FACTS_CACHE_SECONDS}
                self.cache[key] = (time.monotonic(), facts)
            return facts, False
        finally:
            self.running.release()


def collect_for(client: str, port: int) -> Dict[str, Any]:
    """The facts for one client. Nobody waits on a deadline for them (the probe's verdict does not), so the
    collectors get more time than check's defaults: a loaded or slow host answers late rather than partly."""
    from rdmadoctor.collectors import ORDER, collect_facts
    from rdmadoctor.collectors.base import CollectContext
    return collect_facts(CollectContext(peer=client, port=port, sample_seconds=0.0), total_timeout=FACTS_BUDGET,
                         timeouts={name: FACTS_COLLECTOR_TIMEOUT for name in ORDER})


class Listener:
    """The rdma_cm listener child for one probe session."""

    def __init__(self, bind: str, port: int, nonce: str):
        from rdmadoctor.probe import child as child_mod
        self.bind, self.port, self.nonce = bind, port, nonce
        self.events: List[Dict[str, Any]] = []
        self.started = time.monotonic()
        self.child, why = child_mod.start_ready("server", {"bind": bind, "port": port, "nonce": nonce},
                                                deadline=time.monotonic() + LISTENER_START)
        if self.child is None:
            raise AgentError(f"the rdma_cm listener did not start: {why.get('error')}")
        event = self.child.next_event(time.monotonic() + LISTENER_START)
        if event is None or event.get("ev") != "listen" or event.get("state") != "listening":
            self.child.kill()
            detail = (event or {}).get("error") or (event or {}).get("ev") or "no answer in time"
            raise AgentError(f"the rdma_cm listener could not listen on {bind}:{port}: {detail}")
        self.events.append(event)
        self.timer = threading.Timer(LISTENER_LIFETIME, self.close)
        self.timer.daemon = True
        self.timer.start()

    def result(self, wait: float) -> Dict[str, Any]:
        deadline = time.monotonic() + wait
        final = ("burst", "exit", "eof", "error", "fatal")
        while self.child.alive() or not self.child.events.empty():
            event = self.child.next_event(deadline)
            if event is None:
                break
            self.events.append(event)
            if event.get("ev") in final or (event.get("ev") == "exchange" and event.get("state") != "passed") \
                    or (event.get("ev") == "established" and event.get("state") == "error"):
                break
        state = "finished" if any(e.get("ev") in ("burst", "exit") for e in self.events) else \
            ("killed" if self.child.alive() else "ended")
        self.close()
        return {"state": state, "events": [e for e in self.events if e.get("ev") != "eof"],
                "seconds": round(time.monotonic() - self.started, 3), "stderr": self.child.stderr_tail() or None}

    def close(self) -> None:
        try:
            self.timer.cancel()
        except AttributeError:
            pass
        self.child.kill()


# -- the server -------------------------------------------------------------------------------------------

class Agent:
    def __init__(self, config: Config):
        self.config = config
        self.facts = FactsCache(config.facts or collect_for)
        self.perftest = PerftestServers(config.allow_perftest)
        self.active = 0
        self.lock = threading.Lock()
        self.listener_owner: Optional[int] = None
        self.stop = threading.Event()
        self.sock: Optional[socket.socket] = None
        self.connections = 0

    @property
    def rdma_port(self) -> int:
        return self.config.rdma_port or self.config.port + 1

    def open(self) -> Tuple[str, int]:
        family = socket.AF_INET6 if ":" in self.config.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.config.bind, self.config.port))
        except OSError as exc:
            sock.close()
            raise AgentError(f"cannot listen on {self.config.bind}:{self.config.port}: {exc.strerror or exc}")
        sock.listen(64)
        self.sock = sock
        return sock.getsockname()[:2]

    def serve_forever(self) -> None:
        if self.sock is None:
            self.open()
        assert self.sock is not None
        try:
            while not self.stop.is_set():
                ready, _, _ = select.select([self.sock], [], [], 0.25)
                if not ready:
                    continue
                try:
                    conn, addr = self.sock.accept()
                except OSError:
                    continue
                with self.lock:
                    admitted = self.active < self.config.max_clients
                    if admitted:
                        self.active += 1
                        self.connections += 1
                        number = self.connections
                if not admitted:
                    self._refuse(conn, addr)
                    continue
                threading.Thread(target=self._session, args=(conn, addr, number), daemon=True,
                                 name=f"rdmadoctor-agent-{number}").start()
        finally:
            self.sock.close()

    def shutdown(self) -> None:
        self.stop.set()

    def _refuse(self, conn: socket.socket, addr: Any) -> None:
        LOG.info("client=%s op=- outcome=refused:busy seconds=0 (%d clients already)", _who(addr),
                 self.config.max_clients)
        try:
            conn.settimeout(1.0)
            conn.sendall(p.encode(p.error(None, "busy", f"the agent already serves {self.config.max_clients} "
                                                        "clients: try again in a few seconds")))
        except OSError:
            pass
        finally:
            conn.close()

    def _session(self, conn: socket.socket, addr: Any, number: int) -> None:
        state = Session(self, conn, addr, number)
        try:
            state.run()
        except Exception as exc:    # noqa: BLE001 - one client's trouble never ends the agent
            LOG.warning("client=%s op=- outcome=internal-error:%s", _who(addr), exc)
        finally:
            state.close()
            with self.lock:
                self.active -= 1


def _who(addr: Any) -> str:
    try:
        return f"{addr[0]}:{addr[1]}"
    except (TypeError, IndexError):
        return str(addr)


class Session:
    """One client connection."""

    def __init__(self, agent: Agent, conn: socket.socket, addr: Any, number: int):
        self.agent, self.conn, self.addr, self.number = agent, conn, addr, number
        self.client = addr[0]
        self.local = conn.getsockname()[0]
        self.reader = p.LineReader(conn, p.MAX_REQUEST)
        self.challenge: Optional[str] = None
        self.authed = agent.config.token is None
        self.listener: Optional[Listener] = None
        self.started = time.monotonic()
        self.bad = 0

    def send(self, message: Dict[str, Any]) -> None:
        self.conn.settimeout(SEND_TIMEOUT)
        self.conn.sendall(p.encode(message))

    def log(self, op: str, outcome: str, started: float, detail: str = "") -> None:
        LOG.info("client=%s op=%s outcome=%s seconds=%.3f%s", _who(self.addr), op, outcome,
                 time.monotonic() - started, f" {detail}" if detail else "")

    def run(self) -> None:
        cfg = self.agent.config
        while not self.agent.stop.is_set():
            idle = cfg.idle if self.authed else min(cfg.idle, UNAUTHENTICATED_IDLE)
            left = min(idle, cfg.session - (time.monotonic() - self.started))
            if left <= 0:
                self.send(p.error(None, "session-timeout", f"connection open longer than {cfg.session:g} s"))
                self.log("-", "closed:session-timeout", self.started)
                return
            started = time.monotonic()
            try:
                line = self.reader.readline(left)
            except socket.timeout:
                self.log("-", "closed:idle", started)
                return
            except p.TooLarge as exc:
                self.send(p.error(None, exc.code, exc.message))
                self.log("?", "refused:too-large", started)
                return
            except p.ProtocolError as exc:
                self.log("?", f"closed:{exc.code}", started, exc.message)
                return
            except OSError:
                return
            if line is None:
                return
            if not line.strip():
                continue
            try:
                request = p.decode_request(line)
            except p.ProtocolError as exc:
                self.bad += 1
                self.send(p.error(None, exc.code, exc.message))
                self.log("?", f"refused:{exc.code}", started, exc.message)
                if self.bad >= MAX_BAD_REQUESTS:
                    self.log("-", "closed:too-many-bad-requests", self.started)
                    return
                continue
            op = request["op"]
            try:
                reply, outcome, detail = self.dispatch(request)
            except p.ProtocolError as exc:
                reply, outcome, detail = p.error(request, exc.code, exc.message), f"refused:{exc.code}", exc.message
            except AgentError as exc:
                reply, outcome, detail = p.error(request, "failed", str(exc)), "failed", str(exc)
            self.send(reply)
            self.log(op, outcome, started, detail)
            if op == "bye" or outcome in ("refused:auth-failed",):
                return

    def dispatch(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        op = request["op"]
        cfg = self.agent.config
        if op == "hello":
            self.challenge = p.new_nonce()
            from rdmadoctor import __version__
            return p.answer(request, agent="rdmadoctor", version=__version__, protocol=p.PROTOCOL, ops=list(p.OPS),
                            auth="hmac-sha256" if cfg.token else "none", challenge=self.challenge,
                            client=self.client, bind=self.local, rdma_port=self.agent.rdma_port,
                            perftest=cfg.allow_perftest), "ok", ""
        if op == "auth":
            if cfg.token is None:
                return p.answer(request, note="this agent has no token: nothing to check"), "ok", "no token set"
            if self.challenge is None:
                raise p.ProtocolError("bad-request", "send hello first: auth answers its challenge")
            mac, cnonce = request.get("mac"), request.get("cnonce")
            if not isinstance(mac, str) or not isinstance(cnonce, str) or not 16 <= len(cnonce) <= 128:
                raise p.ProtocolError("bad-request", "auth needs 'mac' and 'cnonce' (16 to 128 hex characters)")
            challenge, self.challenge = self.challenge, None          # one try per challenge
            if not p.same(mac, p.client_mac(cfg.token, challenge, cnonce)):
                raise p.ProtocolError("auth-failed", "the token does not match")
            self.authed = True
            return p.answer(request, server_mac=p.agent_mac(cfg.token, challenge, cnonce)), "ok", ""
        if op == "bye":
            return p.answer(request), "ok", ""
        if op not in p.OPS:
            raise p.ProtocolError("unknown-op", f"unknown op {op!r}; this agent supports {', '.join(p.OPS)}")
        if not self.authed:
            raise p.ProtocolError("auth-required", "this agent needs a token: hello, then auth")
        if op == "facts":
            port = p.int_field(request, "port", 18515, 1, 65535)
            facts, cached = self.agent.facts.get(self.client, port, timeout=FACTS_BUDGET + 30.0)
            return p.answer(request, facts=facts, cached=cached), "ok", f"port={port}{' cached' if cached else ''}"
        if op == "listen":
            return self._listen(request)
        if op.startswith("perftest"):
            return self._perftest(request)
        if op == "result":
            wait = p.number_field(request, "wait", 10.0, 0.0, RESULT_WAIT_MAX)
            if self.listener is None:
                raise p.ProtocolError("no-listener", "no listener was started on this connection (send listen)")
            try:
                result = self.listener.result(wait)
            finally:
                self.listener.close()                 # torn down after its report, whatever it said
                self.listener = None
                self._release()
            return p.answer(request, listener=result), "ok", f"listener {result['state']}"
        raise p.ProtocolError("unknown-op", f"unknown op {op!r}")

    def _listen(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        agent = self.agent
        with agent.lock:
            if agent.listener_owner is not None:
                raise p.ProtocolError("busy", "another probe holds the rdma_cm listener: try again shortly")
            agent.listener_owner = self.number
        try:
            if self.listener is not None:
                self.listener.close()
            nonce = p.new_nonce()
            factory = agent.config.listener or Listener
            self.listener = factory(self.local, agent.rdma_port, nonce)
        except Exception:
            self._release()
            raise
        return (p.answer(request, address=self.local, rdma_port=agent.rdma_port, nonce=nonce,
                         deadline=LISTENER_LIFETIME), "ok", f"rdma_cm {self.local}:{agent.rdma_port}")

    def _perftest(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        servers, op = self.agent.perftest, request["op"]
        try:
            if op == "perftest":
                started = servers.start(self.number, request.get("tool"), request.get("options"))
                return p.answer(request, **started), "ok", " ".join(started["argv"])
            if op == "perftest-wait":
                wait = p.number_field(request, "wait", 10.0, 0.0, 120.0)
                done = servers.wait(self.number, request.get("handle"), wait)
            else:
                done = servers.stop(self.number, request.get("handle"))
        except PerftestRefused as exc:
            raise p.ProtocolError(exc.code, exc.message)
        return p.answer(request, **done), "ok", f"rc={done['rc']}{' timed out' if done['timed_out'] else ''}"

    def _release(self) -> None:
        with self.agent.lock:
            if self.agent.listener_owner == self.number:
                self.agent.listener_owner = None

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self._release()
        self.agent.perftest.stop_all(self.number)
        try:
            self.conn.close()
        except OSError:
            pass
