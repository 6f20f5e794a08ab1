"""The probe's ladder for `check --peer`: seven rungs judged in order, stopping at the first broken one.

Each rung's state comes from what it saw (probe/view.py); the findings of rules/host-peer.toml say why
(PROBE_RUNG says which rung each of those rules speaks about). A failed rung shows its top finding's title;
the rungs above it are skipped and their findings folded under the failure, as check's own ladder does; a
rung that could not run says why (not inspected). Rungs 1 and 3 are judged from this host's facts, so when
one of them fails its detail comes from check's own host rules (HOST-PORT-DOWN, HOST-NO-IPV4-GID, ...).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.model import Evidence, Finding, Rung, Verdict
from rdmadoctor.views.probeview import RUNG_NAMES

RUNG_NUMBERS = {name: n for n, name in RUNG_NAMES.items()}

HOST_RUNGS = {1: ("device", "driver", "port"), 3: ("address", "port")}


def owns(finding: Finding) -> bool:
    """A finding of a rule with a `probe_rung` belongs to this ladder, not to check's host ladder."""
    return finding.probe_rung is not None


def rung_of(finding: Finding) -> Optional[int]:
    return RUNG_NUMBERS.get(finding.probe_rung) if finding.probe_rung else None


def _top(findings: List[Finding], n: int) -> Optional[Finding]:
    live = [f for f in findings if f.explained_by is None and f.severity == "fail"]
    for f in live:
        if owns(f) and rung_of(f) is not None and rung_of(f) <= n:
            return f                       # a cause found at or below the rung that broke
    for f in live:
        if not owns(f) and f.rung in HOST_RUNGS.get(n, ()):
            return f
    return None


def verdict(rungs: List[Rung], top: Optional[Finding], current: Verdict) -> Verdict:
    """The verdict once check's own ladder found nothing broken: the first broken probe rung decides. Its
    cause when a rule names one; when none does, the failure is still not "ok" (cause unknown, the rung said)."""
    failed = next((r for r in rungs if r.state == "failed"), None)
    if failed is None:
        return current
    if top is not None and top.kind == "cause" and top.explained_by is None:
        return Verdict("failure", top.cause, top.rule, top.title, top.confidence, top.fix[0] if top.fix else None)
    if current.status in ("ok", "warning"):
        return Verdict("unknown", "unknown", None, f"{failed.title}: {failed.detail}", None, None, [],
                       ["Run the check again with --json and look at sections.probe (what each rung saw)."])
    return current


def build(findings: List[Finding], view: Dict[str, Any]) -> Tuple[List[Rung], Optional[Finding]]:
    """(the probe's rungs, the finding that names the first failed rung's cause, if one does)."""
    probe = view.get("probe")
    if not probe:
        return [], None
    out: List[Rung] = []
    failed_at: Optional[int] = None
    blocked_by: Optional[str] = None
    top: Optional[Finding] = None
    for raw in probe.get("rungs") or []:
        n = raw["n"]
        evidence = [Evidence("probe", text) for text in raw.get("evidence") or []]
        if failed_at is not None:
            out.append(Rung(raw["name"], raw["title"], "skipped", f"not judged: rung {failed_at} failed",
                            evidence=evidence, seconds=raw.get("seconds"), blocked_by=blocked_by))
            continue
        state, detail = raw["state"], raw["detail"]
        if state == "failed":
            failed_at, blocked_by = n, raw["name"]
            top = _top(findings, n)
            if top is not None:
                evidence = [Evidence("probe", detail)] + evidence
                detail = top.title
        out.append(Rung(raw["name"], raw["title"], state, detail,
                        evidence=evidence or [Evidence("probe", raw["detail"])], seconds=raw.get("seconds")))
    if failed_at is not None and top is not None:
        for f in findings:
            n = rung_of(f)
            if owns(f) and f is not top and f.explained_by is None and n is not None and n > failed_at:
                f.explained_by = top.rule
    return out, top
