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
import warnings
from pathlib import Path
from typing import Callable, Optional, Tuple, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.lab.scenarios import PAIRS  # noqa: E402

T = TypeVar("T")

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

    def run(self, pair: str, fn: "Callable[[object], T]", record: Optional[Path] = None) -> T:
        """``fn(lab)`` on the pair. When a guest is gone in the middle (a kernel panic, QEMU exiting),
        that says nothing of what fn tests: the gone guest's console goes to ``record/guest-gone.txt``
        and into a warning, a fresh guest boots in its place and fn runs once more. A guest gone twice
        fails the test."""
        from tests.lab.vm import GuestGone
        if record is not None:
            (Path(record) / "guest-gone.txt").unlink(missing_ok=True)
        lab = self.get(pair)
        try:
            return fn(lab)
        except GuestGone as gone:
            if record is not None:
                Path(record).mkdir(parents=True, exist_ok=True)
                (Path(record) / "guest-gone.txt").write_text(str(gone) + "\n")
            warnings.warn("%s: ran again on a fresh guest after this one was gone: %s" % (pair, gone),
                          stacklevel=2)
            lab = self.get(pair)
            return fn(lab)

    def reproduce(self, pair: str, fn: "Callable[[object], dict]", record: Path, label: str,
                  lacking: "Callable[[dict], str]") -> Tuple[dict, str]:
        """``run(pair, fn, record)`` for a recording whose logs must show the lab reproduced what it stages:
        ``lacking(meta)`` says what they lack ("" when nothing). The TCG wire and a guest booted a moment before
        can fail a run now and then (a healthy pair's client gone mid-run, the server's last read failing), which
        says nothing of rdmadoctor: such a run goes once more, its account kept as ``<record>.first-attempt.txt``
        and named in a warning. Returns the run kept and what it lacks, for the caller to assert on."""
        first_attempt = record.parent / (record.name + ".first-attempt.txt")
        first_attempt.unlink(missing_ok=True)
        meta = self.run(pair, fn, record)
        lacks = lacking(meta)
        if not lacks:
            return meta, lacks
        first_attempt.parent.mkdir(parents=True, exist_ok=True)
        first_attempt.write_text(lacks + "\n")
        warnings.warn("%s: ran again after the lab did not reproduce it: %s" % (label, lacks[:2000]), stacklevel=2)
        meta = self.run(pair, fn, record)
        return meta, lacking(meta)

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
