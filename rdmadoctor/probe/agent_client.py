"""The client side of the agent protocol (protocol.py), used by the probe, bench and the tests.

Whatever the agent answers is checked before anyone reads it: a bounded JSON line, the session MAC and
sequence number once authenticated, and the schema of the operation's answer (rdmadoctor/schemas/
agent.schema.json). An answer that fails any of these is an AgentFailure, never a crash further on.
"""
from __future__ import annotations

import socket
import time
from typing import Any, Callable, Dict, Optional

from rdmadoctor.probe import protocol as p
from rdmadoctor.runtime import jsonio
from rdmadoctor.runtime.text import printable

# the operations whose answers the schema describes field by field
_ANSWER_PARTS = ("hello", "auth", "facts", "listen", "result", "perftest", "perftest-wait", "perftest-stop", "bye")


class AgentFailure(Exception):
    """The agent answered with an error (code, message) or broke the protocol."""

    def __init__(self, code: str, message: str):
        code, message = printable(code, False)[:64], printable(message, False)[:1000]
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _validate(message: Dict[str, Any], op: str, part: str) -> None:
    """The answer against agent.schema.json's `part`; AgentFailure("bad-answer") when it does not fit."""
    try:
        jsonio.validate(message, "agent", f"the agent's answer to {op}", part=part)
    except jsonio.JsonInputError as exc:
        raise AgentFailure("bad-answer", str(exc))


class AgentSession:
    def __init__(self, sock: socket.socket, token: Optional[bytes] = None):
        self.sock = sock
        self.token = token
        self.reader = p.LineReader(sock, p.MAX_ANSWER)
        self.ids = 0
        self.hello: Dict[str, Any] = {}
        self.key: Optional[bytes] = None          # the session key, once authenticated
        self.seq = 0                              # the last request's sequence number

    def _request(self, op: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        self.ids += 1
        request = dict(fields, v=p.PROTOCOL, id=self.ids, op=op)
        if self.key is not None:
            self.seq += 1
            request = p.seal(self.key, "request", request, self.seq)
        return request

    def call(self, op: str, timeout: float, **fields: Any) -> Dict[str, Any]:
        request = self._request(op, fields)
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(p.encode(request))
            message = self._answer_to(op, timeout)
        except socket.timeout:
            raise AgentFailure("timeout", f"no answer to {op} within {timeout:g} s")
        except p.ProtocolError as exc:
            raise AgentFailure("bad-answer", f"{op}: {exc.message}")
        except OSError as exc:
            raise AgentFailure("io", f"{op}: {exc.strerror or exc}")
        self._check(op, message)
        return message

    def _answer_to(self, op: str, timeout: float) -> Dict[str, Any]:
        """The next JSON object the agent sends that answers the last request."""
        while True:
            line = self.reader.readline(timeout)
            if line is None:
                raise AgentFailure("closed", f"the agent closed the connection during {op}")
            try:
                message = jsonio.loads(line, f"the agent's answer to {op}")
            except jsonio.JsonInputError as exc:
                raise AgentFailure("bad-answer", str(exc))
            if not isinstance(message, dict):
                raise AgentFailure("bad-answer", f"the agent's answer to {op} is not an object")
            if self.key is None and message.get("id") not in (self.ids, None):
                continue                       # a stale answer (an authenticated session has none)
            return message

    def _check(self, op: str, message: Dict[str, Any]) -> None:
        """The answer's seal (once authenticated), its schema, and the agent's error when it reports one."""
        if self.key is not None:
            wrong = p.check_seal(self.key, "answer", message, self.seq)
            if wrong is not None:
                raise AgentFailure("unauthenticated", f"the answer to {op} failed its authentication ({wrong}); "
                                                      "something between this host and the agent altered it")
        _validate(message, op, "answer")
        if not message.get("ok"):
            err = message["error"]
            raise AgentFailure(err["code"] or "error", err["message"] or "no reason given")
        if op in _ANSWER_PARTS:
            _validate(message, op, op)

    def greet(self, timeout: float = 5.0) -> Dict[str, Any]:
        """hello, then auth when the agent asks for it. Raises AgentFailure("auth-failed"|"token-required"|...)."""
        self.hello = self.call("hello", timeout)
        if self.hello.get("auth") == "hmac-sha256":
            if self.token is None:
                raise AgentFailure("token-required", "the agent needs a token (--token-file or $%s)" % p.TOKEN_ENV)
            challenge = self.hello.get("challenge")
            if not isinstance(challenge, str):
                raise AgentFailure("bad-answer", "the agent asks for authentication but sent no challenge")
            digest = p.transcript(self.hello)
            cnonce = p.new_nonce()
            mac = p.client_mac(self.token, challenge, cnonce, digest)
            answer = self.call("auth", timeout, mac=mac, cnonce=cnonce)
            expected = p.agent_mac(self.token, challenge, cnonce, digest)
            if not p.same(str(answer.get("server_mac")), expected):
                raise AgentFailure("auth-failed", "the agent could not prove it holds the same token")
            self.key = p.session_key(self.token, challenge, cnonce)
            self.seq = 0
            self.hello["authenticated"] = True
        elif self.token is not None:
            raise AgentFailure("no-token", "the agent runs without a token but one was given: not talking to it "
                                           "(it may not be the agent you set up)")
        return self.hello

    def close(self) -> None:
        try:
            self.sock.settimeout(1.0)
            self.sock.sendall(p.encode(self._request("bye", {})))
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


# the agent closes a connection not authenticated within 10 s (agent/server.py AUTH_DEADLINE): a connection that
# waited longer than this before its session is made again rather than greeted late
FRESH_CONNECTION = 5.0


def _build_validators() -> None:
    jsonio.prepare("agent", "answer", *_ANSWER_PARTS)


def connect(host: str, port: int, timeout: float, token: Optional[bytes] = None, source: Optional[str] = None,
            before_validators: Optional[Callable[[], Any]] = None) -> "tuple[Optional[AgentSession], Dict[str, Any]]":
    """(session or None, the TCP outcome from probe.reach.tcp_connect).

    The answer validators are built once the agent's port is open, after `before_validators` returns: on a slow
    host they take seconds of the CPU that the probe's verbs child needs to start within its deadline, and a dead
    or filtered peer's verdict waits for that child. They must not fall between greeting and authenticating
    either, so a connection that waited too long for them is made again."""
    from rdmadoctor.probe.reach import tcp_connect
    sock, outcome = tcp_connect(host, port, timeout, source=source, keep=True)
    if sock is None:
        return None, outcome
    connected = time.monotonic()
    if before_validators is not None:
        before_validators()
    _build_validators()
    if time.monotonic() - connected > FRESH_CONNECTION:
        sock.close()
        sock, again = tcp_connect(host, port, timeout, source=source, keep=True)
        if sock is None:
            return None, again
    return AgentSession(sock, token), outcome
