"""Address helpers shared by the agent (which address to serve on), the probe (which source it uses) and the readers
of netlink's tables (whether two written addresses are one)."""
from __future__ import annotations

import ipaddress
from typing import Optional

SIOCGIFADDR = 0x8915


def ipv4_of(ifname: str) -> Optional[str]:
    """The IPv4 address of a network interface, or None (no address, no such interface, not Linux)."""
    try:
        import fcntl
        import socket       # (here: same_address, all explain needs of this module, does without it)
        import struct
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", ifname[:15].encode()))
        return socket.inet_ntoa(raw[20:24])
    except (OSError, ImportError):
        return None


def same_address(a: str, b: str) -> bool:
    """Whether two written addresses are one ("::ffff:192.0.2.1" and "192.0.2.1" are not; "fe80::1" and "fe80:0::1"
    are); text that is no address is compared as text."""
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b
