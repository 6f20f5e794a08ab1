"""The fault matrix on its recordings (fixtures/lab/): explain on both logs, and check on the facts the
faulty host's `rdmadoctor check --save` wrote while the fault was in place. No VM: this runs everywhere
and gives the accuracy figures; test_matrix.py runs the same scenarios live."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.expectations import assert_check_verdict, assert_explain_verdict
from tests.lab.scenarios import BY_NAME

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = sorted(p for p in (REPO / "fixtures" / "lab").glob("*/*") if (p / "meta.json").is_file())


def _rdmadoctor(*args):
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", *args], cwd=str(REPO), capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def _scenario(recording: Path):
    scenario = BY_NAME.get(recording.name)
    if scenario is None:
        pytest.fail(f"{recording}: no scenario of that name in tests/lab/scenarios.py", pytrace=False)
    return scenario


@pytest.mark.parametrize("recording", RECORDINGS, ids=[f"{p.parent.name}-{p.name}" for p in RECORDINGS])
def test_explain_on_the_recording(recording):
    scenario = _scenario(recording)
    if scenario.expect_explain is None and not scenario.healthy:
        pytest.skip("recorded only: the scenario has no explain expectation")
    logs = [str(recording / n) for n in ("server.log", "client.log") if (recording / n).exists()]
    rc, doc = _rdmadoctor("explain", "--json", *logs)
    assert_explain_verdict(scenario, rc, doc["verdict"])


CHECKED = [p for p in RECORDINGS if (BY_NAME.get(p.name) and BY_NAME[p.name].expect_check
                                     and json.loads((p / "meta.json").read_text()).get("check"))]


@pytest.mark.parametrize("recording", CHECKED, ids=[f"{p.parent.name}-{p.name}" for p in CHECKED])
def test_check_on_the_recorded_facts(recording):
    scenario = _scenario(recording)
    meta = json.loads((recording / "meta.json").read_text())
    check = meta["check"]
    facts = recording / f"check-{check['host']}.json"
    args = shlex.split(check.get("args") or "")
    peer = args[args.index("--peer") + 1] if "--peer" in args else None
    _, doc = _rdmadoctor("check", "--json", "--from", str(facts), *(["--peer", peer] if peer else []))
    assert_check_verdict(scenario, doc["verdict"])
    # the verdict the guest printed live, while the fault was in place, is the same
    assert_check_verdict(scenario, check["verdict"])


BENCH = REPO / "fixtures" / "lab" / "bench"
# what the lab made each recorded sweep do: the cause of every combination that must fail (the rest must run)
BENCH_EXPECTED = {"sweep-3x3": {}, "sweep-memlock": {("ib_write_bw", 1, 1048576): "memlock-limit"}}


@pytest.mark.parametrize("name", sorted(BENCH_EXPECTED))
def test_explain_on_the_recorded_bench_sweeps(name, tmp_path):
    """Both sides' output of every combination `bench` ran in the lab, explained again from files."""
    saved = json.loads((BENCH / f"{name}.json").read_text())
    assert saved["schema"] == "rdmadoctor-bench/1" and saved["results"]
    for i, result in enumerate(saved["results"]):
        key = (result["tool"], result["qp"], result["size"])
        logs = []
        for side in ("server", "client"):
            path = tmp_path / f"{i}-{side}.log"
            path.write_text(result[f"{side}_log"])
            logs.append(str(path))
        rc, doc = _rdmadoctor("explain", "--json", *logs)
        cause = BENCH_EXPECTED[name].get(key)
        if cause is None:
            assert result["status"] == "ok" and result["bw_avg_gbps"] > 0, key
            assert doc["verdict"]["status"] in ("ok", "warning") and rc in (0, 1), (key, doc["verdict"])
        else:
            assert result["status"] == "failed" and result["verdict"]["cause"] == cause, key
            assert doc["verdict"]["cause"] == cause and rc == 2, (key, doc["verdict"])
