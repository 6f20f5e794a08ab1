"""The agent's wire protocol: versioned JSON lines over one TCP connection.

Every request is one line of JSON (UTF-8, at most MAX_REQUEST bytes with its newline):

    {"v": 2, "id": 7, "op": "facts", ...}

and every answer repeats the id:

    {"v": 2, "id": 7, "ok": true, ...}                                  success
    {"v": 2, "id": 7, "ok": false, "error": {"code": "busy", "message": "..."}}

Operations (protocol 2):

    hello                       -> agent, version, protocol, ops, auth ("hmac-sha256" | "none"),
                                   challenge (hex), client (the address the agent sees), bind
    auth   {cnonce, mac}        -> server_mac          (only when a token is set; see below)
    facts  {port?}              -> facts               (this host's facts, asked about the client's address)
    listen {}                   -> rdma_port, address, nonce, deadline   (starts the rdma_cm listener child)
    result {wait?}              -> listener            (waits for the listener child's report, then tears it down)
    perftest {tool, options}    -> handle, port, argv   (only with `serve --allow-perftest`: starts a perftest
                                   server from bench's allowlist; rdmadoctor/agent/perftest.py)
    perftest-wait {handle, wait} -> output, rc, timed_out, seconds
    perftest-stop {handle}      -> output, rc, ...      (a connection that closes stops its servers too)
    bye                         -> (closes the connection)

The client chooses no command and no file: `port` (an int) and `wait` (seconds, capped) are the only
parameters the agent takes from a client (and, for perftest, allowlisted options). An unknown op gets the
error `unknown-op` with the list of ops this agent supports; a request of another protocol version gets
`unsupported-version`.

Authentication (when the agent has a token). The agent's `hello` carries a random challenge; the client
answers with its own random cnonce and

    mac = HMAC-SHA256(token, "rdmadoctor-agent/2 client|" + challenge + "|" + cnonce + "|" + transcript)

where transcript = SHA-256 of the hello answer as canonical JSON (canonical() below), so a relay that altered
the hello (its `auth`, `perftest` or `challenge`) fails here. The agent checks it in constant time and proves
it holds the token too:

    server_mac = HMAC-SHA256(token, "rdmadoctor-agent/2 agent|" + challenge + "|" + cnonce + "|" + transcript)

Both then hold the session key

    key = HMAC-SHA256(token, "rdmadoctor-agent/2 session|" + challenge + "|" + cnonce)

and every later request and answer (errors included) carries `seq` and `mac`: the client numbers its
requests 1, 2, 3, ... (the agent refuses any other number: a replayed, dropped or reordered request), an
answer repeats its request's seq, and

    mac = HMAC-SHA256(key, "request|" or "answer|" + canonical JSON of the message without its mac)

so a relay between the two can neither inject, alter, replay nor reorder what follows the handshake; a
message that fails its check ends the connection. The token never crosses the wire.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import time
from typing import Any, Dict, Optional, Tuple

PROTOCOL = 2
NAME = "rdmadoctor-agent/2"
DEFAULT_PORT = 18600            # TCP; the rdma_cm listener uses DEFAULT_PORT + 1 in the RDMA_PS_TCP space
MAX_REQUEST = 64 * 1024         # bytes of one request line
MAX_ANSWER = 32 * 1024 * 1024   # what a client accepts for one answer (facts can be large)
OPS = ("hello", "auth", "facts", "listen", "result", "perftest", "perftest-wait", "perftest-stop", "bye")
TOKEN_ENV = "RDMADOCTOR_AGENT_TOKEN"


class ProtocolError(Exception):
    """A line that is not a valid request or answer; `code` is the error code sent back."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class TooLarge(ProtocolError):
    def __init__(self, limit: int):
        super().__init__("too-large", f"request longer than {limit} bytes")


# -- framing ----------------------------------------------------------------------------------------------

class LineReader:
    """Reads newline-terminated lines from a socket with a size limit and a deadline per line."""

    def __init__(self, sock: socket.socket, limit: int):
        self.sock = sock
        self.limit = limit
        self.buffer = b""

    def readline(self, timeout: float) -> Optional[bytes]:
        """One line without its newline; None at EOF. Raises TooLarge, socket.timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if len(self.buffer) > self.limit:
                raise TooLarge(self.limit)
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no complete line in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(min(65536, self.limit + 1 - len(self.buffer)) or 1)
            if not chunk:
                if self.buffer:
                    raise ProtocolError("bad-request", "connection closed in the middle of a line")
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        if len(line) + 1 > self.limit:
            raise TooLarge(self.limit)
        return line


def encode(message: Dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def canonical(message: Dict[str, Any]) -> bytes:
    """The bytes a MAC covers: sorted keys, no spaces, ASCII. Both sides compute it from the parsed message, so
    it does not depend on how the line was spelled."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode("ascii")


def normalized(message: Dict[str, Any]) -> Dict[str, Any]:
    """The message as the other side will parse it (tuples become lists, other objects strings)."""
    return json.loads(json.dumps(message, default=str))


def decode_request(line: bytes) -> Dict[str, Any]:
    """A request dict, or ProtocolError saying what is wrong with the line."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("bad-request", "request is not UTF-8")
    try:
        message = json.loads(text)
    except RecursionError:
        raise ProtocolError("bad-request", "request nests too deeply")
    except ValueError as exc:
        raise ProtocolError("bad-request", f"request is not JSON ({exc.__class__.__name__})")
    if not isinstance(message, dict):
        raise ProtocolError("bad-request", "request is not a JSON object")
    version = message.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ProtocolError("bad-request", "request has no integer protocol version 'v'")
    if version != PROTOCOL:
        raise ProtocolError("unsupported-version", f"this agent speaks protocol {PROTOCOL}, not {version}")
    op = message.get("op")
    if not isinstance(op, str) or not op:
        raise ProtocolError("bad-request", "request has no 'op'")
    rid = message.get("id")
    if rid is not None and (not isinstance(rid, int) or isinstance(rid, bool)):
        raise ProtocolError("bad-request", "'id' must be an integer")
    return message


def answer(request: Optional[Dict[str, Any]], **fields: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"v": PROTOCOL, "id": (request or {}).get("id"), "ok": True}
    out.update(fields)
    return out


def error(request: Optional[Dict[str, Any]], code: str, message: str, **fields: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"v": PROTOCOL, "id": (request or {}).get("id"), "ok": False,
                           "error": {"code": code, "message": message}}
    out.update(fields)
    return out


def int_field(request: Dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = request.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolError("bad-request", f"'{name}' must be an integer from {low} to {high}")
    return value


def number_field(request: Dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = request.get(name, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolError("bad-request", f"'{name}' must be a number from {low:g} to {high:g}")
    return float(value)


# -- authentication ---------------------------------------------------------------------------------------

def new_nonce() -> str:
    return secrets.token_hex(16)


def transcript(hello: Dict[str, Any]) -> str:
    """What the handshake MACs bind: the hello answer, as the agent sent it and the client read it."""
    return hashlib.sha256(canonical({k: v for k, v in hello.items() if k not in ("mac", "seq")})).hexdigest()


def _mac(token: bytes, role: str, challenge: str, cnonce: str, hello_digest: str = "") -> str:
    message = f"{NAME} {role}|{challenge}|{cnonce}|{hello_digest}".encode("ascii", "replace")
    return hmac.new(token, message, hashlib.sha256).hexdigest()


def client_mac(token: bytes, challenge: str, cnonce: str, hello_digest: str = "") -> str:
    return _mac(token, "client", challenge, cnonce, hello_digest)


def agent_mac(token: bytes, challenge: str, cnonce: str, hello_digest: str = "") -> str:
    return _mac(token, "agent", challenge, cnonce, hello_digest)


def session_key(token: bytes, challenge: str, cnonce: str) -> bytes:
    return hmac.new(token, f"{NAME} session|{challenge}|{cnonce}".encode("ascii", "replace"), hashlib.sha256).digest()


def message_mac(key: bytes, role: str, message: Dict[str, Any]) -> str:
    body = {k: v for k, v in message.items() if k != "mac"}
    return hmac.new(key, role.encode("ascii") + b"|" + canonical(body), hashlib.sha256).hexdigest()


def seal(key: bytes, role: str, message: Dict[str, Any], seq: int) -> Dict[str, Any]:
    """`message` with its sequence number and MAC (role: "request" or "answer")."""
    out = normalized(dict(message, seq=seq))
    out.pop("mac", None)
    out["mac"] = message_mac(key, role, out)
    return out


def check_seal(key: bytes, role: str, message: Dict[str, Any], seq: int) -> Optional[str]:
    """None when `message` carries a valid MAC and the expected seq, else what is wrong."""
    mac = message.get("mac")
    if not isinstance(mac, str):
        return "the message carries no MAC"
    if not same(mac, message_mac(key, role, message)):
        return "the message's MAC does not match"
    got = message.get("seq")
    if not isinstance(got, int) or isinstance(got, bool) or got != seq:
        return f"sequence number {got!r} where {seq} was expected"
    return None


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two hex MACs (of any content a client sends)."""
    return hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))


def read_token(path: Optional[str] = None, environ: Optional[Dict[str, str]] = None) -> Tuple[Optional[bytes], str]:
    """(token bytes or None, where it came from). A file's first line, stripped; else the environment.

    Raises ValueError for a token file that cannot be used (unreadable, empty, readable by others)."""
    env = os.environ if environ is None else environ
    if path:
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                data = f.read(4096)
        except OSError as exc:
            raise ValueError(f"cannot read the token file {path}: {exc.strerror or exc}")
        if st.st_mode & 0o077:
            raise ValueError(f"the token file {path} is readable by group or others "
                             f"(mode {st.st_mode & 0o777:o}): chmod 600 {path}")
        token = data.splitlines()[0].strip() if data.strip() else b""
        if len(token) < 8:
            raise ValueError(f"the token in {path} is empty or shorter than 8 characters")
        return token, f"file {path}"
    value = env.get(TOKEN_ENV)
    if value is not None:
        token = value.strip().encode()
        if len(token) < 8:
            raise ValueError(f"${TOKEN_ENV} is empty or shorter than 8 characters")
        return token, f"${TOKEN_ENV}"
    return None, "none"
