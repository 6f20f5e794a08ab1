"""The client side of the agent protocol, used by the probe (and by tests)."""
from __future__ import annotations

import json
import socket
from typing import Any, Dict, Optional

from rdmadoctor.probe import protocol as p


class AgentFailure(Exception):
    """The agent answered with an error (code, message) or broke the protocol."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class AgentSession:
    def __init__(self, sock: socket.socket, token: Optional[bytes] = None):
        self.sock = sock
        self.token = token
        self.reader = p.LineReader(sock, p.MAX_ANSWER)
        self.ids = 0
        self.hello: Dict[str, Any] = {}

    def call(self, op: str, timeout: float, **fields: Any) -> Dict[str, Any]:
        self.ids += 1
        request = dict(v=p.PROTOCOL, id=self.ids, op=op, **fields)
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(p.encode(request))
            while True:
                line = self.reader.readline(timeout)
                if line is None:
                    raise AgentFailure("closed", f"the agent closed the connection during {op}")
                try:
                    message = json.loads(line.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    raise AgentFailure("bad-answer", f"the agent's answer to {op} is not JSON")
                if not isinstance(message, dict):
                    raise AgentFailure("bad-answer", f"the agent's answer to {op} is not an object")
                if message.get("id") not in (self.ids, None):
                    continue                       # a stale answer
                break
        except socket.timeout:
            raise AgentFailure("timeout", f"no answer to {op} within {timeout:g} s")
        except OSError as exc:
            raise AgentFailure("io", f"{op}: {exc.strerror or exc}")
        if not message.get("ok"):
            err = message.get("error") or {}
            raise AgentFailure(str(err.get("code") or "error"), str(err.get("message") or "no reason given"))
        return message

    def greet(self, timeout: float = 5.0) -> Dict[str, Any]:
        """hello, then auth when the agent asks for it. Raises AgentFailure("auth-failed"|"token-required"|...)."""
        self.hello = self.call("hello", timeout)
        if self.hello.get("auth") == "hmac-sha256":
            if self.token is None:
                raise AgentFailure("token-required", "the agent needs a token (--token-file or $%s)" % p.TOKEN_ENV)
            cnonce = p.new_nonce()
            mac = p.client_mac(self.token, str(self.hello.get("challenge")), cnonce)
            answer = self.call("auth", timeout, mac=mac, cnonce=cnonce)
            expected = p.agent_mac(self.token, str(self.hello.get("challenge")), cnonce)
            if not p.same(str(answer.get("server_mac")), expected):
                raise AgentFailure("auth-failed", "the agent could not prove it holds the same token")
            self.hello["authenticated"] = True
        elif self.token is not None:
            raise AgentFailure("no-token", "the agent runs without a token but one was given: not talking to it "
                                           "(it may not be the agent you set up)")
        return self.hello

    def close(self) -> None:
        try:
            self.sock.settimeout(1.0)
            self.sock.sendall(p.encode({"v": p.PROTOCOL, "id": self.ids + 1, "op": "bye"}))
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def connect(host: str, port: int, timeout: float, token: Optional[bytes] = None,
            source: Optional[str] = None) -> "tuple[Optional[AgentSession], Dict[str, Any]]":
    """(session or None, the TCP outcome from probe.reach.tcp_connect)."""
    from rdmadoctor.probe.reach import tcp_connect
    sock, outcome = tcp_connect(host, port, timeout, source=source, keep=True)
    if sock is None:
        return None, outcome
    return AgentSession(sock, token), outcome
