"""Runs every scenario of the fault matrix live in the Soft-RoCE lab and checks rdmadoctor's verdict.

For each (pair, scenario):
1. record it (``runner.run_scenario``) into ``artifacts/lab/<pair>/<scenario>/``;
2. check that the lab reproduced the fault: the scenario's ``server_lines`` / ``client_lines`` (a scenario the
   lab did not reproduce runs once more: ``LabManager.reproduce``);
3. run ``python -m rdmadoctor explain --json <server.log> <client.log>`` on the host and compare
   ``verdict.cause`` with ``expect_explain`` (healthy scenarios: no failure diagnosed). A scenario
   without an expectation is only recorded.

4. for a scenario with a host-side fault (``expect_check``), check the verdict of ``rdmadoctor check`` run
   inside the faulty host while the fault was in place.

``RDMADOCTOR_LAB_PAIRS=bookworm,mixed`` picks pairs (default all three); ``RDMADOCTOR_LAB_CHECK_PAIRS``
the pairs where step 4 runs (default bookworm and trixie); ``RDMADOCTOR_LAB_FACTS=1`` runs the ``check`` hook for
every scenario of every pair, with or without an expectation.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.lab.expectations import assert_check_verdict, assert_explain_verdict, lacking
from tests.lab.runner import run_scenario
from tests.lab.scenarios import for_pair, pairs_from_env
from tests.lab.vm import REPO

ARTIFACTS = REPO / "artifacts" / "lab"
EXPLAIN_TIMEOUT = 120

CASES = [(pair, sc) for pair in pairs_from_env() for sc in for_pair(pair)]
# check runs inside the faulty TCG guest in about 10 s (12 scenarios a pair), on the faulty host's own facts: on
# the bookworm and trixie pairs by default, since the mixed pair's faulty hosts are a bookworm or a trixie guest
# with the same fault (and the probe across the two releases has its own tests, test_probe.py).
# RDMADOCTOR_LAB_CHECK_PAIRS=bookworm,mixed,trixie runs it on every pair.
CHECK_PAIRS = tuple(os.environ.get("RDMADOCTOR_LAB_CHECK_PAIRS", "bookworm,trixie").split(","))


def unreproduced(scenario, meta: dict) -> str:
    """What the recording's logs lack of the scenario's lines, with both sides' logs and how each ended (one
    side's failure is often told only by the other's log); "" when they lack nothing."""
    found = lacking(meta["_logs"], scenario.expected_lines(meta))
    return "%s log lacks %s:\n%s" % (*found, lab_record(meta)) if found else ""


def lab_record(meta: dict) -> str:
    """Both sides' logs, each with how it ended."""
    parts = []
    for side in ("server", "client"):
        ended = meta.get(side) or {}
        parts.append("--- %s.log (exit %s, timed out %s, %s s) ---\n%s" % (
            side, ended.get("exit_code"), ended.get("timed_out"), ended.get("seconds"),
            meta["_logs"].get(side + ".log", "")))
    return "\n".join(parts)


def explain(paths):
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "explain", "--json"] + [str(p) for p in paths],
                          cwd=str(REPO), capture_output=True, text=True, timeout=EXPLAIN_TIMEOUT)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("rdmadoctor explain --json gave no JSON (exit %s):\n%s\n%s" % (
            proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]), pytrace=False)
    return proc.returncode, doc


@pytest.mark.lab
@pytest.mark.parametrize("pair,scenario", CASES, ids=["%s-%s" % (p, s.name) for p, s in CASES])
def test_scenario(lab_manager, pair, scenario):
    out = ARTIFACTS / pair / scenario.name
    live_check = scenario.expect_check is not None and (pair in CHECK_PAIRS or
                                                        os.environ.get("RDMADOCTOR_LAB_FACTS") == "1")
    meta, lacks = lab_manager.reproduce(
        pair, lambda lab: run_scenario(lab, scenario, out, facts=live_check,
                                       recorder="pytest tests/lab/test_matrix.py"),
        out, "%s/%s" % (pair, scenario.name), lambda meta: unreproduced(scenario, meta))
    # The lab reproduced the fault (ground truth that the fixtures and docs rely on).
    assert not lacks, lacks

    if live_check:
        # `rdmadoctor check` ran inside the host while the fault was in place (runner.capture_check)
        check = meta.get("check") or {}
        assert check, "rdmadoctor check did not run in the guest (see %s)" % out
        assert_check_verdict(scenario, check["verdict"])
    if scenario.expect_explain is None and not scenario.healthy:
        return  # recorded only: no expectation yet
    paths = [out / name for name in ("server.log", "client.log") if (out / name).exists()]
    rc, doc = explain(paths)
    assert_explain_verdict(scenario, rc, doc.get("verdict") or {})
