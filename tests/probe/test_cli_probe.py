"""`rdmadoctor serve` and `rdmadoctor check --peer` as commands, on loopback (this host has no RDMA)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.probe.helpers import TOKEN

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rdmadoctor(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], cwd=str(REPO), capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **(env or {})))


@pytest.fixture
def agent(tmp_path):
    token = tmp_path / "token"
    token.write_bytes(TOKEN + b"\n")
    token.chmod(0o600)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rdmadoctor", "serve", "--bind", "127.0.0.1", "--port", str(port),
                             "--token-file", str(token)], cwd=str(REPO), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield port, token
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "listening on 127.0.0.1:%d" % port in err and "stopped" in err


def test_check_peer_climbs_the_ladder_and_brings_the_peers_facts(agent):
    port, token = agent
    started = time.monotonic()
    res = rdmadoctor("check", "--peer", "127.0.0.1", "--agent-port", str(port), "--token-file", str(token),
                     "--sample", "0", "--json")
    assert time.monotonic() - started < 60
    doc = json.loads(res.stdout)
    sections = doc["facts"]["sections"]
    assert sections["peer"]["status"] == "ok" and sections["peer"]["data"]["agent"]["auth"] == "hmac-sha256"
    assert sections["probe"]["data"]["tcp"][0]["state"] == "open"
    peer_rungs = [r for r in doc["rungs"] if r["name"].startswith("peer-")]
    assert [r["name"] for r in peer_rungs] == ["peer-port", "peer-reach", "peer-gid", "peer-cm-resolve",
                                               "peer-cm-connect", "peer-exchange", "peer-bandwidth"]
    assert peer_rungs[0]["state"] == "failed"          # no RDMA device on this host: rung 1, the rest skipped
    assert all(r["state"] == "skipped" for r in peer_rungs[1:])


def test_a_wrong_token_leaves_the_peer_unread(agent, tmp_path):
    port, _ = agent
    wrong = tmp_path / "wrong"
    wrong.write_text("not the token\n")
    wrong.chmod(0o600)
    res = rdmadoctor("check", "--peer", "127.0.0.1", "--agent-port", str(port), "--token-file", str(wrong),
                     "--sample", "0", "--json")
    doc = json.loads(res.stdout)
    peer = doc["facts"]["sections"]["peer"]
    assert peer["status"] == "unavailable" and "token" in peer["reason"]
    assert doc["facts"]["sections"]["probe"]["data"]["agent"]["state"] == "auth-failed"


def test_no_probe_keeps_the_old_check():
    res = rdmadoctor("check", "--peer", "127.0.0.1", "--no-probe", "--sample", "0", "--json")
    doc = json.loads(res.stdout)
    assert "probe" not in doc["facts"]["sections"]
    assert not [r for r in doc["rungs"] if r["name"].startswith("peer-")]


def test_serve_refuses_bad_invocations(tmp_path):
    assert rdmadoctor("serve", "--bind", "not-an-address", timeout=30).returncode == 64
    loose = tmp_path / "token"
    loose.write_text("a token readable by all\n")
    loose.chmod(0o644)
    res = rdmadoctor("serve", "--bind", "127.0.0.1", "--port", str(free_port()), "--token-file", str(loose), timeout=30)
    assert res.returncode == 64 and "chmod 600" in res.stderr
    res = rdmadoctor("check", "--peer", "127.0.0.1", "--token-file", str(loose), timeout=30)
    assert res.returncode == 64


def test_serve_without_an_rdma_address_asks_for_bind():
    res = rdmadoctor("serve", timeout=30)
    assert res.returncode == 64 and "--bind" in res.stderr
