"""knowledge/perftest.py: the bench allowlist, what a real result row is, and what a test pins."""
from __future__ import annotations

import pytest

from rdmadoctor.knowledge import perftest
from rdmadoctor.knowledge.perftest import PlanError, is_real_row, pin_bytes, validate


def test_validate_accepts_allowed_options_and_normalises_flags():
    spec = validate("ib_write_bw", {"qp": 4, "size": "65536", "bidirectional": "true"})
    assert spec.options == (("bidirectional", True), ("qp", "4"), ("size", "65536"))
    assert spec.argv("192.0.2.1", 20000) == ["ib_write_bw", "--bidirectional", "--qp=4", "--size=65536",
                                             "--port=20000", "192.0.2.1"]
    assert spec.label == "ib_write_bw qp=4 size=65536"


@pytest.mark.parametrize("tool, options, refused", [
    ("raw_ethernet_bw", {}, "tool 'raw_ethernet_bw' is not allowed"),
    ("ib_write_bw; rm -rf /", {}, "is not allowed"),
    ("ib_write_bw", {"port": 1}, "option 'port' is not allowed"),
    ("ib_write_bw", {"output": "/etc/passwd"}, "option 'output' is not allowed"),
    ("ib_write_bw", {"qp": "4; reboot"}, "option 'qp': '4; reboot' is not a whole number in ASCII digits"),
    ("ib_write_bw", {"connection": "XX"}, "is not a valid value"),
    ("ib_write_bw", {"all": "yes"}, "is a flag and takes no value"),
    ("ib_write_bw", {"qp": 0}, "option 'qp': 0 is not from 1 to 16384"),
    ("ib_write_bw", {"qp": 20000}, "option 'qp': 20000 is not from 1 to 16384"),
    ("ib_write_bw", {"size": 0}, "option 'size': 0 is not from 1 to 2147483648"),
    ("ib_write_lat", {"qp": 2}, "latency tests run one QP"),
    ("ib_write_bw", {"duration": 5, "iters": 100}, "exclude each other"),
])
def test_validate_refuses(tool, options, refused):
    with pytest.raises(PlanError) as info:
        validate(tool, options)
    assert refused in str(info.value)


@pytest.mark.parametrize("size, iterations, real", [
    (65536, 5000, True), (2, 0, True),
    (0, 5000, False),                             # no size
    (1 << 32, 5000, False), (65536, 1 << 32, False),   # 8 bytes of a key record read as numbers
    (True, 5000, False), (65536, None, False), ("65536", 5000, False),
])
def test_is_real_row(size, iterations, real):
    assert is_real_row(size, iterations) is real


def test_pin_bytes():
    assert pin_bytes() == 65536 * 2 == perftest.DEFAULT_PIN        # default size, both halves, one QP
    assert pin_bytes(2, 1) == 4096 * 2                              # at least one page per half
    assert pin_bytes(1 << 20, 4) == (1 << 20) * 2 * 4
    assert pin_bytes(65536, 0) == pin_bytes(65536, 1)
    assert perftest.ALL_SIZES_PIN == 8 * 1024 * 1024 * 2           # -a goes up to 8 MiB


def test_expected_seconds():
    assert perftest.expected_seconds(validate("ib_write_bw", {"duration": 10})) == 15.0
    assert perftest.expected_seconds(validate("ib_write_bw", {})) > perftest.expected_seconds(
        validate("ib_read_bw", {}))                                  # write_bw runs 5000 iterations, others 1000
