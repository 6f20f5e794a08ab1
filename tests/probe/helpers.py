"""A real agent on loopback (with fake facts and listener), and a raw line client, for the probe tests."""
from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, List, Optional

from rdmadoctor.probe import protocol as p
from rdmadoctor.agent.server import Agent, Config

HERE = Path(__file__).resolve().parent
FAKE_CHILD = str(HERE / "fake_child.py")
DATA = HERE / "data"
TOKEN = b"correct horse battery staple"


def fake_facts(client: str, port: int) -> Dict[str, Any]:
    return {"schema": "rdmadoctor-facts/1", "host": {"hostname": "fake-peer", "peer": client, "port": port},
            "sections": {}}


class FakeListener:
    """Stands in for server.Listener: no child process."""
    started: List["FakeListener"] = []

    def __init__(self, bind: str, port: int, nonce: str):
        self.bind, self.port, self.nonce, self.closed = bind, port, nonce, False
        FakeListener.started.append(self)

    def result(self, wait: float) -> Dict[str, Any]:
        return {"state": "finished", "events": [{"ev": "burst", "state": "passed",
                                                 "deltas": {"hw_counters": {"rcvd_pkts": 100}}}], "seconds": 0.1}

    def close(self) -> None:
        self.closed = True


@contextmanager
def running_agent(**overrides: Any):
    """An Agent on 127.0.0.1 (a free port), served by a thread; yields (agent, port)."""
    cfg = dict(bind="127.0.0.1", port=0, facts=fake_facts, listener=FakeListener)
    cfg.update(overrides)
    agent = Agent(Config(**cfg))
    _, port = agent.open()
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    thread.start()
    try:
        yield agent, port
    finally:
        agent.shutdown()
        thread.join(5)


class LineClient:
    """Speaks raw lines to the agent (to send what a well-behaved client never would)."""

    def __init__(self, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buffer = b""
        self.sent = b""
        self.key: Optional[bytes] = None        # after authenticate(): every request is sealed
        self.seq = 0

    def send_raw(self, data: bytes) -> None:
        self.sent += data
        self.sock.sendall(data)

    def send(self, **message: Any) -> None:
        message.setdefault("v", p.PROTOCOL)
        if self.key is not None:
            self.seq += 1
            message = p.seal(self.key, "request", message, self.seq)
        self.send_raw((json.dumps(message) + "\n").encode())

    def authenticate(self, token: bytes = TOKEN) -> Dict[str, Any]:
        """hello and auth as a good client does; afterwards send() seals every request."""
        hello = self.call(op="hello", id=1)
        if not hello or not hello.get("ok"):
            return hello or {"ok": False, "error": {"code": "closed", "message": "no answer"}}
        cnonce = p.new_nonce()
        if hello.get("protocol", p.PROTOCOL) < 2:       # no session MACs (tests also run against older agents)
            return self.call(op="auth", id=2, cnonce=cnonce, mac=p.client_mac(token, hello["challenge"], cnonce))
        digest = p.transcript(hello)
        answer = self.call(op="auth", id=2, cnonce=cnonce, mac=p.client_mac(token, hello["challenge"], cnonce, digest))
        if answer and answer.get("ok"):
            self.key, self.seq = p.session_key(token, hello["challenge"], cnonce), 0
        return answer

    def receive(self) -> Optional[Dict[str, Any]]:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def call(self, **message: Any) -> Optional[Dict[str, Any]]:
        self.send(**message)
        return self.receive()

    def closed(self, timeout: float = 3.0) -> bool:
        """True when the agent closed the connection (EOF) within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.sock.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except OSError:
                return True
            if not chunk:
                return True
            self.buffer += chunk
        return False

    def close(self) -> None:
        self.sock.close()
