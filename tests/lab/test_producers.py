"""A small subset of the producer recordings re-run live in the Soft-RoCE lab, so that CI keeps proving
that the recordings in fixtures/lab/<pair>/<scenario>/<producer>/ are what the programs really print.

For each run of ``LIVE`` (every program's healthy baseline and one quick fault each) on one pair
(``RDMADOCTOR_LAB_PRODUCERS_PAIR``, default bookworm): record it into artifacts/lab/producers/, check that
both sides' logs contain the run's key lines, and that each side ended as in the recording (exit code,
interrupted at its bound or not); a run that differs goes once more (``LabManager.reproduce``). rdmadoctor's
verdicts are held to the recordings' ``expect`` offline (test_producer_explain.py).
"""
from __future__ import annotations

import json
import os

import pytest

from tests.lab.expectations import lacking
from tests.lab.producers import BY_NAME, run_producer
from tests.lab.vm import REPO

PAIR = os.environ.get("RDMADOCTOR_LAB_PRODUCERS_PAIR", "bookworm")
ARTIFACTS = REPO / "artifacts" / "lab" / "producers"
FIXTURES = REPO / "fixtures" / "lab"

LIVE = [
    "healthy/ibv_rc_pingpong", "wrong-device-name-client/ibv_rc_pingpong",
    "healthy/rping", "server-not-running/rping",
    "healthy/ucmatose", "server-not-running/ucmatose",
    "healthy/ucx_perftest-rc", "wrong-device-name-client/ucx_perftest-rc",
    "healthy/fi_pingpong-msg", "server-not-running/fi_pingpong-msg",
    "healthy/mpirun-ucx", "wrong-device-name-client/mpirun-ucx",
]
CASES = [BY_NAME[name] for name in LIVE if PAIR in BY_NAME[name].run_pairs()]


def unreproduced(run, meta: dict) -> str:
    """What tells the live run from its recording: a key line its logs lack (with that log), or a side that ended
    otherwise (exit code, interrupted at its bound or not); "" when nothing does."""
    logs = meta["_logs"]
    found = lacking(logs, run.lines(PAIR).items())
    if found:
        return "%s log lacks %s:\n%s" % (*found, logs.get(found[0] + ".log", ""))
    recorded = json.loads((FIXTURES / PAIR / run.scenario / run.producer.name / "meta.json").read_text())
    for role in ("server", "client"):
        if recorded[role] is None:
            if meta[role] is not None:
                return "%s ran live, and not in the recording" % role
            continue
        live = (meta[role]["exit_code"], meta[role]["timed_out"])
        then = (recorded[role]["exit_code"], recorded[role]["timed_out"])
        if live != then:
            return "%s ended %s live, %s in the recording:\n%s" % (role, live, then, logs.get(role + ".log", ""))
    return ""


@pytest.mark.lab
@pytest.mark.parametrize("run", CASES, ids=[r.name.replace("/", "-") for r in CASES])
def test_producer_live(lab_manager, run):
    out = ARTIFACTS / PAIR / run.scenario / run.producer.name
    _, lacks = lab_manager.reproduce(
        PAIR, lambda lab: run_producer(lab, run, out, recorder="pytest tests/lab/test_producers.py"), out, run.name,
        lambda meta: unreproduced(run, meta))
    assert not lacks, lacks
