"""One function picks the verdict, for every command: from the ranked findings and, for check, the ladders.

The order of authority:
  1. the first failed rung of a ladder (host first, then the probe's): its top failure names the cause; a
     failed rung no rule explains is still not ok (unknown, with what the rung saw);
  2. the highest-ranked cause nothing explains (engine/evaluate.py ranks them);
  3. failing symptoms: unknown, with every candidate cause and what to collect next;
  4. warnings;
  5. ok, but only with evidence of health: for explain, a run that printed results, and no run without results
     printing an error no rule explains (its errors, if any, were judged above); for check,
     the rungs a healthy host must show (device, driver, port, address) inspected and passed. Without that
     evidence the verdict is unknown and says what could not be seen.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from rdmadoctor.engine.ladder import ESSENTIAL, Ladders, on_probe_ladder
from rdmadoctor.knowledge.listings import LISTING_TOOLS
from rdmadoctor.knowledge.phrases import say
from rdmadoctor.model import Finding, Message, Run, Verdict



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


def _from_ladders(ladders: Ladders, findings: List[Finding], lang: Optional[str]) -> Optional[Verdict]:
    failed = next((r for r in ladders.host if r.state == "failed"), None)
    if failed is not None:
        top = next((f for f in findings if f.rung == failed.name and f.severity == "fail"
                    and f.explained_by is None and not on_probe_ladder(f)), None)
        if top is not None and top.kind == "cause":
            return _of(top, "failure")
        return _from_findings(findings, lang)      # a symptom's rung: unknown, with its candidates
    failed = next((r for r in ladders.probe if r.state == "failed"), None)
    if failed is None:
        return None
    top = ladders.probe_top
    if top is not None and top.kind == "cause" and top.explained_by is None:
        return _of(top, "failure")
    said = _from_findings(findings, lang)
    if said is not None and said.status in ("failure", "unknown"):
        return said
    return Verdict("unknown", "unknown", None, f"{failed.title}: {failed.detail}", None, None, [],
                   [say("probe-json", lang)])


def _from_findings(findings: List[Finding], lang: Optional[str]) -> Optional[Verdict]:
    live = [f for f in findings if f.explained_by is None]
    causes = [f for f in live if f.kind == "cause"]
    top = causes[0] if causes else None
    if top is not None and top.severity == "fail":
        return _of(top, "failure")
    failing = [f for f in live if f.kind == "symptom" and f.severity == "fail"]
    if failing:
        return _symptoms(failing, "unknown", say("cause-not-here", lang))
    if top is not None and top.severity == "warn":
        return _of(top, "warning")
    warned = [f for f in live if f.kind == "symptom" and f.severity == "warn"]
    if warned:
        return _symptoms(warned, "warning")
    return None


def _health_of_runs(runs: Sequence[Run], ctx: Dict[str, Any], findings: Sequence[Finding] = ()) -> Verdict:
    lang = ctx.get("lang")
    if not runs:
        return Verdict("unknown", "unknown", None, say("nothing-recognised", lang), None, None,
                       [], [say("paste-both-sides", lang)])
    # imported on first use: check reads no run, and need not import the views of runs (about 17 ms)
    from rdmadoctor.views import features
    done = [r for r in runs if features.feature(r, "results", ctx)]
    if not done and all(r.tool in LISTING_TOOLS for r in runs):
        tools = ", ".join(sorted({str(r.tool) for r in runs}))
        return Verdict("unknown", "unknown", None, say("listings-only", lang, tools=tools), None, None, [],
                       [say("paste-the-failure", lang)])
    if not done:
        # quote the first error that no finding cites: "no error says why" would be wrong
        return _unexplained_error(runs, findings, lang) or _nothing_measured(runs, lang)
    # one program's results do not make another's failure healthy (a pasted session of several tools)
    error = _first_unexplained([r for r in runs if not any(r is d for d in done)], findings)
    if error is not None:
        summary = say("error-beside-results", lang, done=len(done), runs=len(runs), text=error.text)
        return Verdict("unknown", "unknown", None, summary, None, None, [], [say("paste-to-the-end", lang)])
    # results, then the program killed or crashed: it measured, and did not end well, whatever no rule read
    error = _first_unexplained_after_results(done, findings)
    if error is not None:
        summary = say("error-after-results", lang, text=error.text)
        return Verdict("unknown", "unknown", None, summary, None, None, [], [say("paste-to-the-end", lang)])
    return Verdict("ok", None, None, say("ok-runs", lang, done=len(done), runs=len(runs)))


def _nothing_measured(runs: Sequence[Run], lang: Optional[str]) -> Verdict:
    """Unknown: no run printed results and no error. Where none of the producers ever prints a result (a kernel
    log, an agent's), no run was cut short: these lines only cannot show a working program."""
    from rdmadoctor.views import features
    producers = sorted({str(r.producer) for r in runs})
    if not any(features.prints_results(p) for p in producers):
        return Verdict("unknown", "unknown", None, say("no-program-run", lang, producers=", ".join(producers)), None,
                       None, [], [say("paste-the-program", lang)])
    if all(features.passive_server_closed(r, {}) for r in runs):
        tools = ", ".join(sorted({str(r.tool) for r in runs}))
        return Verdict("unknown", "unknown", None, say("passive-server-only", lang, tools=tools), None, None, [],
                       [say("paste-the-client", lang)])
    return Verdict("unknown", "unknown", None, say("no-run-completed", lang, runs=len(runs)), None, None, [],
                   [say("paste-to-the-end", lang)])


def _cited(findings: Sequence[Finding]) -> Set[Tuple[str, Optional[int]]]:
    """(source, line) of every line the findings cite as evidence."""
    return {(e.source, e.line) for f in findings for e in f.evidence}


def _first_unexplained(runs: Sequence[Run], findings: Sequence[Finding]) -> Optional[Message]:
    """The first error message of the runs that no finding cites as evidence."""
    cited = _cited(findings)
    return next((m for r in runs for m in r.messages if m.kind == "error" and (m.source, m.line) not in cited), None)


# The shell's or the C library's words for a program that a signal ended (killed, or crashed): after its results, a
# run that printed them did not end well. Other errors after results are not read so: rping prints "wait for ...
# state 10" after a normal disconnect.
ENDED_ABNORMALLY = ("VERBS.PROGRAM_KILLED", "VERBS.PROGRAM_CRASHED")


def _first_unexplained_after_results(runs: Sequence[Run], findings: Sequence[Finding]) -> Optional[Message]:
    """The first message of a program ended by a signal (ENDED_ABNORMALLY) that a run printed after its last result
    (a result row, or a message that reports a measurement) and that no finding cites as evidence."""
    from rdmadoctor.logparse import catalog
    measured = catalog.load().result_ids
    cited = _cited(findings)
    for run in runs:
        last = max([m.line for m in run.messages if m.id in measured] + [row.line for row in run.results], default=None)
        if last is None:
            continue
        late = next((m for m in run.messages if m.id in ENDED_ABNORMALLY and m.line > last
                     and (m.source, m.line) not in cited), None)
        if late is not None:
            return late
    return None


def _unexplained_error(runs: Sequence[Run], findings: Sequence[Finding], lang: Optional[str]) -> Optional[Verdict]:
    """Unknown, quoting the first error message of the runs that no finding cites as evidence; None when all are."""
    error = _first_unexplained(runs, findings)
    if error is None:
        return None
    return Verdict("unknown", "unknown", None, say("unexplained-error", lang, runs=len(runs), text=error.text), None,
                   None, [], [say("paste-to-the-end", lang)])


def _error_beside_warning(runs: Sequence[Run], ctx: Dict[str, Any], findings: Sequence[Finding]) -> Optional[Verdict]:
    """A warning is not the verdict of runs that printed no result and an error no rule explains: that error is. The
    causes the warnings name stay as its candidates (an interface other hosts cannot reach, beside a connection
    error cut mid-line), harmless ones aside."""
    if not runs or _printed_results(runs, ctx):
        return None
    verdict = _unexplained_error(runs, findings, ctx.get("lang"))
    if verdict is None:
        return None
    warned = list(dict.fromkeys(f.cause for f in findings if f.explained_by is None and f.severity == "warn"
                                and f.kind == "cause" and f.cause not in _HARMLESS))
    return replace(verdict, candidates=warned) if warned else verdict


_HARMLESS = ("benign-warning", "unknown")


def _harmless_beside_no_result(chosen: Verdict, runs: Sequence[Run], ctx: Dict[str, Any]) -> Optional[Verdict]:
    """A harmless warning is not the verdict of a test program started on the command line that printed no result
    (a job cut short, or hung): "nothing to fix" would hide that it never finished. A paste of the warning alone, or
    of a program that measures nothing (an MPI "hello"), stays the warning."""
    if chosen.cause != "benign-warning" or not runs or _printed_results(runs, ctx):
        return None
    from rdmadoctor.views import features
    started = any(features.feature(r, "benchmark_started", ctx) for r in runs)
    return _nothing_measured(runs, ctx.get("lang")) if started else None


def _printed_results(runs: Sequence[Run], ctx: Dict[str, Any]) -> bool:
    from rdmadoctor.views import features
    return any(features.feature(r, "results", ctx) for r in runs)


def _next_for(detail: str, lang: Optional[str]) -> str:
    if "timed out" in detail:
        return say("next-timeout", lang)
    if "not collected" in detail:
        return say("next-collect", lang)
    return say("next-root", lang)


def _health_of_host(ladders: Ladders, lang: Optional[str]) -> Verdict:
    unseen = [r for r in ladders.host if r.name in ESSENTIAL and r.state == "not-inspected"]
    if unseen:
        what = "; ".join(f"{r.name}: {r.detail}" for r in unseen)
        steps = list(dict.fromkeys(_next_for(r.detail, lang) for r in unseen))
        return Verdict("unknown", "unknown", None, say("not-inspected", lang, what=what), None, None, [], steps)
    skipped = [r.name for r in ladders.all if r.state == "not-inspected"]
    if skipped:
        return Verdict("ok", None, None, say("ok-partly", lang, rungs=", ".join(skipped)))
    return Verdict("ok", None, None, say("ok", lang))


def pick(findings: List[Finding], runs: Sequence[Run], ctx: Dict[str, Any],
         ladders: Optional[Ladders] = None, healthy: Optional[Verdict] = None) -> Verdict:
    """The verdict. `healthy` is what to say when nothing is wrong (bench's summary), else the evidence decides."""
    lang = ctx.get("lang")
    chosen = (_from_ladders(ladders, findings, lang) if ladders is not None else None) or _from_findings(findings, lang)
    if chosen is not None and chosen.status == "warning" and ladders is None:
        chosen = _error_beside_warning(runs, ctx, findings) or _harmless_beside_no_result(chosen, runs, ctx) or chosen
    if chosen is not None:
        return chosen
    if healthy is not None:
        return healthy
    if ladders is not None:
        verdict = _health_of_host(ladders, lang)
        if runs and verdict.status == "ok":
            ran = _health_of_runs(runs, ctx, findings)
            return ran if ran.status != "ok" else verdict
        return verdict
    return _health_of_runs(runs, ctx, findings)
