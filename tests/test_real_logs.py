"""Accuracy of `rdmadoctor explain` on real-world logs: perftest, NCCL, UCX, Open MPI, libfabric, the verbs and
rdma_cm tools, libibverbs, the kernel, Kubernetes device plugins, GPUDirect.

Every directory under fixtures/real/ holds one log as pasted in a public source (server.log, client.log or
paste.log) and a meta.toml with the root cause that the source itself established (see fixtures/real/README.md).

* Labels of confidence high/medium that name a cause (or "none" for a healthy run): the verdict's cause and status
  must equal the label.
* Labels "unknown" (the source never established a cause) and labels of low confidence: rdmadoctor must not claim
  a *different* cause with high confidence.
* Every fixture must parse (no crash, no usage error, no decode error), and a real failure is never called ok.
* The whole corpus (tools/scorecard.py): top-1 on the cases with an established cause at least 90%, no wrong
  cause at high confidence, no failure called ok.

Known misses are marked xfail(strict=True) in KNOWN_MISSES with the reason, so that a fix shows up as XPASS.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
FIXTURES = sorted(p for p in REAL.iterdir() if p.is_dir() and (p / "meta.toml").is_file())
LOG_NAMES = ("server.log", "client.log", "paste.log")
NO_CAUSE = (None, "", "none")

# fixture name -> why rdmadoctor's verdict is wrong (the lead fixes the rules; remove the entry when it passes)
KNOWN_MISSES = {
    "k8s-shared-dev-plugin-106-old-image": (
        "'Did not detect devices' only says libibverbs listed no device; from this log alone rdmadoctor stays "
        "'unknown' and lists userspace-kernel-mismatch among the candidates (with `check` facts it can tell); the "
        "thread established an old rdma-core in the container"),
}


def _meta(fixture: Path) -> dict:
    with open(fixture / "meta.toml", "rb") as fh:
        return tomllib.load(fh)


def _logs(fixture: Path) -> list[Path]:
    return [fixture / n for n in LOG_NAMES if (fixture / n).is_file()]


@functools.lru_cache(maxsize=None)
def _explain(fixture: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "explain", "--json", *map(str, _logs(fixture))],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1, 2, 3), f"exit {proc.returncode}\nstderr:\n{proc.stderr}"
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - reported as the failure
        raise AssertionError(f"not JSON ({exc}); stderr:\n{proc.stderr}\nstdout:\n{proc.stdout[:2000]}")


def _param(fixture: Path, with_misses: bool):
    marks = []
    if with_misses and fixture.name in KNOWN_MISSES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[fixture.name]))
    return pytest.param(fixture, id=fixture.name, marks=marks)


def test_corpus_is_well_formed():
    assert len(FIXTURES) >= 150
    slugs = set()
    from rdmadoctor.knowledge import causes
    slugs.update(causes.slugs())
    for fixture in FIXTURES:
        meta = _meta(fixture)
        assert _logs(fixture), f"{fixture.name}: no server.log/client.log/paste.log"
        for key in ("source", "title", "retrieved", "producer", "what_happened", "expected_cause", "expected_status",
                    "confidence_of_label", "notes"):
            assert key in meta, f"{fixture.name}: meta.toml lacks {key}"
        assert meta["source"].startswith("https://"), fixture.name
        assert meta["expected_status"] in ("ok", "warning", "failure", "unknown"), fixture.name
        assert meta["confidence_of_label"] in ("high", "medium", "low"), fixture.name
        assert meta["expected_cause"] in slugs | {"none", "unknown"}, f"{fixture.name}: {meta['expected_cause']}"
        if meta["expected_cause"] == "none":
            assert meta["expected_status"] == "ok", fixture.name
    assert set(KNOWN_MISSES) <= {f.name for f in FIXTURES}


@pytest.mark.parametrize("fixture", [_param(f, with_misses=False) for f in FIXTURES])
def test_real_log_parses(fixture):
    meta = _meta(fixture)
    _, out = _explain(fixture)
    for inp in out.get("inputs", []):
        assert inp.get("decode_errors", 0) == 0, f"{fixture.name}: {inp}"
    if meta["expected_status"] == "failure":
        assert out["verdict"]["status"] != "ok", f"{fixture.name}: a failure called ok"


@pytest.mark.parametrize("fixture", [_param(f, with_misses=True) for f in FIXTURES])
def test_real_log_verdict(fixture):
    meta = _meta(fixture)
    rc, out = _explain(fixture)
    verdict = out["verdict"]
    expected = meta["expected_cause"]
    got = verdict.get("cause")
    where = (f"{fixture.name}: verdict {verdict.get('status')}/{got}/{verdict.get('confidence')} "
             f"({verdict.get('rule')}: {verdict.get('summary')}), label {meta['expected_status']}/{expected}/"
             f"{meta['confidence_of_label']}")
    if expected != "unknown" and meta["confidence_of_label"] in ("high", "medium"):
        if expected == "none":
            assert got in NO_CAUSE, where
        else:
            assert got == expected, where
        assert verdict["status"] == meta["expected_status"], where
    else:
        # the source established nothing (or only weakly): no confident claim of another cause
        confident_other = (got not in NO_CAUSE and got != "unknown" and got != expected
                           and verdict.get("confidence") == "high")
        assert not confident_other, where


def test_scorecard_on_the_whole_corpus():
    sys.path.insert(0, str(REAL.parent.parent / "tools"))
    import scorecard
    tally = scorecard.tallies(scorecard.cases())["all"]["all"]
    assert tally.established >= 100
    assert tally.top1 >= 0.9 * tally.established, f"top-1 {tally.top1}/{tally.established}; misses: {tally.misses}"
    assert tally.confident_wrong == 0 and tally.failure_called_ok == 0
