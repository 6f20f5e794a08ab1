"""The agent under misuse, on loopback: wrong tokens, oversized and malformed requests, 50 clients at once."""
from __future__ import annotations

import json
import logging
import socket
import threading
import time

import pytest

from rdmadoctor.probe import protocol as p
from rdmadoctor.probe.agent_client import AgentFailure, AgentSession
from tests.probe.helpers import TOKEN, FakeListener, LineClient, running_agent


def authenticate(client: LineClient, token: bytes = TOKEN) -> dict:
    return client.authenticate(token)


def test_wrong_token_is_refused_and_the_connection_closed():
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        hello = c.call(op="hello", id=1)
        assert hello["ok"] and hello["auth"] == "hmac-sha256" and len(hello["challenge"]) == 32
        cnonce = p.new_nonce()
        answer = c.call(op="auth", id=2, cnonce=cnonce, mac=p.client_mac(b"wrong token!", hello["challenge"], cnonce))
        assert answer["ok"] is False and answer["error"]["code"] == "auth-failed"
        assert c.closed()


def test_nothing_but_hello_before_auth():
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        c.call(op="hello", id=1)
        for op in ("facts", "listen", "result"):
            answer = c.call(op=op, id=3)
            assert answer["ok"] is False and answer["error"]["code"] == "auth-required", op
        assert FakeListener.started == [] or all(listener.closed for listener in FakeListener.started)


def test_a_challenge_can_be_answered_once():
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        hello = c.call(op="hello", id=1)
        cnonce = p.new_nonce()
        mac = p.client_mac(TOKEN, hello["challenge"], cnonce, p.transcript(hello))
        assert c.call(op="auth", id=2, cnonce=cnonce, mac=mac)["ok"]
        replay = c.call(op="auth", id=3, cnonce=cnonce, mac=mac)        # unsealed, after the handshake
        assert replay["ok"] is False and replay["error"]["code"] == "auth-failed"
        other = LineClient(port)                                        # a recorded answer, a new challenge
        other.call(op="hello", id=1)
        replay = other.call(op="auth", id=2, cnonce=cnonce, mac=mac)
        assert replay["ok"] is False and replay["error"]["code"] == "auth-failed"


def test_right_token_both_ways_and_it_never_crosses_the_wire():
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        answer = authenticate(c)
        assert answer["ok"] and answer["server_mac"]
        facts = c.call(op="facts", id=4)
        assert facts["ok"] and facts["facts"]["host"]["peer"] == "127.0.0.1"
        assert TOKEN not in c.sent and TOKEN.hex().encode() not in c.sent
        # the client side checks the agent's proof too
        session = AgentSession(socket.create_connection(("127.0.0.1", port), timeout=5), TOKEN)
        assert session.greet()["authenticated"] is True
        session.close()
        impostor = AgentSession(socket.create_connection(("127.0.0.1", port), timeout=5), b"another token")
        with pytest.raises(AgentFailure) as exc:
            impostor.greet()
        assert exc.value.code == "auth-failed"
        impostor.close()


def test_a_client_with_a_token_refuses_an_agent_without_one():
    with running_agent() as (_, port):
        session = AgentSession(socket.create_connection(("127.0.0.1", port), timeout=5), TOKEN)
        with pytest.raises(AgentFailure) as exc:
            session.greet()
        assert exc.value.code == "no-token"
        session.close()


def test_the_client_cannot_choose_whom_the_facts_are_about():
    asked = []
    with running_agent(facts=lambda client, port: asked.append((client, port)) or {"sections": {}}) as (_, port):
        c = LineClient(port)
        c.call(op="hello", id=1)
        assert c.call(op="facts", id=2, peer="10.1.2.3", port=7471)["ok"]
        assert asked == [("127.0.0.1", 7471)]
        bad = c.call(op="facts", id=3, port="18515; rm -rf /")
        assert bad["ok"] is False and bad["error"]["code"] == "bad-request"


def test_oversized_request_is_refused_and_others_are_still_served():
    with running_agent() as (_, port):
        big = LineClient(port)
        other = LineClient(port)
        big.send_raw(b'{"v": 1, "op": "hello", "pad": "' + b"x" * (p.MAX_REQUEST + 10))
        answer = big.receive()
        assert answer["ok"] is False and answer["error"]["code"] == "too-large"
        assert big.closed()
        assert other.call(op="hello", id=1)["ok"]
        assert LineClient(port).call(op="hello", id=1)["ok"]


def test_malformed_requests_get_an_error_and_the_connection_goes_on():
    with running_agent() as (_, port):
        c = LineClient(port)
        c.send_raw(b"this is not json\n")
        assert c.receive()["error"]["code"] == "bad-request"
        c.send_raw(b"[1, 2, 3]\n")
        assert c.receive()["error"]["code"] == "bad-request"
        assert c.call(op="hello", id=7)["id"] == 7                     # still served
        c.send_raw(b"\xff\xfe\n")
        assert c.receive()["error"]["code"] == "bad-request"
        assert c.closed()                                              # the third bad request ends it
        assert LineClient(port).call(op="hello", id=1)["ok"]


def test_unknown_ops_and_newer_protocols_are_refused_with_what_is_supported():
    with running_agent() as (_, port):
        c = LineClient(port)
        answer = c.call(op="reboot", id=1, args=["-d", "mlx5_0"])
        assert answer["error"]["code"] == "unknown-op" and "facts" in answer["error"]["message"]
        answer = c.call(op="hello", id=2, v=1)
        assert answer["error"]["code"] == "unsupported-version"
        assert c.call(op="hello", id=3)["ok"]


def test_an_idle_client_is_disconnected():
    with running_agent(idle=0.5) as (_, port):
        c = LineClient(port)
        assert c.closed(timeout=3.0)


def test_fifty_concurrent_clients_are_served_or_refused_cleanly():
    slow = threading.Event()

    def facts(client, port):
        slow.wait(0.2)
        return {"schema": "rdmadoctor-facts/1", "host": {"peer": client}, "sections": {}}

    outcomes = []
    lock = threading.Lock()

    def one(i, port):
        try:
            c = LineClient(port, timeout=30)
            first = c.call(op="hello", id=1)
            if first is None or not first.get("ok"):
                outcome = (first or {}).get("error", {}).get("code", "closed")
            else:
                answer = c.call(op="facts", id=2)
                outcome = "served" if answer and answer.get("ok") else (answer or {}).get("error", {}).get("code")
            c.close()
        except OSError as exc:
            outcome = f"oserror {exc}"
        with lock:
            outcomes.append(outcome)

    with running_agent(facts=facts, max_clients=8) as (agent, port):
        started = time.monotonic()
        threads = [threading.Thread(target=one, args=(i, port)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(not t.is_alive() for t in threads)
        assert time.monotonic() - started < 60
        assert len(outcomes) == 50
        assert set(outcomes) <= {"served", "busy"}, outcomes
        assert outcomes.count("served") >= 8
        # and it keeps working afterwards, with every slot free again
        assert LineClient(port).call(op="hello", id=1)["ok"]
        deadline = time.monotonic() + 5
        while agent.active and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent.active == 0


def test_one_listener_at_a_time_and_released_when_its_client_leaves():
    FakeListener.started.clear()
    with running_agent() as (_, port):
        a, b = LineClient(port), LineClient(port)
        a.call(op="hello", id=1)
        b.call(op="hello", id=1)
        assert a.call(op="listen", id=2)["ok"]
        busy = b.call(op="listen", id=2)
        assert busy["error"]["code"] == "busy"
        a.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            answer = b.call(op="listen", id=3)
            if answer["ok"]:
                break
            time.sleep(0.1)
        assert answer["ok"]
        assert FakeListener.started[0].closed                          # torn down with its connection
        assert b.call(op="result", id=4)["listener"]["state"] == "finished"
        assert FakeListener.started[1].closed


def test_every_request_is_logged_with_who_what_outcome_and_time(caplog):
    caplog.set_level(logging.INFO, logger="rdmadoctor.agent")
    with running_agent(token=TOKEN) as (_, port):
        c = LineClient(port)
        c.call(op="hello", id=1)
        c.call(op="facts", id=2)
        c.send_raw(b"{broken\n")
        c.receive()
    lines = [r.getMessage() for r in caplog.records]
    assert any("op=hello outcome=ok" in line and "client=127.0.0.1:" in line and "seconds=" in line for line in lines)
    assert any("op=facts outcome=refused:auth-required" in line for line in lines)
    assert any("op=? outcome=refused:bad-request" in line for line in lines)


def test_protocol_answers_are_json_lines_with_the_request_id():
    with running_agent() as (_, port):
        c = LineClient(port)
        c.send_raw(b'{"v": 2, "op": "hello", "id": 41}\n{"v": 2, "op": "bye", "id": 42}\n')
        assert c.receive()["id"] == 41
        assert c.receive()["id"] == 42
        assert c.closed()
        assert json.loads(p.encode(p.answer({"id": 3}, x=1)))["ok"] is True


def test_perftest_requests_need_the_opt_in_and_stay_inside_the_allowlist():
    with running_agent() as (_, port):                       # started without --allow-perftest
        c = LineClient(port)
        answer = c.call(op="perftest", id=1, tool="ib_write_bw", options={"qp": 2})
        assert answer["error"]["code"] == "not-allowed" and "--allow-perftest" in answer["error"]["message"]
        assert c.call(op="hello", id=2)["ok"]                # and it keeps serving
    with running_agent(allow_perftest=True) as (_, port):
        c = LineClient(port)
        for tool, options, needle in (("sh", {}, "tool 'sh' is not allowed"),
                                      ("ib_write_bw", {"output": "/etc/passwd"}, "option 'output' is not allowed"),
                                      ("ib_write_bw", {"ib-dev": "rxe0; reboot"}, "not a valid value"),
                                      ("ib_write_bw", ["-d", "rxe0"], "needs 'tool'")):
            answer = c.call(op="perftest", id=3, tool=tool, options=options)
            assert not answer["ok"] and needle in answer["error"]["message"], answer
        answer = c.call(op="perftest-wait", id=4, handle=99, wait=0)
        assert answer["error"]["code"] == "bad-request"      # no server 99 on this connection
