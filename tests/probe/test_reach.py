"""TCP outcomes told apart (refused, rejected, filtered, unreachable), and the ARP table.

Refused and open are tried on this host's loopback. Reject and drop need a packet filter: those run in a
private network namespace (unshare -n, root and nft needed) whose only interface is its own loopback."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rdmadoctor.probe import reach

REPO = Path(__file__).resolve().parents[2]


def test_refused_is_a_reset_and_fast():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                     # bound, not listening: the kernel answers with a RST
        _, out = reach.tcp_connect("127.0.0.1", port, 3.0)
    assert out["state"] == "refused" and out["seconds"] < 1.0 and "icmp" not in out


def test_open_keeps_the_socket_when_asked():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        sock, out = reach.tcp_connect("127.0.0.1", s.getsockname()[1], 3.0, keep=True)
        assert out["state"] == "open" and sock is not None
        sock.close()


def test_not_an_address():
    assert reach.tcp_connect("peer.example", 1, 1.0)[1]["state"] == "error"


def test_arp_table(tmp_path):
    table = tmp_path / "arp"
    table.write_text("IP address       HW type     Flags       HW address            Mask     Device\n"
                     "192.0.2.1        0x1         0x2         52:54:00:c0:02:01     *        eth0\n"
                     "192.0.2.3        0x1         0x0         00:00:00:00:00:00     *        eth0\n")
    assert reach.arp_entry("192.0.2.1", str(table)) == {"known": True, "mac": "52:54:00:c0:02:01", "device": "eth0",
                                                         "flags": "0x2"}
    assert reach.arp_entry("192.0.2.3", str(table))["known"] is False
    assert reach.arp_entry("192.0.2.9", str(table)) == {"known": False, "mac": None}
    assert reach.arp_entry("192.0.2.1", str(tmp_path / "none"))["known"] is None


NETNS_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from rdmadoctor.probe.reach import tcp_connect
out = {}
for port in (2, 3, 4, 5):
    out[port] = tcp_connect("127.0.0.1", port, 1.5)[1]
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("unshare"),
                    reason="needs root, nft and unshare for a private network namespace")
def test_filters_in_a_private_namespace():
    rules = ("nft add table inet f && "
             "nft add chain inet f input '{ type filter hook input priority 0; policy accept; }' && "
             "nft add rule inet f input tcp dport 2 reject && "
             "nft add rule inet f input tcp dport 3 drop && "
             "nft add rule inet f input tcp dport 4 reject with icmpx admin-prohibited")
    proc = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && {rules} && "
                           f"{sys.executable} -c \"$0\" {REPO}", NETNS_SCRIPT],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
        pytest.skip("no permission for network namespaces here: " + proc.stderr.strip()[-200:])
    assert proc.returncode == 0, proc.stderr
    out = {int(k): v for k, v in json.loads(proc.stdout).items()}
    assert out[2]["state"] == "rejected" and out[2]["icmp"]["name"] == "port unreachable"
    assert out[2]["icmp"]["from"] == "127.0.0.1" and out[2]["seconds"] < 1.0
    assert out[3]["state"] == "timeout" and out[3]["seconds"] >= 1.4
    assert out[4]["state"] == "rejected" and out[4]["icmp"]["code"] == 13
    assert out[5]["state"] == "refused" and out[5]["seconds"] < 1.0       # no rule: a plain closed port
