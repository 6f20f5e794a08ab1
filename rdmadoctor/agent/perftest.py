"""The agent's perftest servers for `rdmadoctor bench` (only with `serve --allow-perftest`).

A client names a tool and options; they are validated against bench's allowlist (rdmadoctor.bench.plan), so the
server perftest runs is built from the same RunSpec as the client's and nothing else: no shell, no free-form
argument, a port the agent picks, an output cap, and a hard deadline after which the server is killed.
"""
from __future__ import annotations

import itertools
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from rdmadoctor.bench import plan

PORTS = range(18520, 18600)        # perftest side-channel ports the agent hands out
OUTPUT_LIMIT = 1 << 20             # bytes of a server's output kept
MAX_SECONDS = 900.0                # no perftest server outlives this
START_GRACE = 60.0                 # seconds a server may wait for its client before it is stopped
WAIT_MAX = 120.0                   # what one perftest-wait may block


class PerftestRefused(Exception):
    """A request the agent will not run; `code` goes back to the client."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class _Server:
    handle: int
    owner: int
    port: int
    argv: List[str]
    proc: subprocess.Popen
    started: float
    deadline: float
    chunks: List[bytes] = field(default_factory=list)
    size: int = 0
    reader: Optional[threading.Thread] = None
    timed_out: bool = False

    def drain(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            if self.size < OUTPUT_LIMIT:
                self.chunks.append(chunk[:OUTPUT_LIMIT - self.size])
            self.size += len(chunk)


def _port_free(bind: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


class PerftestServers:
    """At most one perftest server at a time per agent: benchmarks must not share the link."""

    def __init__(self, allowed: bool, bind: str):
        self.allowed = allowed
        self.bind = bind
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
            spec = plan.validate(tool, options)
        except plan.PlanError as exc:
            raise PerftestRefused("not-allowed", str(exc))
        with self.lock:
            self._reap()
            if self.servers:
                raise PerftestRefused("busy", "a perftest server is already running on this agent")
            port = next((p for p in PORTS if _port_free(self.bind, p)), None)
            if port is None:
                raise PerftestRefused("busy", f"no free port in {PORTS.start}-{PORTS.stop - 1}")
            argv = spec.argv(port=port)
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, cwd="/", start_new_session=True)
            except OSError as exc:
                raise PerftestRefused("failed", f"cannot start {tool}: {exc.strerror or exc}")
            now = time.monotonic()
            from rdmadoctor.bench.run import expected_seconds
            deadline = now + min(MAX_SECONDS, expected_seconds(spec) + START_GRACE)
            server = _Server(next(self.handles), owner, port, argv, proc, now, deadline)
            server.reader = threading.Thread(target=server.drain, daemon=True)
            server.reader.start()
            self.servers[server.handle] = server
        return {"handle": server.handle, "port": port, "argv": argv, "deadline": round(deadline - now, 1)}

    def wait(self, owner: int, handle: object, wait: float) -> Dict[str, object]:
        server = self._own(owner, handle)
        end = min(time.monotonic() + min(wait, WAIT_MAX), server.deadline)
        while server.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if server.proc.poll() is None:
            server.timed_out = time.monotonic() >= server.deadline
            self._kill(server)
        return self._finish(server)

    def stop(self, owner: int, handle: object) -> Dict[str, object]:
        server = self._own(owner, handle)
        self._kill(server)
        return self._finish(server)

    def stop_all(self, owner: int) -> None:
        """A client that goes away takes its servers with it (Ctrl-C in bench)."""
        for server in [s for s in list(self.servers.values()) if s.owner == owner]:
            self._kill(server)
            self._finish(server)

    # -- internals --------------------------------------------------------------------------------------
    def _own(self, owner: int, handle: object) -> _Server:
        server = self.servers.get(handle) if isinstance(handle, int) else None
        if server is None or server.owner != owner:
            raise PerftestRefused("bad-request", f"no perftest server {handle!r} on this connection")
        return server

    @staticmethod
    def _kill(server: _Server) -> None:
        if server.proc.poll() is None:
            try:
                server.proc.terminate()
                server.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                server.proc.kill()
                server.proc.wait()

    def _finish(self, server: _Server) -> Dict[str, object]:
        if server.reader is not None:
            server.reader.join(timeout=2)
        with self.lock:
            self.servers.pop(server.handle, None)
        return {"output": b"".join(server.chunks).decode("utf-8", "replace"), "rc": server.proc.returncode,
                "timed_out": server.timed_out, "seconds": round(time.monotonic() - server.started, 3),
                "truncated": server.size > OUTPUT_LIMIT}

    def _reap(self) -> None:
        """Servers past their deadline are killed even if no client asks about them again."""
        now = time.monotonic()
        for server in list(self.servers.values()):
            if now >= server.deadline:
                server.timed_out = True
                self._kill(server)
                self.servers.pop(server.handle, None)
