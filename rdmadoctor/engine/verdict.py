"""One function picks the verdict, for every command: from the ranked findings and, for check, the ladders.

The order of authority:
  1. the first failed rung of a ladder (host first, then the probe's): its top failure names the cause; a
     failed rung no rule explains is still not ok (unknown, with what the rung saw);
  2. the highest-ranked cause nothing explains (engine/evaluate.py ranks them);
  3. failing symptoms: unknown, with every candidate cause and what to collect next;
  4. warnings;
  5. ok, but only with evidence of health: for explain, a run that printed results (its errors, if any, were
     judged above); for check,
     the rungs a healthy host must show (device, driver, port, address) inspected and passed. Without that
     evidence the verdict is unknown and says what could not be seen.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from rdmadoctor.engine.ladder import ESSENTIAL, Ladders, on_probe_ladder
from rdmadoctor.model import Finding, Run, Verdict
from rdmadoctor.views import features



def _of(f: Finding, status: str) -> Verdict:
    return Verdict(status, f.cause, f.rule, f.title, f.confidence, f.fix[0] if f.fix else None)


def _symptoms(symptoms: List[Finding], status: str, suffix: str = "") -> Verdict:
    s = symptoms[0]
    candidates: List[str] = []
    steps: List[str] = []
    for f in symptoms:
        candidates += [c for c in f.candidates if c not in candidates]
        steps += [n for n in f.next_steps if n not in steps]
    return Verdict(status, "unknown", s.rule, s.title + suffix, None, None, candidates, steps)


def _from_ladders(ladders: Ladders, findings: List[Finding]) -> Optional[Verdict]:
    failed = next((r for r in ladders.host if r.state == "failed"), None)
    if failed is not None:
        top = next((f for f in findings if f.rung == failed.name and f.severity == "fail"
                    and f.explained_by is None and not on_probe_ladder(f)), None)
        if top is not None and top.kind == "cause":
            return _of(top, "failure")
        return _from_findings(findings)      # a symptom's rung: unknown, with its candidates
    failed = next((r for r in ladders.probe if r.state == "failed"), None)
    if failed is None:
        return None
    top = ladders.probe_top
    if top is not None and top.kind == "cause" and top.explained_by is None:
        return _of(top, "failure")
    said = _from_findings(findings)
    if said is not None and said.status in ("failure", "unknown"):
        return said
    return Verdict("unknown", "unknown", None, f"{failed.title}: {failed.detail}", None, None, [],
                   ["Run the check again with --json and look at sections.probe (what each rung saw)."])


def _from_findings(findings: List[Finding]) -> Optional[Verdict]:
    live = [f for f in findings if f.explained_by is None]
    causes = [f for f in live if f.kind == "cause"]
    top = causes[0] if causes else None
    if top is not None and top.severity == "fail":
        return _of(top, "failure")
    failing = [f for f in live if f.kind == "symptom" and f.severity == "fail"]
    if failing:
        return _symptoms(failing, "unknown", "; the cause is not in this input")
    if top is not None and top.severity == "warn":
        return _of(top, "warning")
    warned = [f for f in live if f.kind == "symptom" and f.severity == "warn"]
    if warned:
        return _symptoms(warned, "warning")
    return None


def _health_of_runs(runs: Sequence[Run], ctx: Dict[str, Any]) -> Verdict:
    if not runs:
        return Verdict("unknown", "unknown", None, "No RDMA tool's output was recognised in the input", None, None,
                       [], ["Paste the complete output of both sides, each with the command line that started it."])
    done = [r for r in runs if features.feature(r, "results", ctx)]
    if not done:
        return Verdict("unknown", "unknown", None, f"No run completed: none of the {len(runs)} run(s) printed "
                                                   "results, and no error says why", None, None, [],
                       ["Paste the complete output of both sides, from the command line to the end (or to ^C)."])
    return Verdict("ok", None, None, f"No problem found: {len(done)} of {len(runs)} run(s) printed results")


def _next_for(detail: str) -> str:
    if "timed out" in detail:
        return "Run the check again with a longer --timeout: the host was too slow to answer in time."
    if "not collected" in detail:
        return "Collect the facts on the host itself (`rdmadoctor check --save`): these sections are missing."
    return "Run the check as root, or as the user of the RDMA jobs with read access to /sys and /dev."


def _health_of_host(ladders: Ladders) -> Verdict:
    unseen = [r for r in ladders.host if r.name in ESSENTIAL and r.state == "not-inspected"]
    if unseen:
        what = "; ".join(f"{r.name}: {r.detail}" for r in unseen)
        steps = list(dict.fromkeys(_next_for(r.detail) for r in unseen))
        return Verdict("unknown", "unknown", None, f"Not inspected, so not known to be healthy: {what}", None, None,
                       [], steps)
    skipped = [r.name for r in ladders.all if r.state == "not-inspected"]
    if skipped:
        return Verdict("ok", None, None,
                       f"No problem found in what could be read (not inspected: {', '.join(skipped)})")
    return Verdict("ok", None, None, "No problem found")


def pick(findings: List[Finding], runs: Sequence[Run], ctx: Dict[str, Any],
         ladders: Optional[Ladders] = None, healthy: Optional[Verdict] = None) -> Verdict:
    """The verdict. `healthy` is what to say when nothing is wrong (bench's summary), else the evidence decides."""
    chosen = (_from_ladders(ladders, findings) if ladders is not None else None) or _from_findings(findings)
    if chosen is not None:
        return chosen
    if healthy is not None:
        return healthy
    if ladders is not None:
        verdict = _health_of_host(ladders)
        if runs and verdict.status == "ok":
            ran = _health_of_runs(runs, ctx)
            return ran if ran.status != "ok" else verdict
        return verdict
    return _health_of_runs(runs, ctx)
