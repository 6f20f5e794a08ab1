"""ClusterShell's ssh worker as the fleet uses it: fan-out, per-node timeouts, the ssh settings, bounded output."""
from __future__ import annotations

import json

from tests.fleet.helpers import FAKESSH, write_plan
from rdmadoctor.fleet import remote
from rdmadoctor.fleet.remote import Shell


def _events(log):
    starts, ends, argv = {}, {}, {}
    for line in log.read_text().splitlines():
        kind, node, rest = line.split(" ", 2)
        if kind == "start":
            starts[node] = float(rest)
        elif kind == "end":
            ends[node] = float(rest)
        elif kind == "argv":
            argv[node] = json.loads(rest)
    return starts, ends, argv


def _most_at_once(starts, ends):
    points = sorted([(t, 1) for t in starts.values()] + [(t, -1) for t in ends.values()], key=lambda p: (p[0], p[1]))
    live = most = 0
    for _, step in points:
        live += step
        most = max(most, live)
    return most


def test_fanout_bounds_the_ssh_processes(tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setenv("FAKESSH_LOG", str(log))
    shell = Shell(fanout=2, timeout=30, ssh_path=FAKESSH, user="lab", ssh_options="-F /dev/null", connect_timeout=7)
    replies = shell.run({f"n{i}": "sleep 0.5; echo done" for i in range(6)})
    assert all(r.rc == 0 and r.stdout == b"done" for r in replies.values())
    starts, ends, argv = _events(log)
    assert _most_at_once(starts, ends) <= 2
    words = argv["n0"]
    assert words[:2] == ["-F", "/dev/null"] and "-l" in words and words[words.index("-l") + 1] == "lab"
    assert "-oConnectTimeout=7" in words and "-oBatchMode=yes" in words and words[-1] == "n0"


def test_each_node_has_its_own_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKESSH_PLAN", str(write_plan(tmp_path, {"*": {"sleep": 20}, "fast": {"stdout": "ok"}})))
    shell = Shell(fanout=1, timeout=2, ssh_path=FAKESSH)
    replies = shell.run({"slow1": "x", "fast": "x", "slow2": "x"})
    assert replies["fast"].rc == 0 and not replies["fast"].timed_out
    for node in ("slow1", "slow2"):
        assert replies[node].timed_out and replies[node].rc is None and replies[node].seconds == 2
    # with one ssh at a time, slow2 still got its full 2 s after slow1 used its own


def test_output_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "MAX_OUTPUT", 1000)
    shell = Shell(fanout=1, timeout=20, ssh_path=FAKESSH)
    reply = shell.run({"big": "yes 0123456789 | head -1000"})["big"]
    assert reply.truncated and len(reply.stdout) <= 1000


def test_clush_conf_gives_defaults_and_the_command_line_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "clush_settings", lambda: {
        "fanout": "7", "connect_timeout": "3", "command_timeout": "0", "ssh_user": "admin",
        "ssh_options": "-oStrictHostKeyChecking=no"})
    shell = remote.shell_from(user="root")
    assert shell.fanout == 7 and shell.connect_timeout == 3.0 and shell.timeout == 60.0   # 0: no limit, not used
    assert shell.user == "root" and shell.ssh_options == "-oStrictHostKeyChecking=no"
    assert shell.settings == {"fanout": "clush.conf", "connect_timeout": "clush.conf", "user": "command line",
                              "ssh_options": "clush.conf"}


def test_clush_conf_is_read_where_clustershell_looks(tmp_path, monkeypatch):
    (tmp_path / "clush.conf").write_text("[Main]\nfanout: 5\nssh_path: /usr/bin/ssh\n")
    monkeypatch.setenv("CLUSTERSHELL_CFGDIR", str(tmp_path))
    settings = remote.clush_settings()
    assert settings.get("fanout") == "5" and settings.get("ssh_path") == "/usr/bin/ssh"
