"""The agent's wire format, its HMAC handshake and token files, without a network."""
from __future__ import annotations

import os
import socket

import pytest

from rdmadoctor.probe import protocol as p
from rdmadoctor.agent.server import default_bind


@pytest.mark.parametrize("line,code", [
    (b"not json", "bad-request"),
    (b"[]", "bad-request"),
    (b'{"op": "hello"}', "bad-request"),                     # no version
    (b'{"v": "1", "op": "hello"}', "bad-request"),
    (b'{"v": true, "op": "hello"}', "bad-request"),
    (b'{"v": 1, "op": "hello"}', "unsupported-version"),     # protocol 1: no session MACs
    (b'{"v": 3, "op": "hello"}', "unsupported-version"),
    (b'{"v": 2}', "bad-request"),                            # no op
    (b'{"v": 2, "op": "hello", "id": "x"}', "bad-request"),
    (b"\xff", "bad-request"),
])
def test_bad_requests_are_named(line, code):
    with pytest.raises(p.ProtocolError) as exc:
        p.decode_request(line)
    assert exc.value.code == code


def test_a_good_request_and_its_answers():
    req = p.decode_request(b'{"v": 2, "id": 5, "op": "facts", "port": 18515}')
    assert req["op"] == "facts"
    assert p.answer(req, x=1) == {"v": 2, "id": 5, "ok": True, "x": 1}
    assert p.error(req, "busy", "later")["error"] == {"code": "busy", "message": "later"}
    assert p.encode({"a": 1}).endswith(b"\n")
    assert p.int_field(req, "port", 1, 1, 65535) == 18515
    with pytest.raises(p.ProtocolError):
        p.int_field({"port": 0}, "port", 1, 1, 65535)
    with pytest.raises(p.ProtocolError):
        p.number_field({"wait": 1e9}, "wait", 1, 0, 30)


def test_line_reader_bounds_and_splits():
    a, b = socket.socketpair()
    try:
        reader = p.LineReader(a, 32)
        b.sendall(b'{"v":1}\n{"v":2}\n')
        assert reader.readline(1.0) == b'{"v":1}'
        assert reader.readline(1.0) == b'{"v":2}'
        with pytest.raises(socket.timeout):
            reader.readline(0.2)
        b.sendall(b"x" * 40)
        with pytest.raises(p.TooLarge):
            reader.readline(1.0)
    finally:
        a.close()
        b.close()
    a, b = socket.socketpair()
    reader = p.LineReader(a, 32)
    b.close()
    assert reader.readline(1.0) is None
    a.close()


def test_macs_depend_on_role_token_challenge_and_nonce():
    mac = p.client_mac(b"token-1234", "c" * 32, "n" * 32)
    assert mac == p.client_mac(b"token-1234", "c" * 32, "n" * 32)
    others = {p.agent_mac(b"token-1234", "c" * 32, "n" * 32), p.client_mac(b"token-1235", "c" * 32, "n" * 32),
              p.client_mac(b"token-1234", "d" * 32, "n" * 32), p.client_mac(b"token-1234", "c" * 32, "m" * 32)}
    assert mac not in others and len(others) == 4
    assert p.same(mac, mac) and not p.same(mac, mac[:-1] + "0") and not p.same(mac, "")


def test_token_files(tmp_path):
    good = tmp_path / "token"
    good.write_text("s3cret-token\nignored\n")
    os.chmod(good, 0o600)
    assert p.read_token(str(good), {}) == (b"s3cret-token", f"file {good}")
    os.chmod(good, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        p.read_token(str(good), {})
    short = tmp_path / "short"
    short.write_text("abc\n")
    os.chmod(short, 0o600)
    with pytest.raises(ValueError, match="shorter"):
        p.read_token(str(short), {})
    with pytest.raises(ValueError, match="cannot read"):
        p.read_token(str(tmp_path / "missing"), {})
    assert p.read_token(None, {p.TOKEN_ENV: "from-the-env"}) == (b"from-the-env", f"${p.TOKEN_ENV}")
    assert p.read_token(None, {}) == (None, "none")


def _tree(root, gids):
    for dev, port, idx, gid in gids:
        d = root / "sys/class/infiniband" / dev / "ports" / str(port) / "gids"
        d.mkdir(parents=True, exist_ok=True)
        (d / str(idx)).write_text(gid + "\n")


def test_default_bind_is_the_only_rdma_address(tmp_path):
    _tree(tmp_path, [("rxe0", 1, 0, "fe80:0000:0000:0000:5054:00ff:fe00:0101"),
                     ("rxe0", 1, 1, "0000:0000:0000:0000:0000:ffff:c000:0201")])
    assert default_bind(str(tmp_path)) == ("192.0.2.1", ["192.0.2.1"])
    _tree(tmp_path, [("mlx5_0", 1, 3, "0000:0000:0000:0000:0000:ffff:0a00:0005")])
    assert default_bind(str(tmp_path)) == (None, ["10.0.0.5", "192.0.2.1"])     # several: the user chooses
    assert default_bind(str(tmp_path / "nothing")) == (None, [])


def test_a_peer_that_does_not_answer_costs_no_validators(monkeypatch):
    """Building the answer validators takes seconds of a slow guest's CPU, which the verbs child needs to
    start; a dead or filtered agent's port is no reason to build them (its verdict must come within 10 s)."""
    from rdmadoctor.probe import agent_client, reach

    built = []
    monkeypatch.setattr(agent_client, "_build_validators", lambda: built.append(True))
    monkeypatch.setattr(reach, "tcp_connect", lambda *a, **k: (None, {"state": "timeout"}))
    session, outcome = agent_client.connect("127.0.0.1", 9, 1.0)
    assert session is None and outcome["state"] == "timeout"
    assert built == []


@pytest.mark.parametrize("slow", [False, True])
def test_a_session_starts_once_the_validators_are_built_on_a_fresh_connection(monkeypatch, slow):
    """The validators are built after what the caller waits for (the probe's verbs child starting) and before
    the session starts; the agent closes a connection that has not authenticated within 10 s, so one that
    waited too long is made again."""
    from rdmadoctor.probe import agent_client, reach

    built, sockets = [], []

    def tcp_connect(host, port, timeout, source=None, keep=False):
        ours, theirs = socket.socketpair()
        sockets.append((ours, theirs))
        return ours, {"state": "open", "port": port}

    monkeypatch.setattr(agent_client, "_build_validators", lambda: built.append(True))
    monkeypatch.setattr(reach, "tcp_connect", tcp_connect)
    if slow:
        monkeypatch.setattr(agent_client, "FRESH_CONNECTION", -1.0)
    try:
        session, outcome = agent_client.connect("127.0.0.1", 9, 1.0, before_validators=lambda: built.append("child"))
        assert built == ["child", True] and outcome["state"] == "open"
        assert len(sockets) == (2 if slow else 1)
        assert session.sock is sockets[-1][0]
        if slow:
            assert sockets[0][0].fileno() == -1          # the stale connection is closed
    finally:
        for pair in sockets:
            for s in pair:
                s.close()
