"""Address helpers shared by the agent (which address to serve on) and the probe (which source it uses)."""
from __future__ import annotations

import socket
from typing import Optional

SIOCGIFADDR = 0x8915


def ipv4_of(ifname: str) -> Optional[str]:
    """The IPv4 address of a network interface, or None (no address, no such interface, not Linux)."""
    try:
        import fcntl
        import struct
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", ifname[:15].encode()))
        return socket.inet_ntoa(raw[20:24])
    except (OSError, ImportError):
        return None
