"""The agent under attack, on loopback: log flooding and forgery, slot holding, what facts tell about other
processes, a token-less agent, an on-path relay after the handshake, password guessing, orphaned perftest
servers, and the perftest allowlist's bounds (docs/probe.md, "Threat model")."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rdmadoctor.agent import server
from rdmadoctor.knowledge import perftest as knowledge
from rdmadoctor.probe import protocol as p
from rdmadoctor.probe.agent_client import AgentFailure, AgentSession
from tests.probe.helpers import TOKEN, LineClient, fake_facts, running_agent

REPO = Path(__file__).resolve().parents[2]


def _records(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rdmadoctor.agent"]


# -- 1. the log ------------------------------------------------------------------------------------------

def test_unknown_ops_count_as_bad_requests():
    with running_agent() as (_, port):
        c = LineClient(port)
        for i in range(3):
            answer = c.call(op=f"nope{i}", id=i)
            assert answer["error"]["code"] == "unknown-op"
        assert c.closed()


def test_client_values_in_the_log_are_escaped_and_cut_short(caplog):
    caplog.set_level(logging.INFO, logger="rdmadoctor.agent")
    forged = "x\n2026-01-01T00:00:00 rdmadoctor-agent client=10.0.0.1:1 op=auth outcome=ok"
    with running_agent() as (_, port):
        for op in (forged, "a\x00b\u202eexe.txt", "\x1b]52;c;aGk=\x07", "y" * 60000):
            c = LineClient(port)
            c.call(op=op, id=1)
            c.close()
        time.sleep(0.2)
    lines = _records(caplog)
    assert lines
    for line in lines:
        assert "\n" not in line and "\x00" not in line and "\u202e" not in line and "\x1b" not in line, line
        assert len(line) <= 700, len(line)
    assert not any(line.startswith("2026-01-01") or "client=10.0.0.1" in line.split(" op=")[0] for line in lines)


def test_one_connection_cannot_fill_the_log(caplog):
    caplog.set_level(logging.INFO, logger="rdmadoctor.agent")
    with running_agent() as (_, port):
        c = LineClient(port)
        for i in range(400):
            c.send(op="hello", id=i)
        for _ in range(400):
            assert c.receive()["ok"]
        c.close()
        time.sleep(0.3)
    lines = _records(caplog)
    assert len(lines) <= server.MAX_LOG_LINES + 2, len(lines)
    assert sum(len(line) for line in lines) < 40_000


# -- 2. slots --------------------------------------------------------------------------------------------

def test_an_unauthenticated_connection_ends_after_the_deadline_whatever_it_sends(monkeypatch):
    monkeypatch.setattr(server, "AUTH_DEADLINE", 1.0, raising=False)
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 4.0:
            try:
                c.send(op="hello", id=1)
                if c.receive() is None:
                    closed = True
                    break
            except OSError:
                closed = True
                break
            time.sleep(0.2)
        assert closed and time.monotonic() - started < 3.0


def test_unauthenticated_clients_cannot_keep_the_token_holder_out():
    with running_agent(token=TOKEN, max_clients=4) as (agent, port):
        squatters = []
        for _ in range(12):
            try:
                s = LineClient(port)
                s.send(op="hello", id=1)
                squatters.append(s)
            except OSError:
                pass
        time.sleep(0.3)
        owner = LineClient(port)
        assert owner.authenticate()["ok"]
        facts = owner.call(op="facts", id=3)
        assert facts["ok"], facts
        # the authenticated session keeps its slot while newcomers come and go
        for _ in range(6):
            LineClient(port).send(op="hello", id=1)
        time.sleep(0.3)
        assert owner.call(op="facts", id=4)["ok"]
        assert agent.active <= 4


# -- 3. what facts tell about other processes --------------------------------------------------------------

def _facts_with_listener(client: str, port: int):
    doc = fake_facts(client, port)
    doc["sections"]["ports"] = {"status": "ok", "unreadable": [], "seconds": 0.1, "source": "psutil", "data": {
        "port": port, "ports_asked": [port],
        "tcp_listeners": [{"ip": "0.0.0.0", "port": port, "family": 4, "pid": 4242, "process": "postgres",
                           "cmdline": ["postgres", "--db-password=hunter2"], "user": "dba"}],
        "rdma_processes": [{"pid": 77, "process": "ib_write_bw", "cmdline": ["ib_write_bw", "--secret=x"],
                            "user": "alice"}]}}
    return doc


def _strings(value) -> list:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _numbers(value) -> list:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def test_facts_never_carry_another_process_command_line_pid_or_user():
    with running_agent(token=TOKEN, facts=_facts_with_listener) as (_, port):
        c = LineClient(port)
        assert c.authenticate()["ok"]
        answer = c.call(op="facts", id=3, port=5432)
    # whole JSON strings: the answer's MAC is hex, and "dba" turns up in hex now and then
    strings = _strings(answer)
    assert not any("hunter2" in s or "--secret" in s for s in strings)
    assert "dba" not in strings and "alice" not in strings and 4242 not in _numbers(answer)
    listener = answer["facts"]["sections"]["ports"]["data"]["tcp_listeners"][0]
    assert listener == {"ip": "0.0.0.0", "port": 5432, "family": 4, "process": "postgres"}
    assert answer["facts"]["sections"]["ports"]["data"]["rdma_processes"] == [{"process": "ib_write_bw"}]


def _facts_with_perftest(client: str, port: int):
    doc = _facts_with_listener(client, port)
    doc["sections"]["ports"]["data"]["perftest"] = [
        {"tool": "ib_write_bw", "cmdline": ["ib_write_bw", "-d", "rxe0", "-s", "65536", "-p", "18520",
                                            "--out_json_file=/home/alice/secret.json"],
         "listening": [18520], "connected": False, "pid": 4243, "user": "alice"},
        {"tool": "ib_send_bw", "cmdline": ["ib_send_bw", "-d", "rxe0", "--kek_path", "/etc/kek", "192.0.2.9"],
         "listening": [], "connected": True, "pid": 4244, "user": "bob"}]
    return doc


def test_the_peers_perftest_is_told_as_binary_options_and_ports_only():
    with running_agent(token=TOKEN, facts=_facts_with_perftest) as (_, port):
        c = LineClient(port)
        assert c.authenticate()["ok"]
        answer = c.call(op="facts", id=3, port=18515)
    text = json.dumps(answer["facts"])       # not the answer's hex MAC, where "4243" may turn up
    for secret in ("secret", "kek", "/etc", "alice", "bob", "cmdline"):
        assert secret not in text, secret
    assert 4243 not in _numbers(answer) and "4243" not in _strings(answer)
    server, client = answer["facts"]["sections"]["ports"]["data"]["perftest"]
    assert server == {"tool": "ib_write_bw", "role": "server", "options": {"ib-dev": "rxe0", "size": "65536",
                                                                           "port": "18520"},
                      "port": 18520, "listening": [18520], "connected": False, "rdma_cm": False, "target": None}
    assert client["role"] == "client" and client["target"] == "192.0.2.9" and client["options"] == {"ib-dev": "rxe0"}


def test_fresh_collections_are_rate_limited_per_client():
    calls = []

    def facts(client, port):
        calls.append(port)
        return fake_facts(client, port)

    with running_agent(facts=facts) as (_, port):
        c = LineClient(port)
        codes = []
        for i, asked in enumerate(range(20000, 20020)):
            answer = c.call(op="facts", id=i, port=asked)
            codes.append("ok" if answer["ok"] else answer["error"]["code"])
        assert c.call(op="facts", id=99, port=20000)["ok"]          # a cached answer is still given
    assert len(calls) <= server.FACTS_PER_WINDOW, calls
    assert codes.count("rate-limited") == 20 - len(calls)


# -- 4. the token-less agent -----------------------------------------------------------------------------

def _root_facts(client: str, port: int):
    doc = fake_facts(client, port)
    doc["sections"]["firewall"] = {"status": "ok", "unreadable": [], "seconds": 0.1, "source": "nft -j",
                                   "data": {"backend": "nftables", "verdicts": [], "rules_seen": 3}}
    doc["sections"]["kernel"] = {"status": "ok", "unreadable": [], "seconds": 0.1, "source": "kmsg", "data": {
        "modules": ["ib_core"], "log": {"source": "kmsg", "readable": True, "total_records": 2, "rdma_records": 1,
                                        "lines": [{"ts": 1.0, "level": 3, "text": "secret kernel line"}]}}}
    return doc


def test_a_tokenless_agent_answers_only_what_any_user_could_read():
    with running_agent(facts=_root_facts) as (_, port):
        answer = LineClient(port).call(op="facts", id=1)
    sections = answer["facts"]["sections"]
    assert sections["firewall"]["status"] == "unavailable" and "withheld" in sections["firewall"]["reason"]
    assert "secret kernel line" not in json.dumps(answer)
    assert sections["kernel"]["data"]["modules"] == ["ib_core"]
    with running_agent(facts=_root_facts, privileged_facts=True) as (_, port):     # the operator said so
        answer = LineClient(port).call(op="facts", id=1)
    assert answer["facts"]["sections"]["firewall"]["status"] == "ok"
    assert "secret kernel line" in json.dumps(answer)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "rdmadoctor", "serve", "--bind", "127.0.0.1", *args],
                            cwd=str(REPO), stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the agent did not listen")


def test_serve_without_a_token_warns_loudly_even_on_loopback():
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != p.TOKEN_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "rdmadoctor", "serve", "--bind", "127.0.0.1", "--port", str(port)],
                            cwd=str(REPO), stderr=subprocess.PIPE, text=True, env=dict(env, PYTHONPATH=str(REPO)))
    try:
        _wait_listening(port)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "WARNING: NO TOKEN" in err and "--token-file" in err, err


# -- 5. after the handshake ------------------------------------------------------------------------------

def test_requests_after_the_handshake_must_carry_the_session_mac():
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        assert c.authenticate()["ok"]
        c.key = None                                 # what an on-path relay could inject: no MAC
        answer = c.call(op="facts", id=3)
        assert answer["ok"] is False and answer["error"]["code"] == "auth-failed"
        assert c.closed()
        c = LineClient(port)
        assert c.authenticate()["ok"]
        assert c.key is not None, "no session key: requests after the handshake are not authenticated"
        sealed = p.seal(c.key, "request", {"v": p.PROTOCOL, "id": 3, "op": "facts"}, 1)
        c.send_raw((json.dumps(sealed) + "\n").encode())
        assert c.receive()["ok"]
        c.send_raw((json.dumps(sealed) + "\n").encode())          # replayed: the same sequence number
        answer = c.receive()
        assert answer["ok"] is False and answer["error"]["code"] == "auth-failed"
        assert c.closed()


class Relay:
    """A man in the middle on loopback: forwards both ways, rewriting what the agent answers."""

    def __init__(self, port: int, rewrite):
        self.target, self.rewrite = port, rewrite
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        conn, _ = self.sock.accept()
        upstream = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pump, args=(conn, upstream, lambda b: b), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, conn, self.rewrite), daemon=True).start()

    @staticmethod
    def _pump(src, dst, change):
        buffer = b""
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    dst.sendall(change(line) + b"\n")
        except OSError:
            pass
        finally:
            dst.close()


def test_a_relay_that_alters_an_answer_is_caught_by_the_client():
    with running_agent(token=TOKEN) as (_, port):
        relay = Relay(port, lambda line: line.replace(b"fake-peer", b"evil-peer"))
        session = AgentSession(socket.create_connection(("127.0.0.1", relay.port), timeout=5), TOKEN)
        assert session.greet()["authenticated"]
        with pytest.raises(AgentFailure) as exc:
            session.call("facts", 10.0)
        assert exc.value.code == "unauthenticated"
        session.close()


def test_a_relay_that_alters_the_hello_fails_the_handshake():
    with running_agent(token=TOKEN) as (_, port):
        relay = Relay(port, lambda line: line.replace(b'"perftest":false', b'"perftest":true'))
        session = AgentSession(socket.create_connection(("127.0.0.1", relay.port), timeout=5), TOKEN)
        with pytest.raises(AgentFailure) as exc:
            session.greet()
        assert exc.value.code in ("auth-failed", "closed")
        session.close()


def test_failed_authentications_back_off_per_source_address():
    checked = refused = 0
    with running_agent(token=TOKEN, max_clients=64) as (_, port):
        started = time.monotonic()
        while time.monotonic() - started < 3.0:
            c = LineClient(port)
            hello = c.call(op="hello", id=1)
            cnonce = p.new_nonce()
            mac = p.client_mac(b"a wrong guess", hello["challenge"], cnonce)
            answer = c.call(op="auth", id=2, cnonce=cnonce, mac=mac)
            code = answer["error"]["code"]
            checked += code == "auth-failed"
            refused += code == "auth-backoff"
            c.close()
        # the right token after the wait still gets in
        time.sleep(0.1)
    assert checked <= getattr(server, "AUTH_FREE_FAILURES", 3) + 2, checked
    assert refused > 0


def test_the_client_speaks_the_sealed_protocol_end_to_end():
    with running_agent(token=TOKEN) as (agent, port):
        session = AgentSession(socket.create_connection(("127.0.0.1", port), timeout=5), TOKEN)
        assert session.greet()["authenticated"]
        for _ in range(3):
            assert session.call("facts", 10.0)["facts"]["host"]["hostname"] == "fake-peer"
        assert session.call("listen", 10.0)["rdma_port"] == agent.rdma_port
        assert session.call("result", 10.0, wait=0)["listener"]["state"] == "finished"
        session.close()


# -- 6. nothing outlives the agent -----------------------------------------------------------------------

FAKE_PERFTEST = """#!/bin/sh
echo $$ > "{dir}/pid"
env > "{dir}/env"
echo " Waiting for client to connect... *"
exec sleep 300
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_perftest_servers_stop_with_the_agent_and_never_see_its_token(tmp_path, sig):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "ib_write_bw"
    fake.write_text(FAKE_PERFTEST.format(dir=tmp_path))
    fake.chmod(0o755)
    port = _free_port()
    token = "a-token-for-the-test"
    proc = _serve("--port", str(port), "--allow-perftest",
                  env={"PATH": f"{bindir}:{os.environ['PATH']}", p.TOKEN_ENV: token})
    try:
        _wait_listening(port)
        session = AgentSession(socket.create_connection(("127.0.0.1", port), timeout=5), token.encode())
        session.greet()
        answer = session.call("perftest", 40.0, tool="ib_write_bw", options={"qp": 1})
        assert answer["listening"], answer
        pid = int((tmp_path / "pid").read_text())
        os.kill(pid, 0)                                             # running
        proc.send_signal(sig)
        proc.communicate(timeout=20)
        deadline = time.monotonic() + 10
        alive = True
        while alive and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                with open(f"/proc/{pid}/stat") as f:
                    alive = f.read().split(") ")[1][0] != "Z"
            except (OSError, IndexError):
                alive = False
            time.sleep(0.1)
        assert not alive, "the perftest server outlived the agent"
        assert token not in (tmp_path / "env").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        try:
            os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


# -- 7. the allowlist's bounds ---------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {"qp": "\uff12"},                     # fullwidth 2
    {"size": "\u0663\u0662"},             # Arabic-Indic 32
    {"iters": "1\u0669"},
    {"duration": "9999"}, {"duration": "0"},
    {"iters": "0"}, {"iters": "4"},
    {"tx-depth": "9999999"}, {"rx-depth": "0"},
    {"gid-index": "65"}, {"ib-port": "0"}, {"sl": "16"}, {"cq-mod": "0"}, {"inline_size": "99999"},
    {"qp": 2.5}, {"qp": True}, {"size": "-1"}, {"size": " 64"}, {"qp": "2\n"},
])
def test_the_allowlist_takes_ascii_digits_within_bounds_only(options):
    with pytest.raises(knowledge.PlanError):
        knowledge.validate("ib_write_bw", options)


def test_the_allowlist_accepts_its_bounds():
    spec = knowledge.validate("ib_write_bw", {"qp": "16", "size": 65536, "iters": "5", "tx-depth": 128,
                                              "gid-index": "64", "ib-port": "1", "sl": "15", "rx-depth": "512"})
    assert spec.argv(port=18520)[0] == "ib_write_bw"
    assert knowledge.validate("ib_write_bw", {"duration": "600"}).get("duration") == "600"


def test_rules_never_see_a_command_line():
    from rdmadoctor.views.factview import build
    doc = _facts_with_listener("192.0.2.2", 18515)
    view = build(doc)
    assert view["listeners"] and "cmdline" not in view["listeners"][0]
    assert "hunter2" not in json.dumps(view, default=str)
