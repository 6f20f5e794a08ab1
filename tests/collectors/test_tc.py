"""collectors/tc.py on qdisc dumps built as net/sched/sch_netem.c netem_dump() and linux/rtnetlink.h lay them out."""
from __future__ import annotations

import struct

from rdmadoctor.collectors import tc

FULL = 0xFFFFFFFF      # netem's probabilities are fractions of 2^32 - 1


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _netem_options(loss=0.0, duplicate=0.0, corrupt=0.0, reorder=0.0, delay_ns=0, jitter_ns=0, rate=0) -> bytes:
    qopt = struct.pack("=6I", min(delay_ns >> 6, FULL), 1000, int(loss * FULL), 0, int(duplicate * FULL),
                       min(jitter_ns >> 6, FULL))
    return (qopt + _attr(tc.TCA_NETEM_REORDER, struct.pack("=II", int(reorder * FULL), 0))
            + _attr(tc.TCA_NETEM_CORRUPT, struct.pack("=II", int(corrupt * FULL), 0))
            + _attr(tc.TCA_NETEM_RATE, struct.pack("=IiIi", rate, 0, 0, 0))
            + _attr(tc.TCA_NETEM_LATENCY64, struct.pack("=q", delay_ns))
            + _attr(tc.TCA_NETEM_JITTER64, struct.pack("=q", jitter_ns)))


def _qdisc(kind: str, parent: int = tc.TC_H_ROOT, options: bytes = b"", ifindex: int = 2) -> bytes:
    head = struct.pack("=BBHiIII", 0, 0, 0, ifindex, 0x80010000, parent, 1)
    return head + _attr(tc.TCA_KIND, kind.encode() + b"\0") + (_attr(tc.TCA_OPTIONS, options) if options else b"")


def test_a_root_netem_with_every_effect_is_read():
    payload = _qdisc("netem", options=_netem_options(loss=0.05, duplicate=0.02, corrupt=0.01, reorder=0.25,
                                                     delay_ns=300_000_000, jitter_ns=10_000_000, rate=125_000))
    q = tc.qdisc(payload, {2: "eth0"})
    assert q is not None and q["ifname"] == "eth0" and q["kind"] == "netem" and q["root"] and q["handle"] == "8001:"
    effects = q["netem"]
    assert (effects["loss_pct"], effects["duplicate_pct"], effects["corrupt_pct"], effects["reorder_pct"]) == \
        (5.0, 2.0, 1.0, 25.0)
    assert (effects["delay_ms"], effects["jitter_ms"], effects["rate_bytes_per_s"]) == (300.0, 10.0, 125_000)
    assert effects["loss_model"] is False


def test_a_kernel_without_the_64_bit_delay_gives_it_in_ticks():
    options = struct.pack("=6I", 300_000_000 >> 6, 1000, 0, 0, 0, 0)
    assert tc.netem(options)["delay_ms"] == round((300_000_000 >> 6 << 6) / 1e6, 3)


def test_only_root_and_shaping_qdiscs_are_kept_and_bad_bytes_end_quietly():
    assert tc.qdisc(_qdisc("fq_codel", parent=0x00010001), {2: "eth0"}) is None      # a child of mq
    assert tc.qdisc(_qdisc("pfifo_fast"), {2: "eth0"})["kind"] == "pfifo_fast"
    assert tc.qdisc(_qdisc("netem", parent=0x00010001, options=_netem_options(loss=0.5)), {})["root"] is False
    assert tc.qdisc(b"\0" * 7, {}) is None
    truncated = _qdisc("netem", options=_netem_options(loss=0.05))[:-9]
    q = tc.qdisc(truncated, {2: "eth0"})
    assert q is not None and q["kind"] == "netem" and "netem" not in q     # its options were cut: not read
    assert tc.netem(b"\1\2") == {}
