"""Three hosts on one wire (the hub): one boot, ping between all of them, ib_write_bw between h1 and h3,
ssh between two guests over the wire and from this machine to a guest through the control channel.

It closes the session's two-host lab first, so that no more than three VMs run at once.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.lab.vm import Lab

RELEASE = os.environ.get("RDMADOCTOR_LAB_WIRE_RELEASE", "bookworm")


def _until_listening(vm, port: int, timeout: float = 60) -> None:
    """perftest's server prints its banner before it listens, and its client tries to connect once: under TCG the
    client can find the port still closed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not vm.run("ss -Hltn 'sport = :%d'" % port, timeout=20).stdout.strip():
        time.sleep(0.5)


@pytest.mark.lab
def test_three_hosts_on_one_wire(lab_manager):
    lab_manager.close()
    with Lab(RELEASE, RELEASE, RELEASE) as lab:
        assert lab.wire == "hub" and lab.names == ["h1", "h2", "h3"]
        assert lab.h1.address == "192.0.2.1" and lab.hosts["h3"].address == "192.0.2.3"
        for src, dst in (("h1", "h3"), ("h3", "h2"), ("h2", "h1")):
            ping = lab.hosts[src].run("ping -c 2 -W 3 %s" % lab.hosts[dst].address, timeout=20)
            assert ping.ok, ping.output
        gids = lab.every(lambda vm: vm.sh("cat /sys/class/infiniband/rxe0/ports/1/gids/1"))
        assert gids["h3"].strip().endswith("ffff:c000:0203")

        server = lab.h1.spawn("ib_write_bw -d rxe0 -n 200", pty=True)
        _until_listening(lab.h1, 18515)
        client = lab.hosts["h3"].run("ib_write_bw -d rxe0 -n 200 192.0.2.1", timeout=60, pty=True)
        served = lab.h1.wait(server, timeout=15)
        assert client.ok and served.ok, client.output + served.output
        assert "65536      200" in client.output and "65536      200" in served.output

        # guest to guest over the wire (what mpirun does), as root and as lab
        for user in (None, "lab"):
            hop = lab.hosts["h3"].run("ssh 192.0.2.2 hostname", timeout=60, user=user)
            assert hop.ok and hop.stdout.strip() == "h2", hop.output
        # this machine to a guest: a loopback port relayed over the control channel to the guest's sshd
        proc = subprocess.run(lab.ssh_command("h2") + ["hostname"], capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0 and proc.stdout.strip() == "h2", proc.stderr
