"""The pipelines behind the commands: inputs -> runs / facts -> findings -> one Diagnosis."""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Optional, Sequence

from rdmadoctor.knowledge import perftest
from rdmadoctor.views import params
from rdmadoctor.engine import evaluate, ladder, rules as rule_table
from rdmadoctor.engine.verdict import pick as pick_verdict
from rdmadoctor.engine.rules import LOG_SCOPES, Table
from rdmadoctor.model import Comparison, Diagnosis, ParsedLog, Run, Verdict

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([GgMmTt]?)(?:b(?:it)?(?:/s|ps)?)?\s*$")


def parse_rate(text: str) -> float:
    """'100G', '100 Gb/s', '25g', '400' (Gb/s) -> Gb/s. Raises ValueError with the reason."""
    m = _RATE.match(text)
    if not m:
        raise ValueError(f"not a link rate: {text!r} (examples: 100G, 25G, 400)")
    value, unit = float(m.group(1)), m.group(2).upper()
    gbps = value * {"": 1.0, "G": 1.0, "M": 1e-3, "T": 1e3}[unit]
    if gbps <= 0:
        raise ValueError(f"the link rate must be positive: {text!r}")
    return gbps


def comparisons(runs: Sequence[Run]) -> List[Comparison]:
    """Server vs client, parameter by parameter, for the report's side-by-side table."""
    rows = []
    for server, client in evaluate.pairs(runs):
        pair = f"{server.source}#{server.index} / {client.source}#{client.index}"
        for name in params.COMPARED:
            a, b = params.read(server, name), params.read(client, name)
            if a is None and b is None:
                continue
            differs = bool(params.differences(server, client, [name]))
            must_match = params.must_match(name)
            rows.append(Comparison(pair=pair, parameter=name, label=params.label(name),
                                   server=None if a is None else str(a.value), server_source=a.source if a else None,
                                   client=None if b is None else str(b.value), client_source=b.source if b else None,
                                   must_match=must_match, differs=differs and must_match, different=differs))
    return rows


def context(parsed: Optional[ParsedLog], link_rate_gbps: Optional[float] = None,
            facts_view: Optional[Dict[str, Any]] = None, lang: Optional[str] = None) -> Dict[str, Any]:
    ctx: Dict[str, Any] = {"sources": parsed.sources if parsed else [], "runs": parsed.runs if parsed else [],
                           "public": {}, "lang": lang}
    if link_rate_gbps:
        ctx["link_rate_gbps"] = link_rate_gbps
        ctx["public"]["link_rate"] = f"{link_rate_gbps:g} Gb/s"
    if facts_view is not None:
        ctx["facts_view"] = facts_view
    return ctx


NOTED_INPUTS = 5      # inputs named one by one in the notes on runs not examined; beyond them, one note counts them
_WHY_KEPT = "a run that failed is kept in the place of one that did not, while one is left"


def dropped_notes(parsed: ParsedLog) -> List[str]:
    """What the bounds on runs left out: each input's runs beyond those it keeps, and the runs beyond those all the
    inputs keep together."""
    dropped = [s for s in parsed.sources if s.runs_dropped]
    kept: Dict[str, int] = {}
    for run in parsed.runs:
        kept[run.source] = kept.get(run.source, 0) + 1
    if len(dropped) <= NOTED_INPUTS:
        notes = [f"{s.name}: {s.runs_dropped} run(s) beyond the {kept.get(s.name, 0)} kept were not examined one by "
                 f"one ({_WHY_KEPT})" for s in dropped]
    else:
        notes = [f"{len(dropped)} inputs printed more runs than an input keeps: {sum(s.runs_dropped for s in dropped)} "
                 f"run(s) were not examined one by one ({_WHY_KEPT})"]
    if parsed.runs_dropped:
        notes.append(f"{parsed.runs_dropped} run(s) beyond the {len(parsed.runs)} all the inputs keep together were "
                     f"not examined one by one ({_WHY_KEPT}, and one that shows what no kept run shows in the place "
                     "of the last copy of what kept runs show most often)")
    if parsed.inputs_unlisted:
        notes.append(f"{parsed.inputs_unlisted} more input(s) were read and are not listed beside the "
                     f"{len(parsed.sources)} that are: none of their runs was kept")
    return notes


def stopped_notes(parsed: ParsedLog) -> List[str]:
    """The inputs read only in part: where their compressed data ended early, turned unreadable or grew past a log's
    size (logparse/compressed.py)."""
    return [f"{s.name}: {s.read_stopped}; " + (f"its first {s.total_lines} line(s) were read" if s.total_lines
                                                 else "nothing of it was read")
            for s in parsed.sources if s.read_stopped]


def explain(parsed: ParsedLog, link_rate_gbps: Optional[float] = None, table: Optional[Table] = None,
            lang: Optional[str] = None) -> Diagnosis:
    """A log (one or more inputs) -> findings -> one verdict. What the paste shows of the host (a device listing,
    a kernel log) is a facts view the rules can read, as they read check's; the facts rules written for a paste's
    partial facts (`paste = true`) judge it."""
    from rdmadoctor.views import factview
    table = table if table is not None else rule_table.load()
    ctx = context(parsed, link_rate_gbps, factview.build(parsed.facts) if parsed.facts else None, lang)
    rules = table.of_scope(*LOG_SCOPES)
    if parsed.facts:
        rules += tuple(r for r in table.of_scope("facts") if r.paste)
    findings = evaluate.rank(evaluate.find(parsed.runs, ctx, rules), table)
    return Diagnosis(command="explain", verdict=pick_verdict(findings, parsed.runs, ctx), findings=findings,
                     notes=stopped_notes(parsed) + dropped_notes(parsed),
                     runs=parsed.runs, sources=parsed.sources, comparisons=comparisons(parsed.runs),
                     link_rate_gbps=link_rate_gbps, lang=ctx["lang"] or "en")


def check(facts: Dict[str, Any], parsed: Optional[ParsedLog] = None, peer: Optional[str] = None,
          table: Optional[Table] = None, lang: Optional[str] = None) -> Diagnosis:
    """Host facts (and optionally a perftest log from this host) -> findings on the ladder, one verdict."""
    from rdmadoctor.views import factview
    table = table if table is not None else rule_table.load()
    view = factview.build(facts, peer)
    runs = parsed.runs if parsed else []
    from rdmadoctor.views import peerperftest
    view["peer_perftest"] = peerperftest.build(view, runs)      # the peer's perftest against this side's
    targets = _client_targets(runs)
    for entry in view["rdma_static_neighbours"]:
        entry["is_peer"] = entry["is_peer"] or entry["dst"] in targets
    ctx = context(parsed, facts_view=view, lang=lang)
    # the facts rules written for a paste's partial facts (`paste = true`) are explain's; check has the host's own
    rules = tuple(r for r in table.of_scope(*LOG_SCOPES, "facts") if not r.paste)
    findings = evaluate.rank(evaluate.find(runs, ctx, rules), table)
    ladders = ladder.build(findings, view, peer, lang)
    findings = evaluate.rank(findings, table)
    verdict = pick_verdict(findings, runs, ctx, ladders)
    notes = [f"could not read {name}: {reason}" for name, reason in view["reasons"].items()
             if reason and not view["readable"].get(name)]
    for name, section in (facts.get("sections") or {}).items():
        for item in section.get("unreadable") or []:
            notes.append(f"{name}: could not read {item.get('what')}: {item.get('why')}")
    rungs = ladders.all
    return Diagnosis(command="check", verdict=verdict, findings=findings, runs=runs,
                     sources=parsed.sources if parsed else [], facts=facts, rungs=rungs,
                     comparisons=comparisons(runs), notes=notes, link_rate_gbps=factview.link_rate_gbps(view),
                     lang=ctx["lang"] or "en")


def _client_targets(runs: Sequence[Run]) -> set:
    """The IP addresses the input's clients connected to (as their command lines name them)."""
    import ipaddress
    out = set()
    for run in runs:
        host = run.command.host if run.command is not None else None
        try:
            out.add(str(ipaddress.ip_address(str(host))))
        except ValueError:
            continue
    return out


def _memlock_short(combo, parsed: ParsedLog, hosts: Dict[str, Optional[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """The sides of a failed combination whose buffer registration failed ("Couldn't allocate MR") on a host
    whose facts show a locked-memory limit below what that perftest pins: the log's guess, confirmed."""
    from rdmadoctor.views import factview
    need = perftest.pin_bytes(combo.size, combo.qp)
    out = []
    for run in parsed.runs:
        host = hosts.get(run.side)
        if host is None or not any(m.id == "R03" for m in run.messages):
            continue
        memlock = host["memlock"]
        if not factview.memlock_below(memlock["soft"], memlock["exempt"], need):
            continue
        out.append({"label": combo.label, "side": run.side, "host": host["host"].get("hostname") or run.side,
                    "user": host["host"].get("user") or "?", "limit": memlock["soft"], "need": need})
    return out


def explain_combo(combo, link_rate_gbps: Optional[float] = None, table: Optional[Table] = None,
                  lang: Optional[str] = None) -> Diagnosis:
    """A failed bench combination explained from its two logs, once: the diagnosis is kept on the combination
    (the sweep's progress line and the final report share it) and its verdict goes into the saved results."""
    import io
    from rdmadoctor.logparse.streams import parse_streams
    cached = getattr(combo, "_diagnosis", None)
    if cached is not None:
        return cached
    parsed = parse_streams([(f"{combo.label} server.log", io.BytesIO(combo.server_log.encode())),
                            (f"{combo.label} client.log", io.BytesIO(combo.client_log.encode()))])
    diagnosis = explain(parsed, link_rate_gbps, table, lang)
    combo._diagnosis = diagnosis
    combo._parsed = parsed
    if combo.status != "ok" and combo.verdict is None:
        combo.verdict = diagnosis.verdict.to_dict()
    return diagnosis


def bench(result, local_facts: Optional[Dict[str, Any]] = None, peer_facts: Optional[Dict[str, Any]] = None,
          earlier: Optional[Dict[str, Any]] = None, threshold: float = 0.10, table: Optional[Table] = None,
          lang: Optional[str] = None) -> Diagnosis:
    """A sweep's outcome: every failed combination explained from its own two logs, shortfalls against the
    link rate attributed with the hosts' facts, regressions against an earlier sweep."""
    from rdmadoctor.views import factview
    from rdmadoctor.views.bench import regressions
    view = factview.build(local_facts or {"sections": {}})
    view["peer_facts"] = factview.build(peer_facts) if peer_facts else None
    # --link-rate, else the slower of the two hosts' port rates when both are known
    host_rates = [factview.link_rate_gbps(v) for v in (view, view["peer_facts"]) if v]
    known = [r for r in host_rates if r]
    rate = result.link_rate_gbps or (min(known) if host_rates and len(known) == len(host_rates) else None)
    findings = []
    memlock_short: List[Dict[str, Any]] = []
    for combo in result.results:
        if combo.status == "ok" or not (combo.client_log or combo.server_log):
            continue
        diagnosis = explain_combo(combo, rate, table, lang)
        parsed = combo._parsed
        findings += [dataclasses.replace(f, title=f"[{combo.label}] {f.title}", key=f"{combo.label}|{f.key}",
                                         explained_by=None) for f in diagnosis.findings]
        # the peer's agent started the server, so the peer's facts hold the limit the server ran under
        memlock_short += _memlock_short(combo, parsed, {"client": view, "server": view["peer_facts"]})
    shortfalls = []
    best = result.best()
    if rate and best is not None and best.bw_avg_gbps is not None and best.bw_avg_gbps < 0.9 * rate:
        shortfalls.append({"label": best.label, "gbps": best.bw_avg_gbps, "rate": rate,
                           "fraction": best.bw_avg_gbps / rate})
    hosts = [v for v in (view, view["peer_facts"]) if v]
    mtus = [p["active_mtu"] for v in hosts for p in v["ports"] if p.get("is_roce") and p.get("state") == "ACTIVE"
            and p.get("active_mtu")]
    degraded = [f"{v['host'].get('hostname') or 'host'}: {p['label']} {p.get('current_link_speed')} "
                f"x{p.get('current_link_width')} (can {p.get('max_link_speed')} x{p.get('max_link_width')})"
                for v in hosts for p in v["pci"] if p.get("degraded")]
    view["bench"] = {"shortfalls": shortfalls, "roce_mtu": min(mtus) if mtus else None, "pcie_degraded": degraded,
                     "regressions": regressions(result, earlier, threshold) if earlier else [],
                     "failed": [c.label for c in result.results if c.status != "ok"],
                     # failures with no perftest output to explain (the agent refused or could not start it)
                     "unexplained": [{"label": c.label, **(c.verdict or {})} for c in result.results
                                     if c.status != "ok" and not (c.client_log or c.server_log)],
                     "memlock": memlock_short,
                     "done": len(result.results), "interrupted": result.interrupted}
    ctx = context(None, facts_view=view, lang=lang)
    ctx["public"]["link_rate"] = f"{rate:g} Gb/s" if rate else "unknown"
    table = table if table is not None else rule_table.load()
    findings = evaluate.rank(findings + evaluate.find([], ctx, table.of_scope("bench")), table)
    done = [c for c in result.results if c.status == "ok"]
    healthy = Verdict("ok" if done else "unknown", None if done else "unknown", None,
                      f"{len(done)} of {len(result.results)} combinations ran"
                      + (f"; best {best.label}: {best.bw_avg_gbps:g} Gb/s" if best and best.bw_avg_gbps else ""))
    verdict = pick_verdict(findings, [], ctx, healthy=healthy)
    facts = local_facts
    return Diagnosis(command="bench", verdict=verdict, findings=findings, facts=facts, link_rate_gbps=rate,
                     notes=(["the sweep was interrupted (Ctrl-C)"] if result.interrupted else []),
                     lang=ctx["lang"] or "en")
