"""The lab's Ethernet hub for three or more VMs: one UDP socket on 127.0.0.1, run by ``Lab`` as a process.

    python -m tests.lab.hub --listen HUB_PORT --port VM1_PORT --port VM2_PORT --port VM3_PORT

Every VM's NIC is ``-netdev socket,udp=127.0.0.1:HUB_PORT,localaddr=127.0.0.1:VMi_PORT``: QEMU sends each
Ethernet frame as one datagram to the hub and takes any datagram arriving on its own port as a frame. The
hub learns which port each source MAC sits behind and forwards like a switch: unicast to the learned
port, broadcast, multicast and unknown destinations to every other VM. Datagrams from anywhere but
127.0.0.1 and the lab's VM ports are dropped. A hub is a single process: the VMs share one L2 segment
without multicast sockets, bridges or TAP devices, and nothing leaves the loopback interface.

The two-host lab does not use it (a direct UDP pair is cheaper under TCG); ``Lab(wire="hub")`` does.
"""
from __future__ import annotations

import argparse
import socket
import sys
from typing import Dict, List, Optional

MAX_FRAME = 65536


def serve(listen: int, ports: List[int], stop_after: Optional[int] = None) -> None:
    """Forwards frames between the VM ports (``stop_after`` frames, for tests; None = until killed)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    sock.bind(("127.0.0.1", listen))
    print("hub: ready on 127.0.0.1:%d for %s" % (listen, ",".join(map(str, ports))), flush=True)
    members = set(ports)
    where: Dict[bytes, int] = {}
    count = 0
    while stop_after is None or count < stop_after:
        frame, (address, port) = sock.recvfrom(MAX_FRAME)
        if address != "127.0.0.1" or port not in members or len(frame) < 14:
            continue
        count += 1
        destination, source = frame[:6], frame[6:12]
        if not source[0] & 1:
            where[source] = port
        target = None if destination[0] & 1 else where.get(destination)
        for out in ([target] if target is not None else members):
            if out != port:
                try:
                    sock.sendto(frame, ("127.0.0.1", out))
                except OSError:  # a VM that is being replaced has no socket on its port for a moment
                    pass


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", type=int, required=True, help="the hub's UDP port on 127.0.0.1")
    parser.add_argument("--port", type=int, action="append", required=True, help="a VM's UDP port (repeat)")
    args = parser.parse_args(argv)
    serve(args.listen, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
