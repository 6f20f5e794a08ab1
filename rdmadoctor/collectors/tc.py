"""Queueing disciplines (RTM_GETQDISC answers) decoded as linux/rtnetlink.h and linux/pkt_sched.h lay them out.

A netem qdisc (`tc qdisc add dev eth0 root netem loss 5%`) drops, corrupts, duplicates, reorders, delays or
rate-limits every packet its netdev sends: Soft-RoCE's RoCEv2 packets (rxe transmits through the netdev) and every
TCP side channel. pyroute2's tcmsg would decode these too, but importing it imports every scheduler, classifier and
action it knows; the few fields read here are fixed structures.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, Optional, Tuple

TCMSG = struct.Struct("=BBHiIII")        # family, pad, pad, ifindex, handle, parent, info (a request's body too)
_RTATTR = struct.Struct("=HH")           # length, type
_NETEM_QOPT = struct.Struct("=6I")       # latency (ticks), limit, loss, gap, duplicate, jitter (ticks)
NLA_TYPE_MASK = 0x3FFF
TC_H_ROOT = 0xFFFFFFFF
TCA_KIND, TCA_OPTIONS = 1, 2
# linux/pkt_sched.h: the attributes netem_dump() nests after struct tc_netem_qopt
TCA_NETEM_REORDER, TCA_NETEM_CORRUPT, TCA_NETEM_LOSS, TCA_NETEM_RATE = 3, 4, 5, 6
TCA_NETEM_RATE64, TCA_NETEM_LATENCY64, TCA_NETEM_JITTER64 = 8, 10, 11
PSCHED_SHIFT = 6                         # a psched tick is 64 ns (PSCHED_NS2TICKS)
# the kinds kept from a dump: the root qdisc of each netdev, and the ones that shape traffic wherever they sit
SHAPING = ("netem", "tbf")


def attributes(buf: bytes, start: int = 0) -> Iterator[Tuple[int, bytes]]:
    """(type, payload) of each rtattr from `start` on; a truncated or malformed one ends the walk."""
    offset = start
    while offset + _RTATTR.size <= len(buf):
        length, kind = _RTATTR.unpack_from(buf, offset)
        if length < _RTATTR.size or offset + length > len(buf):
            return
        yield kind & NLA_TYPE_MASK, buf[offset + _RTATTR.size:offset + length]
        offset += (length + 3) & ~3


def qdisc(payload: bytes, names: Dict[int, str]) -> Optional[Dict[str, Any]]:
    """One RTM_NEWQDISC payload (struct tcmsg and its attributes) as the facts keep it; None when it is too short
    or is neither a netdev's root qdisc nor one that shapes traffic (SHAPING)."""
    if len(payload) < TCMSG.size:
        return None
    _, _, _, ifindex, handle, parent, _ = TCMSG.unpack_from(payload)
    attrs = dict(attributes(payload, TCMSG.size))
    kind = attrs.get(TCA_KIND, b"").split(b"\0", 1)[0].decode("ascii", "replace")
    root = parent == TC_H_ROOT
    if not root and kind not in SHAPING:
        return None
    out: Dict[str, Any] = {"ifname": names.get(ifindex), "index": ifindex, "kind": kind, "root": root,
                           "handle": f"{handle >> 16:x}:"}
    if kind == "netem" and TCA_OPTIONS in attrs:
        out["netem"] = netem(attrs[TCA_OPTIONS])
    return out


def _percent(probability: int) -> float:
    """netem's probabilities are fractions of 2^32 - 1 (tc's percentages)."""
    return round(probability * 100.0 / 0xFFFFFFFF, 4)


def _u32(attrs: Dict[int, bytes], kind: int) -> int:
    value = attrs.get(kind, b"")
    return struct.unpack_from("=I", value)[0] if len(value) >= 4 else 0


def _s64(attrs: Dict[int, bytes], kind: int) -> Optional[int]:
    value = attrs.get(kind, b"")
    return struct.unpack_from("=q", value)[0] if len(value) >= 8 else None


def netem(options: bytes) -> Dict[str, Any]:
    """What a netem qdisc does to each packet (netem_dump() in net/sched/sch_netem.c): percentages of packets lost,
    corrupted, duplicated and reordered, the delay and jitter in milliseconds, the rate in bytes a second (None
    when unlimited); `loss_model`: a Gilbert-Elliott or 4-state loss model stands in for the plain percentage."""
    if len(options) < _NETEM_QOPT.size:
        return {}
    latency, limit, loss, _gap, duplicate, jitter = _NETEM_QOPT.unpack_from(options)
    nested = dict(attributes(options, _NETEM_QOPT.size))
    # the 64-bit nanoseconds (kernels from 4.15); the 32-bit tick fields saturate at about 275 s
    delay_ns = _s64(nested, TCA_NETEM_LATENCY64)
    jitter_ns = _s64(nested, TCA_NETEM_JITTER64)
    rate = struct.unpack_from("=Q", nested[TCA_NETEM_RATE64])[0] if len(nested.get(TCA_NETEM_RATE64, b"")) >= 8 \
        else _u32(nested, TCA_NETEM_RATE)
    return {
        "loss_pct": _percent(loss),
        "loss_model": TCA_NETEM_LOSS in nested,
        "corrupt_pct": _percent(_u32(nested, TCA_NETEM_CORRUPT)),
        "duplicate_pct": _percent(duplicate),
        "reorder_pct": _percent(_u32(nested, TCA_NETEM_REORDER)),
        "delay_ms": round((delay_ns if delay_ns is not None else latency << PSCHED_SHIFT) / 1e6, 3),
        "jitter_ms": round((jitter_ns if jitter_ns is not None else jitter << PSCHED_SHIFT) / 1e6, 3),
        "rate_bytes_per_s": rate or None,
        "limit": limit,
    }
