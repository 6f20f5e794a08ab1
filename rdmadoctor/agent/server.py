"""`rdmadoctor serve`: the peer agent that `check --peer` talks to.

What it does for a client (protocol.py has the wire format):
  * answers with this host's facts, collected by the same collectors as `check`, asked about the client's
    address (the address the connection comes from: the client does not choose it), with nothing of other
    processes but whether a port is taken and the program's name (public_facts());
  * on request, holds an rdma_cm listener for the probe's exchange: a child process (probe/verbs_child.py
    server) that accepts one connection, runs its side, reports, and is killed at its deadline or when the
    client leaves, whichever comes first.

What bounds it (docs/probe.md, "Threat model"):
  * it binds to one address (default: this host's only RDMA address; see default_bind());
  * with a token, a client must pass an HMAC challenge before anything but hello, within AUTH_DEADLINE of
    connecting whatever it sends; after that every request and answer carries the session's MAC and a
    sequence number; failed authentications back off per source address (AuthBackoff);
  * a request line is at most MAX_REQUEST bytes; the third bad request (malformed, unknown op, refused for
    want of auth) closes the connection; an idle connection is closed after IDLE seconds, any connection
    after SESSION seconds; at most max_clients connections at once, of which unauthenticated ones never
    hold the last `reserve` (a new connection pushes out the oldest unauthenticated one instead);
  * one facts collection at a time (asks for the same client and port share it) and at most
    FACTS_PER_WINDOW fresh ones per client address per FACTS_WINDOW seconds; one rdma_cm listener;
  * without a token it answers only what an unprivileged user could read (no firewall rules, no kernel log)
    unless the operator starts it with --share-privileged-facts;
  * it runs no shell and no command a client names: the collectors' fixed read-only commands, the verbs
    child and (opted in) allowlisted perftest servers are all it starts, and shutdown stops them all;
  * every request is logged: who, what, outcome, seconds; client-supplied values escaped and cut short, at
    most MAX_LOG_LINES lines per connection.
"""
from __future__ import annotations

import collections
import ipaddress
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, NoReturn, Optional, Tuple

from rdmadoctor.agent.perftest import PerftestRefused, PerftestServers
from rdmadoctor.probe import protocol as p
from rdmadoctor.runtime.net import ipv4_of
from rdmadoctor.runtime.text import log_text, log_value
from rdmadoctor.views import perftest_procs

LOG = logging.getLogger("rdmadoctor.agent")
IDLE = 30.0                     # seconds a connection may wait between requests
AUTH_DEADLINE = 10.0            # seconds from connecting to authenticated (when a token is set)
SESSION = 180.0                 # seconds any connection may last
SEND_TIMEOUT = 10.0
FACTS_CACHE_SECONDS = 15.0
FACTS_WINDOW = 60.0             # fresh facts collections per client address: at most FACTS_PER_WINDOW
FACTS_PER_WINDOW = 4            # per FACTS_WINDOW seconds (check --peer needs one, bench two)
FACTS_BUDGET = 60.0             # the agent's fact collection (check's own: 30 s, 15 s per collector)
FACTS_COLLECTOR_TIMEOUT = 45.0
LISTENER_START = 20.0           # the verbs child must be listening within this (Python + pyverbs import)
LISTENER_LIFETIME = 60.0        # after this the listener is killed whatever happens
RESULT_WAIT_MAX = 30.0
MAX_BAD_REQUESTS = 3
MAX_LOG_LINES = 40              # log lines one connection may cause (then one line saying so, then silence)
AUTH_FREE_FAILURES = 3          # failed authentications from one address before it must wait
AUTH_MAX_BACKOFF = 60.0         # the longest wait: 1 s after the 3rd failure, doubling
# codes that count as a bad request: a client that keeps sending them is not a client
BAD_CODES = ("bad-request", "unknown-op", "unsupported-version", "auth-required")


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
    privileged_facts: bool = False                                 # serve --share-privileged-facts

    @property
    def reserve(self) -> int:
        """Slots only an authenticated client may hold (none without a token: every client is)."""
        return max(1, self.max_clients // 4) if self.token is not None and self.max_clients > 1 else 0


def _listdir(path: str) -> List[str]:
    """A sysfs directory's entries; none when it is missing or unreadable."""
    try:
        return os.listdir(path)
    except OSError:
        return []


def _gid_ipv4s(port_dir: str) -> List[str]:
    """The IPv4 addresses of a port's IPv4-mapped GIDs (RoCE), in the order its gids/ directory lists them."""
    gids_dir = os.path.join(port_dir, "gids")
    out: List[str] = []
    for name in _listdir(gids_dir):
        try:
            with open(os.path.join(gids_dir, name)) as f:
                gid = ipaddress.IPv6Address(f.read().strip())
        except (OSError, ValueError):
            continue
        if gid.ipv4_mapped is not None:
            out.append(str(gid.ipv4_mapped))
    return out


def _gid_netdevs(port_dir: str) -> List[str]:
    """The netdevs a port's GIDs are bound to (gid_attrs/ndevs; empty entries are unused GIDs)."""
    ndevs = os.path.join(port_dir, "gid_attrs", "ndevs")
    out: List[str] = []
    for name in (os.listdir(ndevs) if os.path.isdir(ndevs) else []):
        try:
            with open(os.path.join(ndevs, name)) as f:
                nd = f.read().strip()
        except OSError:
            continue
        if nd:
            out.append(nd)
    return out


def _append_unseen(found: List[str], values: List[str]) -> None:
    """Each of `values` not in `found` yet, in order (an address or netdev is listed once)."""
    found.extend(v for v in dict.fromkeys(values) if v not in found)


def default_bind(root: str = "/") -> Tuple[Optional[str], List[str]]:
    """(the address to bind, the candidates): this host's IPv4 addresses that have an RDMA GID (RoCE), or that
    sit on an RDMA device's netdev (IPoIB). Exactly one -> it; none or several -> None (the user must choose).

    Why this default: the agent is for RDMA peers, so it listens on the RDMA network only, never on every
    interface (0.0.0.0 would expose it on management and public networks too)."""
    base = os.path.join(root, "sys/class/infiniband")
    found: List[str] = []
    netdevs: List[str] = []
    for dev in sorted(_listdir(base)):
        ports_dir = os.path.join(base, dev, "ports")
        for port in sorted(_listdir(ports_dir)):
            _append_unseen(found, _gid_ipv4s(os.path.join(ports_dir, port)))
            _append_unseen(netdevs, _gid_netdevs(os.path.join(ports_dir, port)))
    if not found:
        # IPoIB: no GID carries an IPv4 address, the RDMA device's netdev does
        _append_unseen(found, [a for a in (ipv4_of(nd) for nd in netdevs) if a])
    return (found[0] if len(found) == 1 else None), found


# -- shared state -----------------------------------------------------------------------------------------

class RateLimited(Exception):
    pass


class FactsCache:
    """One collection at a time; asks for the same (client, port) within FACTS_CACHE_SECONDS share one; at
    most FACTS_PER_WINDOW fresh collections per client address per FACTS_WINDOW (each new port would otherwise
    start one: a client could keep the host's collectors busy)."""

    def __init__(self, collect: Callable[[str, int], Dict[str, Any]]):
        self.collect = collect
        self.lock = threading.Lock()
        self.running = threading.Lock()
        self.cache: Dict[Tuple[str, int], Tuple[float, Dict[str, Any]]] = {}
        self.fresh: Dict[str, Deque[float]] = {}

    def _admit(self, client: str) -> None:
        now = time.monotonic()
        with self.lock:
            times = self.fresh.setdefault(client, collections.deque())
            while times and now - times[0] >= FACTS_WINDOW:
                times.popleft()
            if len(times) >= FACTS_PER_WINDOW:
                raise RateLimited(f"{FACTS_PER_WINDOW} facts collections for {client} in the last "
                                  f"{FACTS_WINDOW:g} s: try again in {FACTS_WINDOW - (now - times[0]):.0f} s")
            times.append(now)
            if len(self.fresh) > 4096:          # forget quiet clients
                self.fresh = {k: v for k, v in self.fresh.items() if v and now - v[-1] < FACTS_WINDOW}

    def get(self, client: str, port: int, timeout: float) -> Tuple[Dict[str, Any], bool]:
        key = (client, port)
        deadline = time.monotonic() + timeout
        with self.lock:
            hit = self.cache.get(key)
            if hit and time.monotonic() - hit[0] < FACTS_CACHE_SECONDS:
                return hit[1], True
        if not self.running.acquire(timeout=max(0.0, timeout)):
            raise AgentError("busy: another facts collection did not finish in time")
        try:
            with self.lock:
                hit = self.cache.get(key)
                if hit and time.monotonic() - hit[0] < FACTS_CACHE_SECONDS:
                    return hit[1], True
            if time.monotonic() > deadline:
                raise AgentError("busy: no time left to collect facts")
            self._admit(client)
            facts = self.collect(client, port)
            with self.lock:
                self.cache = {k: v for k, v in self.cache.items() if time.monotonic() - v[0] < FACTS_CACHE_SECONDS}
                self.cache[key] = (time.monotonic(), facts)
            return facts, False
        finally:
            self.running.release()


class AuthBackoff:
    """Failed authentications per source address: the first AUTH_FREE_FAILURES cost nothing, then each
    further attempt waits 1, 2, 4 ... AUTH_MAX_BACKOFF seconds after the last failure (an attempt during the
    wait is refused unchecked). A success forgets the address."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures: Dict[str, Tuple[int, float]] = {}

    def wait_left(self, address: str) -> float:
        with self.lock:
            count, last = self.failures.get(address, (0, 0.0))
        if count < AUTH_FREE_FAILURES:
            return 0.0
        wait = min(AUTH_MAX_BACKOFF, 2.0 ** (count - AUTH_FREE_FAILURES))
        return max(0.0, last + wait - time.monotonic())

    def failed(self, address: str) -> None:
        now = time.monotonic()
        with self.lock:
            count, _ = self.failures.get(address, (0, 0.0))
            self.failures[address] = (count + 1, now)
            if len(self.failures) > 4096:
                self.failures = {k: v for k, v in self.failures.items() if now - v[1] < 2 * AUTH_MAX_BACKOFF}

    def succeeded(self, address: str) -> None:
        with self.lock:
            self.failures.pop(address, None)


def collect_for(client: str, port: int) -> Dict[str, Any]:
    """The facts for one client. Nobody waits on a deadline for them (the probe's verdict does not), so the
    collectors get more time than check's defaults: a loaded or slow host answers late rather than partly."""
    from rdmadoctor.collectors import ORDER, collect_facts
    from rdmadoctor.collectors.base import CollectContext
    return collect_facts(CollectContext(peer=client, port=port, sample_seconds=0.0), total_timeout=FACTS_BUDGET,
                         timeouts={name: FACTS_COLLECTOR_TIMEOUT for name in ORDER})


WITHHELD = ("withheld: this agent runs without a token, so it answers only what any user of this host can read "
            "(start it with --token-file, or with --share-privileged-facts to share this anyway)")


def public_facts(facts: Dict[str, Any], privileged: bool) -> Dict[str, Any]:
    """What the agent tells a client of its facts. Never another process's command line, pid or user: a
    listener is its address, port and program name (whether the port is taken, and by what); a perftest
    process is its binary, role, the options two sides must share and its ports (views/perftest_procs.py). Without
    `privileged` (a token-less agent, not told otherwise) also nothing only root can read: the firewall
    rules (CAP_NET_ADMIN) and the kernel log (dmesg_restrict)."""
    out = dict(facts)
    sections = dict(out.get("sections") or {})
    ports = sections.get("ports")
    if isinstance(ports, dict) and isinstance(ports.get("data"), dict):
        data = dict(ports["data"])
        for name in ("tcp_listeners", "rdma_processes"):
            if isinstance(data.get(name), list):
                data[name] = [{k: item.get(k) for k in ("ip", "port", "family", "process") if k in item}
                              for item in data[name] if isinstance(item, dict)]
        # perftest's own processes: the binary, the options that must match, the ports (no command line)
        data["perftest"] = perftest_procs.public(data.get("perftest"))
        ports = dict(ports, data=data, unreadable=[u for u in ports.get("unreadable") or []
                                                   if (u or {}).get("what") != "owner of a listening socket"])
        if not ports["unreadable"] and ports.get("status") == "partial":
            ports.update(status="ok", reason=None)
        sections["ports"] = ports
    if not privileged:
        if "firewall" in sections:
            sections["firewall"] = {"status": "unavailable", "reason": WITHHELD, "unreadable": [],
                                    "seconds": 0.0, "source": None}
        kernel = sections.get("kernel")
        if isinstance(kernel, dict) and isinstance(kernel.get("data"), dict):
            data = dict(kernel["data"], log={"source": None, "lines": [], "readable": False, "unreadable": WITHHELD})
            unreadable = [u for u in kernel.get("unreadable") or [] if (u or {}).get("what") != "kernel log"]
            unreadable.append({"what": "kernel log", "why": WITHHELD})
            sections["kernel"] = dict(kernel, data=data, status="partial", unreadable=unreadable,
                                      reason="could not read: " + "; ".join(u["what"] for u in unreadable[:5]))
    out["sections"] = sections
    return out


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
        self.backoff = AuthBackoff()
        self.lock = threading.Lock()
        self.sessions: Dict[int, "Session"] = {}     # the connections being served, oldest first
        self.listener_owner: Optional[int] = None
        self.stop = threading.Event()
        self.stopped = threading.Event()
        self.sock: Optional[socket.socket] = None
        self.connections = 0

    @property
    def active(self) -> int:
        return len(self.sessions)

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
                session, evicted = self._admit(conn, addr)
                if evicted is not None:
                    evicted.evict()
                if session is None:
                    self._refuse(conn, addr)
                    continue
                threading.Thread(target=self._session, args=(session,), daemon=True,
                                 name=f"rdmadoctor-agent-{session.number}").start()
        finally:
            self.sock.close()
            self.close_all()
            self.stopped.set()

    def _admit(self, conn: socket.socket, addr: Any) -> Tuple[Optional["Session"], Optional["Session"]]:
        """(the new connection's session or None: busy, the unauthenticated session it pushes out).

        Unauthenticated connections hold at most max_clients - reserve slots; when a new one finds no room,
        the oldest unauthenticated one makes room (it had its chance), so clients that never authenticate
        cannot keep the token holder out. Authenticated sessions are never pushed out."""
        cfg = self.config
        with self.lock:
            pending = [s for s in self.sessions.values() if not s.authed]
            evicted = None
            room = len(self.sessions) < cfg.max_clients and len(pending) < cfg.max_clients - cfg.reserve
            if not room and pending:
                evicted = pending[0]
                self.sessions.pop(evicted.number, None)
                room = True
            if not room:
                return None, None
            self.connections += 1
            session = Session(self, conn, addr, self.connections)
            self.sessions[session.number] = session
            return session, evicted

    def shutdown(self) -> None:
        self.stop.set()

    def close_all(self) -> None:
        """Stop everything this agent started: every connection's listener child and perftest server."""
        with self.lock:
            sessions = list(self.sessions.values())
        for session in sessions:
            session.evict(log=False)
            session.close()
        self.perftest.stop_everything()

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

    def _session(self, state: "Session") -> None:
        try:
            state.run()
        except Exception as exc:    # noqa: BLE001 - one client's trouble never ends the agent
            LOG.warning("client=%s op=- outcome=internal-error:%s", _who(state.addr), log_text(type(exc).__name__))
        finally:
            state.close()
            with self.lock:
                self.sessions.pop(state.number, None)


def _who(addr: Any) -> str:
    try:
        return f"{addr[0]}:{addr[1]}"
    except (TypeError, IndexError):
        return log_value(addr)


class Closed(Exception):
    """The connection is to end (after what was sent); `outcome` is logged."""

    def __init__(self, outcome: str):
        super().__init__(outcome)
        self.outcome = outcome


class Session:
    """One client connection."""

    def __init__(self, agent: Agent, conn: socket.socket, addr: Any, number: int):
        self.agent, self.conn, self.addr, self.number = agent, conn, addr, number
        self.client = addr[0]
        self.local = conn.getsockname()[0]
        self.reader = p.LineReader(conn, p.MAX_REQUEST)
        self.challenge: Optional[str] = None
        self.hello_digest = ""
        self.key: Optional[bytes] = None              # the session key once authenticated
        self.pending_key: Optional[bytes] = None
        self.seq = 0                                  # the last request's sequence number
        self.authed = agent.config.token is None
        self.listener: Optional[Listener] = None
        self.started = time.monotonic()
        self.bad = 0
        self.logged = 0
        self.evicted = False

    def evict(self, log: bool = True) -> None:
        """End this connection from outside (a newer connection needs its slot; shutdown)."""
        self.evicted = True
        if log:
            self.log("-", "closed:evicted-unauthenticated", self.started)
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def send(self, message: Dict[str, Any]) -> None:
        if self.key is not None:
            message = p.seal(self.key, "answer", message, self.seq)
        self.conn.settimeout(SEND_TIMEOUT)
        self.conn.sendall(p.encode(message))

    def log(self, op: Any, outcome: str, started: float, detail: str = "") -> None:
        """One line per request; every client-supplied value escaped and cut short, MAX_LOG_LINES per
        connection (a client cannot fill the disk through the log)."""
        self.logged += 1
        if self.logged > MAX_LOG_LINES + 1:
            return
        if self.logged == MAX_LOG_LINES + 1:
            LOG.info("client=%s op=- outcome=log-limit seconds=%.3f (further requests of this connection are "
                     "not logged)", _who(self.addr), time.monotonic() - self.started)
            return
        LOG.info("client=%s op=%s outcome=%s seconds=%.3f%s", _who(self.addr), log_value(op, 32), outcome,
                 time.monotonic() - started, f" {log_text(detail)}" if detail else "")

    def _left(self) -> Tuple[float, str]:
        """(seconds this connection may wait for its next request, the outcome when they run out)."""
        cfg = self.agent.config
        now = time.monotonic()
        options = [(cfg.idle, "closed:idle"), (cfg.session - (now - self.started), "closed:session-timeout")]
        if not self.authed:
            options.append((AUTH_DEADLINE - (now - self.started), "closed:auth-timeout"))
        return min(options)

    def run(self) -> None:
        try:
            self._serve()
        except Closed as closed:
            self.log("-", closed.outcome, self.started)

    def _serve(self) -> None:
        while not self.agent.stop.is_set() and not self.evicted:
            started, line = self._next_line()
            if line is None or self.evicted:
                return
            request = self._decoded(line, started)
            if request is None:
                continue
            self._authenticated(request, started)
            op = request["op"]
            reply, outcome, detail = self._answer(request)
            self.send(reply)
            if self.pending_key is not None:
                self.key, self.pending_key, self.seq = self.pending_key, None, 0
            code = outcome.split(":", 1)[1] if outcome.startswith("refused:") else ""
            if code in BAD_CODES:
                self._bad(started, op, code, detail)
                continue
            self.log(op, outcome, started, detail)
            if op == "bye":
                return
            if code in ("auth-failed", "auth-backoff"):
                raise Closed(f"closed:{code}")

    def _next_line(self) -> Tuple[float, Optional[str]]:
        """(when the wait began, the next request line, None once the client has gone); Closed when the
        connection's time is up or the line breaks the protocol."""
        left, why = self._left()
        if left <= 0:
            self._expire(why)
        started = time.monotonic()
        try:
            return started, self.reader.readline(left)
        except socket.timeout:
            # the wait may have hit a deadline other than the one it was sized for (session, auth)
            self._expire(self._left()[1] if self._left()[0] <= 0 else why)
        except p.TooLarge as exc:
            self.send(p.error(None, exc.code, exc.message))
            raise Closed("refused:too-large")
        except p.ProtocolError as exc:
            raise Closed(f"closed:{exc.code}")
        except OSError:
            return started, None

    def _decoded(self, line: str, started: float) -> Optional[Dict[str, Any]]:
        """The request on the line; None for a bad one (answered and counted)."""
        if not line.strip():
            self._bad(started, "?", "bad-request", "empty line")
            return None
        try:
            return p.decode_request(line)
        except p.ProtocolError as exc:
            self.send(p.error(None, exc.code, exc.message))
            self._bad(started, "?", exc.code, exc.message)
            return None

    def _answer(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        """(the reply, the outcome logged, its detail): a refusal or a failure is an answer too."""
        try:
            return self.dispatch(request)
        except p.ProtocolError as exc:
            return p.error(request, exc.code, exc.message), f"refused:{exc.code}", exc.message
        except RateLimited as exc:
            return p.error(request, "rate-limited", str(exc)), "refused:rate-limited", ""
        except AgentError as exc:
            return p.error(request, "failed", str(exc)), "failed", str(exc)

    def _expire(self, why: str) -> NoReturn:
        message = {"closed:idle": "no request for %g s" % self.agent.config.idle,
                   "closed:auth-timeout": "not authenticated %g s after connecting" % AUTH_DEADLINE,
                   }.get(why, "connection open longer than %g s" % self.agent.config.session)
        try:
            self.send(p.error(None, why.split(":", 1)[1], message))
        except OSError:
            pass
        raise Closed(why)

    def _bad(self, started: float, op: Any, code: str, detail: str) -> None:
        """A bad request (its answer sent): logged, counted; the MAX_BAD_REQUESTS-th ends the connection."""
        self.bad += 1
        self.log(op, f"refused:{code}", started, detail)
        if self.bad >= MAX_BAD_REQUESTS:
            raise Closed("closed:too-many-bad-requests")

    def _authenticated(self, request: Dict[str, Any], started: float) -> None:
        """After the handshake every request must carry the session MAC and the next sequence number."""
        if self.key is None:
            return
        wrong = p.check_seal(self.key, "request", request, self.seq + 1)
        if wrong is not None:
            self.agent.backoff.failed(self.client)
            self.key = None                           # the answer goes out unsealed: the client is not ours
            self.send(p.error(request, "auth-failed", f"request not authenticated: {wrong}"))
            self.log(request.get("op"), "refused:auth-failed", started, wrong)
            raise Closed("closed:auth-failed")
        self.seq += 1

    def dispatch(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        op = request["op"]
        if op == "hello":
            return self._hello(request)
        if op == "auth":
            return self._auth(request)
        if op == "bye":
            return p.answer(request), "ok", ""
        if op not in p.OPS:
            raise p.ProtocolError("unknown-op", f"unknown op; this agent supports {', '.join(p.OPS)}")
        if not self.authed:
            raise p.ProtocolError("auth-required", "this agent needs a token: hello, then auth")
        if op == "facts":
            return self._facts(request)
        if op == "listen":
            return self._listen(request)
        if op.startswith("perftest"):
            return self._perftest(request)
        if op == "result":
            return self._result(request)
        raise p.ProtocolError("unknown-op", "unknown op")

    def _hello(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        from rdmadoctor import __version__
        cfg = self.agent.config
        if self.key is None:
            self.challenge = p.new_nonce()
        answer = p.normalized(p.answer(
            request, agent="rdmadoctor", version=__version__, protocol=p.PROTOCOL, ops=list(p.OPS),
            auth="hmac-sha256" if cfg.token else "none", challenge=self.challenge, client=self.client,
            bind=self.local, rdma_port=self.agent.rdma_port, perftest=cfg.allow_perftest,
            privileged_facts=cfg.privileged_facts or cfg.token is not None))
        if self.key is None:
            self.hello_digest = p.transcript(answer)
        return answer, "ok", ""

    def _facts(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        cfg = self.agent.config
        port = p.int_field(request, "port", 18515, 1, 65535)
        facts, cached = self.agent.facts.get(self.client, port, timeout=FACTS_BUDGET + 30.0)
        facts = public_facts(facts, cfg.privileged_facts or cfg.token is not None)
        return p.answer(request, facts=facts, cached=cached), "ok", f"port={port}{' cached' if cached else ''}"

    def _result(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
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

    def _auth(self, request: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
        cfg = self.agent.config
        if cfg.token is None:
            return p.answer(request, note="this agent has no token: nothing to check"), "ok", "no token set"
        if self.key is not None:
            raise p.ProtocolError("bad-request", "already authenticated")
        if self.challenge is None:
            raise p.ProtocolError("bad-request", "send hello first: auth answers its challenge")
        mac, cnonce = request.get("mac"), request.get("cnonce")
        if not isinstance(mac, str) or not isinstance(cnonce, str) or not 16 <= len(cnonce) <= 128:
            raise p.ProtocolError("bad-request", "auth needs 'mac' and 'cnonce' (16 to 128 hex characters)")
        wait = self.agent.backoff.wait_left(self.client)
        if wait > 0:
            raise p.ProtocolError("auth-backoff", f"too many failed authentications from {self.client}: "
                                                  f"try again in {wait:.0f} s")
        challenge, self.challenge = self.challenge, None          # one try per challenge
        if not p.same(mac, p.client_mac(cfg.token, challenge, cnonce, self.hello_digest)):
            self.agent.backoff.failed(self.client)
            raise p.ProtocolError("auth-failed", "the token does not match")
        self.agent.backoff.succeeded(self.client)
        self.authed = True
        # this answer goes out unsealed (its server_mac is its proof); every later one is sealed
        self.pending_key = p.session_key(cfg.token, challenge, cnonce)
        return p.answer(request, server_mac=p.agent_mac(cfg.token, challenge, cnonce, self.hello_digest)), "ok", ""

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
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        self._release()
        self.agent.perftest.stop_all(self.number)
        try:
            self.conn.close()
        except OSError:
            pass
