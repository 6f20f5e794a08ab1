"""How a scenario's expectations are asserted, live (test_matrix) and on the recordings (test_recorded), and what a
live run lacks of the lines its recording shows (test_matrix, test_producers)."""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from tests.lab.scenarios import Scenario


def assert_explain_verdict(scenario: Scenario, rc: int, verdict: Dict) -> None:
    if scenario.healthy:
        assert verdict.get("status") in ("ok", "warning") and rc in (0, 1), (
            "healthy run diagnosed as %s (exit %s): %s" % (verdict.get("cause"), rc, verdict.get("summary")))
    elif scenario.expect_explain == "unknown":
        # the logs cannot tell: explain must say so, and list the true cause among the candidates
        truth = scenario.expect_check or scenario.alternatives[0]
        assert verdict.get("status") == "unknown" and rc == 3, "explain claimed %r: %s" % (
            verdict.get("cause"), verdict.get("summary"))
        assert truth in (verdict.get("candidates") or []), "the true cause %r is not among the candidates %s" % (
            truth, verdict.get("candidates"))
    else:
        assert verdict.get("cause") == scenario.expect_explain, (
            "explain named %r, expected %r (alternatives %s): %s" % (
                verdict.get("cause"), scenario.expect_explain, list(scenario.alternatives), verdict.get("summary")))


def assert_check_verdict(scenario: Scenario, verdict: Dict) -> None:
    assert (verdict or {}).get("cause") == scenario.expect_check, (
        "check named %r, expected %r: %s" % ((verdict or {}).get("cause"), scenario.expect_check,
                                             (verdict or {}).get("summary")))


def lacking(logs: Dict[str, str], expected: Iterable[Tuple[str, Sequence[str]]]) -> Optional[Tuple[str, List[str]]]:
    """The first side whose log ("<side>.log" in `logs`) lacks some of its expected lines, with those lines; None
    when every side's log holds all of them."""
    for side, lines in expected:
        missing = [line for line in lines if line not in logs.get(side + ".log", "")]
        if missing:
            return side, missing
    return None
