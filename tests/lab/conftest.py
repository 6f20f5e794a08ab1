"""pytest wiring for the Soft-RoCE lab.

The lab tests (marked ``lab``) boot two QEMU VMs once per session and serve every scenario of every
pair from them, replacing only the host whose release changes between pairs (bookworm -> mixed ->
trixie). Choose pairs with ``RDMADOCTOR_LAB_PAIRS=bookworm,mixed`` (default: all three) and
scenarios with ``-k``, e.g. ``pytest tests/lab -k qp-mismatch-client-10``.

They are never skipped: without qemu-system-x86_64 or debootstrap they fail and say what to install.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.lab.scenarios import PAIRS  # noqa: E402

REQUIRED_TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "debootstrap": "debootstrap", "mkfs.ext4": "e2fsprogs"}


class LabManager:
    """One Lab for the whole session, switched between pairs by replacing hosts."""

    def __init__(self):
        self.lab = None

    def get(self, pair: str):
        from tests.lab.vm import Lab
        h1, h2 = PAIRS[pair]
        if self.lab is None:
            lab = Lab(h1, h2)
            lab.start()
            self.lab = lab
        else:
            self.lab.ensure(h1, h2)
        return self.lab

    def close(self):
        if self.lab is not None:
            self.lab.close()
            self.lab = None


@pytest.fixture(scope="session")
def lab_manager():
    missing = [tool for tool in REQUIRED_TOOLS if not shutil.which(tool)]
    if missing:
        pytest.fail("the Soft-RoCE lab needs %s; install with: apt-get install -y %s" % (
            ", ".join(missing), " ".join(sorted({REQUIRED_TOOLS[t] for t in missing}))), pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("the Soft-RoCE lab needs root (debootstrap builds the guest image)", pytrace=False)
    manager = LabManager()
    try:
        yield manager
    finally:
        manager.close()
