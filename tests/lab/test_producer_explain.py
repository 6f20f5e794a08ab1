"""`rdmadoctor explain --json` on every producer recording (no VM): the verdict must be the recording's
``expect`` (fixtures/lab/<pair>/<scenario>/<producer>/meta.json, from tests/lab/producers.py).

* ``expect`` a cause slug: ``verdict.cause`` is that slug;
* ``expect`` "none" (the run worked): ``verdict.status`` is ok or warning;
* ``expect`` "unknown" (the logs cannot decide): nothing is claimed at high confidence, and the true
  ``fault`` is among the verdict's candidates (or is its cause).

Recordings whose verdict is not right yet are listed in ``XFAIL`` with the reason (non-strict: a rule
that starts getting one right turns it into an XPASS, and the entry can go). An expectation is never
weakened to make a recording pass.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Tuple

import pytest

from tests.lab.producers import BY_NAME
from tests.lab.vm import REPO

FIXTURES = REPO / "fixtures" / "lab"
RECORDINGS = sorted(p.parent for p in FIXTURES.glob("*/*/*/meta.json"))

# "<scenario>/<producer>" (every pair) or "<pair>/<scenario>/<producer>" (that pair): why explain's verdict
# on that recording is not the expected one yet.
XFAIL: Dict[str, str] = {
    'trixie/netdev-down-server/mpirun-ucx':
        'prterun printed only "Segmentation fault" with h1\'s netdev down: nothing in the log names the network',
}


def _key(folder: Path) -> Tuple[str, str]:
    pair, scenario, producer = folder.parents[1].name, folder.parent.name, folder.name
    return "%s/%s" % (scenario, producer), "%s/%s/%s" % (pair, scenario, producer)


def _param(folder: Path):
    short, full = _key(folder)
    reason = XFAIL.get(full) or XFAIL.get(short)
    marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
    return pytest.param(folder, id=full.replace("/", "-"), marks=marks)


def explain(folder: Path) -> Tuple[int, Dict]:
    """The CLI's `explain --json` on the recording's logs, in this process (same command, no interpreter start)."""
    from typer.testing import CliRunner

    from rdmadoctor.cli import app
    logs = [str(folder / n) for n in ("server.log", "client.log") if (folder / n).is_file()]
    result = CliRunner().invoke(app, ["explain", "--json", *logs])
    try:
        doc = json.loads(result.stdout)
    except ValueError:
        raise AssertionError("explain did not answer (exit %s): %r %s" % (
            result.exit_code, result.exception, result.output[-2000:]))
    assert result.exit_code in (0, 1, 2, 3), "exit %s: %s" % (result.exit_code, result.output[-2000:])
    return result.exit_code, doc


def check_verdict(meta: Dict, rc: int, verdict: Dict) -> None:
    expect, fault = meta["expect"], meta["fault"]
    said = "%s %s (%s): %s" % (verdict.get("status"), verdict.get("cause"), verdict.get("confidence"),
                               verdict.get("summary"))
    if expect == "none":
        assert verdict.get("status") in ("ok", "warning") and rc in (0, 1), "a run that worked, diagnosed as " + said
    elif expect == "unknown":
        assert verdict.get("confidence") != "high", "the logs cannot decide, yet explain is sure: " + said
        named = set(verdict.get("candidates") or []) | {verdict.get("cause")}
        assert fault in named, "the true fault %r is not among the candidates %s; explain said %s" % (
            fault, verdict.get("candidates"), said)
    else:
        assert verdict.get("cause") == expect, "expected %r (alternatives %s, fault %s); explain said %s" % (
            expect, meta.get("alternatives"), fault, said)


def test_xfail_entries_name_recordings():
    """Every XFAIL key names a run of the table (and, with a pair, a recording)."""
    for key in XFAIL:
        parts = key.split("/")
        assert len(parts) in (2, 3), key
        assert "/".join(parts[-2:]) in BY_NAME, key
        if len(parts) == 3:
            assert (FIXTURES / key / "meta.json").is_file(), key


@pytest.mark.parametrize("folder", RECORDINGS, ids=lambda f: "-".join(_key(f)[1].split("/")))
def test_explain_answers_every_recording(folder):
    """Whatever it concludes, explain reads every recording to the end: JSON, an exit code of its own."""
    explain(folder)


@pytest.mark.parametrize("folder", [_param(f) for f in RECORDINGS])
def test_explain_on_the_producer_recording(folder):
    meta = json.loads((folder / "meta.json").read_text())
    for field in ("expect", "alternatives", "fault"):
        assert field in meta, "%s: meta.json has no %r (python -m tests.lab.producers --refresh-meta)" % (folder, field)
    rc, doc = explain(folder)
    check_verdict(meta, rc, doc["verdict"])
