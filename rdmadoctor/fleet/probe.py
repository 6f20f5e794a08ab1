"""`rdmadoctor fleet probe`: pairwise probes between nodes, scheduled so that no agent serves two at once,
with the failing pairs isolated to a node or a link.

How a pair is probed. The fleet host does not reach into the RDMA network itself: it may not be on it, and a
probe's worth is that it runs between the two nodes. For the pair (a, b) it runs, on a, through ClusterShell's
ssh, the same `rdmadoctor check --peer <b's RDMA address> --json` a person would type there: a's check climbs the
probe ladder to b and talks to b's agent (`rdmadoctor serve`, authenticated protocol 2, through the project's
agent client). The pair's record keeps what that check printed: its probe rungs, the first broken one, the
verdict and the probe's own evidence (TCP outcome, rdma_cm events, the burst's rate and both hosts' counter
deltas). A pair whose check did not run or printed no probe is `not-run`, never `failed`.

    doc = run(names, shell, ProbeOptions(...))      # the fleet document with its `probe` part

Isolation, as Google's cluster-health-scanner does for its pairwise NCCL tests: each failing pair (a, b) is
retested with a against a node that passed (a keeps its client role) and with b against one (b keeps its agent
role). a fails again and b passes: the node is a. Both pass: the link between a and b. Both fail: both nodes.
A node that already passed a probe of the plan in the same role needs no retest for that role: that probe is
the answer (a bad node, which passes nothing, is always retested). Blamed links that all cross between one small
set of nodes and the rest are reported as that `group` (a switch, its uplink, a VLAN they share).
"""
from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rdmadoctor.fleet import check as fleet_check
from rdmadoctor.fleet import nodes as node_records
from rdmadoctor.fleet import report, schedule
from rdmadoctor.runtime import jsonio
from rdmadoctor.runtime.text import printable

OUTCOMES = ("passed", "warning", "failed", "incomplete", "not-run")
PROBE_RUNGS = ("peer-port", "peer-reach", "peer-gid", "peer-cm-resolve", "peer-cm-connect", "peer-exchange",
               "peer-bandwidth")
GOOD = ("passed", "warning")

Prober = Callable[[List[Tuple[str, str]], int, str], List[Dict[str, Any]]]


@dataclass
class ProbeOptions:
    command: str = "rdmadoctor check"          # how to run check on a node; --peer ADDR --json are appended
    rounds: Optional[int] = None               # None: every pair up to schedule.ALL_PAIRS_UP_TO nodes, else 8
    seed: Optional[int] = None
    round_seconds: float = 60.0                # the bound of one round (each probe's ssh timeout)
    token_file: Optional[str] = None           # the agents' token, as a path on the nodes
    agent_port: Optional[int] = None
    isolate: bool = True
    isolation_rounds: int = 6                  # at most this many rounds of retests


def peer_command(options: ProbeOptions, address: str) -> str:
    words = [options.command, "--peer", shlex.quote(address), "--json"]
    if options.token_file:
        words += ["--token-file", shlex.quote(options.token_file)]
    if options.agent_port:
        words += ["--agent-port", str(int(options.agent_port))]
    return " ".join(words)


def _t(value: Any, limit: int = 400) -> Optional[str]:
    if value is None:
        return None
    text = printable(str(value), False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _evidence(doc: Mapping[str, Any]) -> Dict[str, Any]:
    """The probe's own evidence, compact: when it was decided, TCP, rdma_cm, the burst and counter deltas."""
    probe = ((((doc.get("facts") or {}).get("sections") or {}).get("probe") or {}).get("data")) or {}
    if not isinstance(probe, dict):
        return {}
    burst: Dict[str, Any] = probe["burst"] if isinstance(probe.get("burst"), dict) else {}
    listener: Dict[str, Any] = probe["listener"] if isinstance(probe.get("listener"), dict) else {}
    peer_burst = next((e for e in reversed(listener.get("events") or []) if isinstance(e, dict)
                       and e.get("ev") == "burst"), {})
    tcp = [{"port": t.get("port"), "outcome": t.get("outcome")} for t in probe.get("tcp") or [] if isinstance(t, dict)]
    cm: Dict[str, Any] = probe["cm"] if isinstance(probe.get("cm"), dict) else {}
    return {
        "network_seconds": probe.get("network_seconds"),
        "tcp": tcp[:4],
        "agent": (probe.get("agent") or {}).get("state") if isinstance(probe.get("agent"), dict) else None,
        "cm": {k: cm.get(k) for k in ("state", "event", "errno", "phase") if cm.get(k) is not None},
        "burst": {k: burst.get(k) for k in ("state", "gbps", "bytes", "seconds") if burst.get(k) is not None},
        "counters": {"client": (burst.get("deltas") or {}) if burst else {},
                     "agent": peer_burst.get("deltas") or {}},
    }


def classify(a: str, b: str, address: str, record: Dict[str, Any], doc: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """One pair's record from a's node record and, when it printed one, its check --peer result."""
    pair: Dict[str, Any] = {"a": a, "b": b, "address": address, "outcome": "not-run", "status": None,
                            "cause": None, "rule": None, "summary": None, "rung": None, "rung_number": None,
                            "rungs": [], "evidence": {}, "seconds": record.get("seconds"), "error": None}
    if doc is None:
        pair["error"] = record.get("summary")
        pair["summary"] = f"the probe did not run on {a}: {record.get('summary')}"
        return pair
    rungs = [r for r in doc.get("rungs") or [] if isinstance(r, dict) and str(r.get("name", "")).startswith("peer-")]
    pair["rungs"] = [{"name": r.get("name"), "state": r.get("state"), "detail": _t(r.get("detail"))} for r in rungs]
    pair["evidence"] = _evidence(doc)
    verdict = doc.get("verdict") or {}
    pair["status"] = verdict.get("status")
    if not rungs:
        pair["error"] = "its check printed no probe rungs (an rdmadoctor without check --peer's probe?)"
        pair["summary"] = f"the probe did not run on {a}: {pair['error']}"
        return pair
    broken = next((r for r in rungs if r.get("state") == "failed"), None)
    warned = next((r for r in rungs if r.get("state") == "warning"), None)
    unseen = [r for r in rungs if r.get("state") in ("not-inspected", "skipped")]
    focus = broken or warned
    if broken is not None:
        pair["outcome"] = "failed"
    elif unseen:
        pair["outcome"] = "incomplete"
    elif warned is not None:
        pair["outcome"] = "warning"
    else:
        pair["outcome"] = "passed"
    if focus is not None:
        pair["rung"] = focus.get("name")
        pair["rung_number"] = PROBE_RUNGS.index(focus["name"]) + 1 if focus.get("name") in PROBE_RUNGS else None
        top = next((f for f in doc.get("findings") or [] if isinstance(f, dict) and f.get("rung") == focus.get("name")
                    and not f.get("explained_by") and f.get("severity") in ("fail", "warn")), None)
        source = top or verdict
        pair["cause"] = _t(source.get("cause"), 80)
        pair["rule"] = _t(source.get("rule"), 80)
        pair["summary"] = _t(source.get("title") if top else source.get("summary")) or _t(focus.get("detail"))
    elif pair["outcome"] == "incomplete":
        pair["rung"] = unseen[0].get("name")
        pair["summary"] = _t(unseen[0].get("detail"))
    else:
        pair["summary"] = _t(next((r.get("detail") for r in rungs if r.get("name") == "peer-bandwidth"), None)) \
            or "every probe rung passed"
    return pair


def ssh_prober(shell: Any, options: ProbeOptions, addresses: Mapping[str, str]) -> Prober:
    """Probes one round over ssh: a's check --peer b for every pair, all at once, each bounded by the round."""
    def probe(pairs: List[Tuple[str, str]], number: int, purpose: str) -> List[Dict[str, Any]]:
        commands = {a: peer_command(options, addresses[b]) for a, b in pairs}
        replies = shell.run(commands)
        out = []
        for a, b in pairs:
            reply = replies[a]
            record = node_records.from_reply(reply, shell.timeout)
            doc = None
            if record["state"] == "checked":
                try:
                    doc = node_records.result_document(reply.stdout, f"{a}'s output")
                except jsonio.JsonInputError:
                    doc = None
            pair = classify(a, b, addresses[b], record, doc)
            pair.update(round=number, purpose=purpose)
            out.append(pair)
        return out
    return probe


# -- isolation ------------------------------------------------------------------------------------------

def _references(results: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """Per node: how many plan probes it passed as client and as agent, and how many it failed."""
    score: Dict[str, Dict[str, int]] = {}
    for p in results:
        for node, role in ((p["a"], "client"), (p["b"], "agent")):
            s = score.setdefault(node, {"client": 0, "agent": 0, "failed": 0})
            if p["outcome"] in GOOD:
                s[role] += 1
            elif p["outcome"] == "failed":
                s["failed"] += 1
    return score


def passed_already(results: Sequence[Dict[str, Any]]) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """(node, role) -> a probe of the plan it passed in that role: the node works in that role, so a failure of
    one of its pairs in the same role is not its own, and needs no retest."""
    out: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for p in results:
        if p["outcome"] in GOOD:
            out.setdefault((p["a"], "client"), p)
            out.setdefault((p["b"], "agent"), p)
    return out


def retests(results: Sequence[Dict[str, Any]], known: Optional[Mapping[Tuple[str, str], Any]] = None
            ) -> Dict[Tuple[str, str], Optional[Tuple[str, str]]]:
    """For every node of a failed pair, in the role it had there (unless `known` already holds a probe that
    answers it): the retest pair against a reference node that passed (in the other role if it can), or None
    when no node passed anything."""
    known = known or {}
    score = _references(results)
    failed_with: Dict[str, set] = {}
    for p in results:
        if p["outcome"] == "failed":
            failed_with.setdefault(p["a"], set()).add(p["b"])
            failed_with.setdefault(p["b"], set()).add(p["a"])
    used: Dict[str, int] = {}
    out: Dict[Tuple[str, str], Optional[Tuple[str, str]]] = {}
    for p in results:
        if p["outcome"] != "failed":
            continue
        for suspect, role in ((p["a"], "client"), (p["b"], "agent")):
            if (suspect, role) in out or (suspect, role) in known:
                continue
            other = "agent" if role == "client" else "client"
            # a reference passed something; one that has not failed with the suspect yet comes first (a bad node
            # failed with everyone, and then retesting it with a node that passed elsewhere is still the test);
            # then the fewest failures, a pass in the role the reference will take, the least used
            against = failed_with.get(suspect, set())
            candidates = [n for n, s in score.items() if n not in (p["a"], p["b"]) and s["client"] + s["agent"] > 0]
            candidates.sort(key=lambda n: (n in against, score[n]["failed"], score[n][other] == 0,
                                           used.get(n, 0), n))
            if not candidates:
                out[(suspect, role)] = None
                continue
            ref = candidates[0]
            used[ref] = used.get(ref, 0) + 1
            out[(suspect, role)] = (suspect, ref) if role == "client" else (ref, suspect)
    return out


def judge(results: Sequence[Dict[str, Any]],
          again: Mapping[Tuple[str, str], Optional[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """Whom each failed pair blames, from its two retests: grouped into blamed nodes, links, both, undetermined."""
    verdicts = []
    for p in results:
        if p["outcome"] != "failed":
            continue
        ra, rb = again.get((p["a"], "client")), again.get((p["b"], "agent"))
        a_bad, b_bad = bool(ra and ra["outcome"] == "failed"), bool(rb and rb["outcome"] == "failed")
        a_ok, b_ok = bool(ra and ra["outcome"] in GOOD), bool(rb and rb["outcome"] in GOOD)
        source: Dict[str, Any] = p
        if a_bad and b_ok and ra is not None:
            kind, nodes, source = "node", [p["a"]], ra
        elif b_bad and a_ok and rb is not None:
            kind, nodes, source = "node", [p["b"]], rb
        elif a_ok and b_ok:
            kind, nodes, source = "link", [p["a"], p["b"]], p
        elif a_bad and b_bad:
            kind, nodes, source = "both", [p["a"], p["b"]], p
        else:
            why = []
            for r, who in ((ra, p["a"]), (rb, p["b"])):
                if r is None:
                    why.append(f"{who}: no node passed a probe to retest it against")
                elif r["outcome"] not in GOOD + ("failed",):
                    why.append(f"{who}: its retest {r['outcome']}")
            kind, nodes, source = "undetermined", [p["a"], p["b"]], p
            verdicts.append({"pair": f"{p['a']}->{p['b']}", "kind": kind, "nodes": nodes, "cause": p.get("cause"),
                             "rule": p.get("rule"), "summary": f"{p.get('summary')} (not isolated: {'; '.join(why)})"})
            continue
        verdicts.append({"pair": f"{p['a']}->{p['b']}", "kind": kind, "nodes": nodes,
                         "cause": source.get("cause") or p.get("cause"), "rule": source.get("rule") or p.get("rule"),
                         "summary": source.get("summary") or p.get("summary")})
    return _cut(_grouped(verdicts), results)


def _cut(entries: List[Dict[str, Any]], results: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Many blamed links that all cross between one small set of nodes and the rest are one fault: those nodes
    reach each other but not the others (a switch, its uplink, a VLAN or a PFC setting they share). The set is the
    nodes whose blamed links are more than half of their probes; the links are folded into one `group` entry when
    every one of them has exactly one end in it."""
    links = [e for e in entries if e["kind"] == "link"]
    if len(links) < 4:
        return entries
    probes: Dict[str, int] = {}
    for p in results:
        for n in (p["a"], p["b"]):
            probes[n] = probes.get(n, 0) + 1
    degree: Dict[str, int] = {}
    for e in links:
        for n in e["nodes"]:
            degree[n] = degree.get(n, 0) + 1
    group = {n for n, d in degree.items() if d * 2 > probes.get(n, 0)}
    if not group or len(group) * 2 > len(probes) or not all(len(group & set(e["nodes"])) == 1 for e in links):
        return entries
    causes: Dict[str, int] = {}
    for e in links:
        causes[e["cause"] or "unknown"] = causes.get(e["cause"] or "unknown", 0) + 1
    cause = max(causes, key=lambda c: causes[c])
    names = sorted(group)
    entry = {"kind": "group", "nodes": names, "cause": None if cause == "unknown" else cause,
             "rule": links[0].get("rule"),
             "summary": f"these {len(names)} nodes pass between themselves and fail with the others: what they share "
                        "(a switch, its uplink, a VLAN, PFC) is the suspect",
             "pairs": [x for e in links for x in e["pairs"]]}
    return [entry] + [e for e in entries if e["kind"] != "link"]


def _grouped(verdicts: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per blamed node (all the failed pairs it explains), per link, per undetermined pair."""
    by_key: Dict[Any, Dict[str, Any]] = {}
    for v in verdicts:
        key = (v["kind"], tuple(v["nodes"]) if v["kind"] != "link" else tuple(sorted(v["nodes"])))
        entry = by_key.setdefault(key, {"kind": v["kind"], "nodes": list(key[1]), "cause": v["cause"],
                                        "rule": v["rule"], "summary": v["summary"], "pairs": []})
        entry["pairs"].append(v["pair"])
    order = {"group": 0, "node": 1, "link": 2, "both": 3, "undetermined": 4}
    return sorted(by_key.values(), key=lambda e: (order[e["kind"]], -len(e["pairs"]), e["nodes"]))


def isolate(results: List[Dict[str, Any]], prober: Prober, first_round: int, max_rounds: int
            ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[List[Tuple[str, str]]]]:
    """Run the retests of every failed pair (packed into rounds, at most `max_rounds`) and judge.
    Returns (the retests' pair records, the blame, the retest rounds run)."""
    known = passed_already(results)
    wanted = retests(results, known)
    pairs = list(dict.fromkeys(p for p in wanted.values() if p is not None))
    rounds = schedule.pack(pairs)
    ran_rounds = rounds[:max_rounds]
    done: Dict[Tuple[str, str], Dict[str, Any]] = {}
    records: List[Dict[str, Any]] = []
    for i, rnd in enumerate(ran_rounds):
        for rec in prober(rnd, first_round + i, "isolate"):
            done[(rec["a"], rec["b"])] = rec
            records.append(rec)
    again: Dict[Tuple[str, str], Optional[Dict[str, Any]]] = dict(known)
    for key, pair in wanted.items():
        if pair is None:
            again[key] = None
        elif pair in done:
            again[key] = done[pair]
        else:
            again[key] = {"outcome": "not-run", "summary": "beyond the isolation rounds allowed"}
    for rec in records:
        pair = (rec["a"], rec["b"])
        rec["retest_of"] = sorted({f"{p['a']}->{p['b']}" for p in results if p["outcome"] == "failed"
                                   and pair in (wanted.get((p["a"], "client")), wanted.get((p["b"], "agent")))})
    return records, judge(results, again), ran_rounds


# -- the whole run --------------------------------------------------------------------------------------

def probe_plan(members: Sequence[str], options: ProbeOptions, prober: Prober
               ) -> Tuple[schedule.Plan, List[Dict[str, Any]], List[Dict[str, Any]], List[Dict[str, Any]], int]:
    """The plan's rounds, then the isolation: (plan, plan pairs, retest pairs, blame, isolation rounds run)."""
    plan = schedule.plan(members, options.rounds, options.seed)
    plan.check()
    results: List[Dict[str, Any]] = []
    for i, rnd in enumerate(plan.rounds):
        results.extend(prober(rnd, i + 1, "plan"))
    extra: List[Dict[str, Any]] = []
    blame: List[Dict[str, Any]] = []
    iso_rounds = 0
    if options.isolate and any(p["outcome"] == "failed" for p in results):
        extra, blame, ran = isolate(results, prober, len(plan.rounds) + 1, options.isolation_rounds)
        iso_rounds = len(ran)
    return plan, results, extra, blame, iso_rounds


def run(names: Sequence[str], shell: Any, options: ProbeOptions, addresses: Optional[Mapping[str, str]] = None,
        prober: Optional[Prober] = None, records: Optional[List[Dict[str, Any]]] = None,
        check_timeout: Optional[float] = None) -> Dict[str, Any]:
    """Check every node (its state and RDMA address), probe the pairs among those that answered, isolate."""
    started = time.monotonic()
    if records is None:
        saved = shell.timeout
        shell.timeout = check_timeout or saved
        records = fleet_check.over_ssh(names, shell, options.command + " --json")
        shell.timeout = saved
    by_node = {r["node"]: r for r in records}
    known = dict(addresses or {})
    members, excluded = [], []
    for n in names:
        r = by_node.get(n)
        address = known.get(n) or (r or {}).get("address")
        if r is None or r["state"] != "checked":
            excluded.append({"node": n, "reason": (r or {}).get("summary") or "not checked"})
        elif not address:
            excluded.append({"node": n, "reason": "no single IPv4 address on an RDMA port in its facts (give one "
                                                  "with --addresses)"})
        else:
            known[n] = address
            members.append(n)
    shell_prober = prober or ssh_prober(shell, options, known)
    plan, results, extra, blame, iso_rounds = probe_plan(members, options, shell_prober)
    doc = report.build("probe", records, seconds=None, source="ssh")
    doc["probe"] = {
        "design": "each pair (a, b): `rdmadoctor check --peer <b> --json` on a over ssh; b's agent serves it",
        "plan": plan.stats(options.round_seconds),
        "isolation_rounds": iso_rounds,
        "members": len(members),
        "excluded": excluded,
        "addresses": {n: known[n] for n in members},
        "pairs": results + extra,
        "blame": blame,
    }
    doc["status"] = _status(doc)
    doc["seconds"] = round(time.monotonic() - started, 3)
    return doc


def _status(doc: Dict[str, Any]) -> str:
    pairs = [p for p in doc["probe"]["pairs"] if p.get("purpose") == "plan"]
    outcomes = {p["outcome"] for p in pairs}
    if "failed" in outcomes:
        return "failure"
    if outcomes & {"not-run", "incomplete"} or doc["probe"]["excluded"] or not pairs:
        return "unknown"
    if "warning" in outcomes:
        return "warning"
    return "ok"
