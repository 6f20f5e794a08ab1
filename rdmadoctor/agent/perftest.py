"""The agent's perftest servers for `rdmadoctor bench` (only with `serve --allow-perftest`).

A client names a tool and options; they are validated against bench's allowlist (rdmadoctor.knowledge.perftest), so the
server perftest runs is built from the same RunSpec as the client's and nothing else: no shell, no free-form
argument, a port the agent picks, an output cap, and a hard deadline after which the server is stopped.
"""
from __future__ import annotations

import itertools
import socket
import threading
import time
from dataclasses import dataclass
from typing import Dict

from rdmadoctor.knowledge import perftest as knowledge
from rdmadoctor.runtime.pty import PtyProcess

PORTS = range(18520, 18600)        # perftest side-channel ports the agent hands out
MAX_SECONDS = 900.0                # no perftest server outlives this
START_GRACE = 60.0                 # seconds a server may wait for its client before it is stopped
LISTEN_WAIT = 30.0                 # seconds for the server to print its banner (it then listens)
WAIT_MAX = 120.0                   # what one perftest-wait may block
BANNER = "Waiting for client"


class PerftestRefused(Exception):
    """A request the agent will not run; `code` goes back to the client."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class _Server:
    handle: int
    owner: int                         # the agent connection that started it
    port: int
    process: PtyProcess
    deadline: float


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


class PerftestServers:
    """At most one perftest server at a time per agent: benchmarks must not share the link."""

    def __init__(self, allowed: bool):
        self.allowed = allowed
        self.lock = threading.Lock()
        self.servers: Dict[int, _Server] = {}
        self.handles = itertools.count(1)

    def start(self, owner: int, tool: object, options: object) -> Dict[str, object]:
        if not self.allowed:
            raise PerftestRefused("not-allowed", "this agent runs no perftest: start it with `rdmadoctor serve "
                                                 "--allow-perftest` to let `rdmadoctor bench` use it")
        if not isinstance(tool, str) or not isinstance(options, dict):
            raise PerftestRefused("bad-request", "perftest needs 'tool' (a string) and 'options' (an object)")
        try:
            spec = knowledge.validate(tool, options)
        except knowledge.PlanError as exc:
            raise PerftestRefused("not-allowed", str(exc))
        with self.lock:
            self._reap()
            if self.servers:
                raise PerftestRefused("busy", "a perftest server is already running on this agent")
            port = next((p for p in PORTS if _port_free(p)), None)
            if port is None:
                raise PerftestRefused("busy", f"no free port in {PORTS.start}-{PORTS.stop - 1}")
            argv = spec.argv(port=port)
            try:
                process = PtyProcess(argv)
            except OSError as exc:
                raise PerftestRefused("failed", f"cannot start {tool}: {exc.strerror or exc}")
            deadline = time.monotonic() + min(MAX_SECONDS, knowledge.expected_seconds(spec) + START_GRACE)
            server = _Server(next(self.handles), owner, port, process, deadline)
            self.servers[server.handle] = server
        # answer once the server listens: a client started earlier would find nothing on the port
        listening = process.wait_for(BANNER, LISTEN_WAIT)
        return {"handle": server.handle, "port": port, "argv": argv, "listening": listening,
                "deadline": round(deadline - time.monotonic(), 1)}

    def wait(self, owner: int, handle: object, wait: float) -> Dict[str, object]:
        server = self._own(owner, handle)
        server.process.wait(min(min(wait, WAIT_MAX), server.deadline - time.monotonic()))
        return self._finish(server)

    def stop(self, owner: int, handle: object) -> Dict[str, object]:
        server = self._own(owner, handle)
        server.process.stop()
        return self._finish(server)

    def stop_all(self, owner: int) -> None:
        """A client that goes away takes its servers with it (Ctrl-C in bench)."""
        for server in [s for s in list(self.servers.values()) if s.owner == owner]:
            server.process.stop()
            self._finish(server)

    def stop_everything(self) -> None:
        """The agent is stopping (SIGTERM, SIGINT): no server it started outlives it."""
        self.allowed = False
        for server in list(self.servers.values()):
            server.process.stop()
            self._finish(server)

    def _own(self, owner: int, handle: object) -> _Server:
        server = self.servers.get(handle) if isinstance(handle, int) else None
        if server is None or server.owner != owner:
            raise PerftestRefused("bad-request", f"no perftest server {handle!r} on this connection")
        return server

    def _finish(self, server: _Server) -> Dict[str, object]:
        with self.lock:
            self.servers.pop(server.handle, None)
        return server.process.result()

    def _reap(self) -> None:
        """Servers past their deadline are stopped even if no client asks about them again."""
        for server in list(self.servers.values()):
            if time.monotonic() >= server.deadline:
                server.process.timed_out = True
                server.process.stop()
                self.servers.pop(server.handle, None)
