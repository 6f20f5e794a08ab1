"""The lab's hub (three or more VMs on one L2 segment), exercised on the host with UDP sockets (no VM)."""
from __future__ import annotations

import socket
import threading

from tests.lab import hub
from tests.lab.vm import free_udp_port, host_address, host_mac


def frame(dst: str, src: str, payload: bytes = b"x" * 50) -> bytes:
    return bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) + b"\x08\x00" + payload


def test_hub_floods_then_switches():
    vms = []
    for _ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(0.3)
        vms.append(s)
    listen = free_udp_port()
    ports = [s.getsockname()[1] for s in vms]
    thread = threading.Thread(target=hub.serve, args=(listen, ports, 3), daemon=True)
    thread.start()
    import time
    time.sleep(0.3)
    h1, h2, h3 = (host_mac("h%d" % i) for i in (1, 2, 3))

    def received(s):
        try:
            return s.recv(65536)
        except socket.timeout:
            return None

    broadcast = frame("ff:ff:ff:ff:ff:ff", h1)        # ARP-like: everyone but the sender
    vms[0].sendto(broadcast, ("127.0.0.1", listen))
    assert received(vms[1]) == broadcast and received(vms[2]) == broadcast and received(vms[0]) is None
    reply = frame(h1, h3)                              # h1 was learned: only its port
    vms[2].sendto(reply, ("127.0.0.1", listen))
    assert received(vms[0]) == reply and received(vms[1]) is None
    unknown = frame(h2, h1)                            # h2 not learned yet: flooded
    vms[0].sendto(unknown, ("127.0.0.1", listen))
    assert received(vms[1]) == unknown and received(vms[2]) == unknown
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_addresses_of_n_hosts():
    assert [host_address("h%d" % i) for i in (1, 2, 3)] == ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
    assert host_mac("h3") == "52:54:00:c0:02:03"
