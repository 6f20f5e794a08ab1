"""Runs and facts in, findings and one verdict out.

Every rule is tried in every scope it is written for (each run, each server/client pair, the whole
input, the facts) where the messages its condition needs are present (conditions.needed_messages: a rule
that reads a message the input lacks cannot hold). Then the findings are ranked: a cause explains the
symptoms (and lesser causes) it lists in `explains`; the verdict is the highest-ranked cause nothing else
explains. When only symptoms are left, the verdict says so (`unknown`) and names the candidates and what
to collect.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import partial
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from rdmadoctor.engine import conditions, rules as rule_table, template
from rdmadoctor.engine.conditions import Scope
from rdmadoctor.engine.rules import Rule
from rdmadoctor.knowledge.perftest import LONG, SHORT
from rdmadoctor.model import CONFIDENCE_RANK, RUNGS, SEVERITY_RANK, Evidence, Finding, Later, Run, Verdict  # noqa: F401


def pairs(runs: Sequence[Run]) -> List[Tuple[Run, Run]]:
    """Server and client runs of one producer matched: first those whose printed queue pair addresses show that they
    talked to each other (exchanged()); the rest in order (the i-th server with the i-th client), or, when runs of the
    input were let go, by the place each had among all the input's runs (`Run.pair`), so that a run let go leaves its
    partner alone instead of shifting every later pair."""
    sides: Dict[Tuple[Any, str], List[Run]] = {}
    for r in runs:
        if r.side in ("server", "client"):
            sides.setdefault((r.producer, r.side), []).append(r)
    out: List[Tuple[Run, Run]] = []
    for producer in dict.fromkeys(r.producer for r in runs):
        servers, clients = sides.get((producer, "server"), []), sides.get((producer, "client"), [])
        talked = exchanged(servers, clients)
        if talked:
            taken = {id(r) for pair in talked for r in pair}
            servers = [s for s in servers if id(s) not in taken]
            clients = [c for c in clients if id(c) not in taken]
        if any(r.pair is not None for r in servers) or any(r.pair is not None for r in clients):
            at = {c.pair: c for c in clients if c.pair is not None}
            rest = [(s, at[s.pair]) for s in servers if s.pair in at]
        else:
            rest = list(zip(servers, clients))
        order = {id(s): i for i, s in enumerate(sides.get((producer, "server"), []))}
        out += sorted(talked + rest, key=lambda pair: order[id(pair[0])])
    return out


# the messages that are another tool's address lines (the rdma-core example programs' "local address: LID 0x0000,
# QPN 0x000011, PSN 0x01a566"), with their side, QPN and PSN in hex
ADDRESS_MESSAGES = frozenset({"VERBS.EX_ADDRESS"})


def _queue_pairs(run: Run, role: str) -> FrozenSet[Tuple[int, int]]:
    """(QPN, PSN) of each `role` ("local" or "remote") address the run printed."""
    found = {(a.qpn, a.psn) for a in run.addresses if a.role == role and a.qpn is not None and a.psn is not None}
    for m in run.messages:
        if m.id in ADDRESS_MESSAGES and m.fields.get("side") == role:
            try:
                found.add((int(m.fields["qpn"], 16), int(m.fields["psn"], 16)))
            except (KeyError, TypeError, ValueError):
                continue
    return frozenset(found)


def exchanged(servers: Sequence[Run], clients: Sequence[Run]) -> List[Tuple[Run, Run]]:
    """The servers and clients whose addresses show that they are the two ends of one test: each side's local queue
    pairs (number and starting PSN, which perftest draws at random) are the ones the other printed as remote. A client
    that retried after a failed attempt, or the logs of two tests given in another order, pair by what the two
    sides exchanged, not by where they stand."""
    waiting: Dict[Tuple[FrozenSet[Tuple[int, int]], FrozenSet[Tuple[int, int]]], List[Run]] = {}
    for c in clients:
        local, remote = _queue_pairs(c, "local"), _queue_pairs(c, "remote")
        if local and remote:
            waiting.setdefault((remote, local), []).append(c)
    out: List[Tuple[Run, Run]] = []
    for s in servers if waiting else ():
        match = waiting.get((_queue_pairs(s, "local"), _queue_pairs(s, "remote")))
        if match:
            out.append((s, match.pop(0)))
    return out


# The runs a rule of one producer (or of any: None) is tried on and their pairs, for one list of runs: rules
# share them instead of each filtering and pairing every run of the input again.
_Prepared = Dict[Optional[str], Tuple[List[Run], List[Tuple[Run, Run]]]]


def _prepare(runs: Sequence[Run]) -> _Prepared:
    prepared: _Prepared = {None: (list(runs), pairs(runs))}
    of_producer: Dict[Optional[str], List[Run]] = {}
    for r in runs:
        of_producer.setdefault(r.producer, []).append(r)
    for producer, own in of_producer.items():
        if producer is not None:
            prepared[producer] = (own, pairs(own))
    return prepared


def scopes_for(rule: Rule, runs: Sequence[Run], ctx: Dict[str, Any],
               prepared: Optional[_Prepared] = None) -> Iterable[Scope]:
    """Where a rule is tried: each run (with its partner), each server/client pair, the whole input once,
    or the facts view (once, or once an item of its `each` list). `prepared`: `_prepare(runs)`, when the
    caller tries many rules on the same runs."""
    if rule.scope in ("facts", "bench"):
        return _fact_scopes(rule, runs, ctx)
    if prepared is None:
        prepared = _prepare(runs)
    runs, matched = prepared.get(rule.producer, ([], []))
    if rule.producer is not None and not runs:
        return []
    if rule.scope == "run":
        return _run_scopes(runs, matched, ctx)
    if rule.scope == "pair":
        return (Scope(list(runs), ctx, server=s, client=c) for s, c in matched)
    if rule.scope == "input":
        s, c = matched[0] if matched else (None, None)
        return [Scope(list(runs), ctx, server=s, client=c)]
    return []


def _run_scopes(runs: Sequence[Run], matched: List[Tuple[Run, Run]], ctx: Dict[str, Any]) -> Iterable[Scope]:
    partner: Dict[int, Tuple[Optional[Run], Optional[Run]]] = {}
    for s, c in matched:
        partner[id(s)] = (s, c)
        partner[id(c)] = (s, c)
    shared = list(runs)                  # the scopes only read it: one copy for all
    for run in runs:
        server, client = partner.get(id(run), (run if run.side == "server" else None,
                                               run if run.side == "client" else None))
        yield Scope(shared, ctx, run=run, server=server, client=client)


def _fact_scopes(rule: Rule, runs: Sequence[Run], ctx: Dict[str, Any]) -> Iterable[Scope]:
    """A bench rule is tried on a bench view only, a fact rule on a host's view only."""
    view = ctx.get("facts_view")
    if view is None or (rule.scope == "bench") != ("bench" in view):
        return
    if rule.each:
        for item in conditions._lookup(view, rule.each) or []:
            yield Scope(list(runs), ctx, item=item)
    else:
        yield Scope(list(runs), ctx)


def fix_command(spec: Dict[str, Any], bindings: Dict[str, Any], ctx: Dict[str, Any]) -> Optional[str]:
    """The side's own command line with the options set as the rule says ("--qp=10"), every word shell-quoted:
    pasted into a POSIX shell it runs exactly these words, whatever the log held (`--ib-dev=mlx5_1;id`,
    backticks, `$(...)`). The result is template.Quoted, so a fix text inserts it as it is."""
    run: Optional[Run] = bindings.get(spec.get("run", "run"))
    settings = {name: template.render(str(value), bindings, ctx) for name, value in spec.get("set", {}).items()}
    remove = set(spec.get("remove", []))
    tool = (run.command.tool if run is not None and run.command else None) or (run.tool if run else None)
    if spec.get("tool") and bindings.get(spec["tool"]) is not None:
        tool = bindings[spec["tool"]].tool or tool        # run the other side's binary instead
    if tool is None:
        other = bindings.get("other") or bindings.get("client") or bindings.get("server")
        tool = other.tool if other is not None and other.tool else "ib_write_bw"
    words = [tool]
    if run is not None and run.command:
        words += _strip_options(run.command.argv[1:], set(settings) | remove)
    for name, value in settings.items():
        if value in ("", "off", "false", "False"):
            continue
        words.append(f"--{name}" if value in ("on", "true", "True") else f"--{name}={value}")
    command = template.shell_words(words)
    if run is None or not run.command:         # the options are not known: say so beside the command
        head, _, rest = command.partition(" ")
        command = template.Quoted(f"{head} <same options as before>" + (f" {rest}" if rest else ""))
    return command


def _strip_options(argv: List[str], names: set) -> List[str]:
    """argv without the options named (long names), in any spelling perftest accepts."""
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        name, takes = None, False
        if tok.startswith("--"):
            long_name = tok[2:].split("=")[0]
            if long_name in LONG:
                name, takes = long_name, LONG[long_name] and "=" not in tok
        elif tok.startswith("-") and len(tok) >= 2 and tok[1] in SHORT:
            name, has_arg = SHORT[tok[1]]
            takes = has_arg and len(tok) == 2
            if len(tok) > 2 and not has_arg:        # bundled flags (-aR): keep the others
                rest = "".join(ch for ch in tok[1:] if SHORT.get(ch, ("",))[0] not in names)
                if rest != tok[1:]:
                    if rest:
                        out.append("-" + rest)
                    i += 1
                    continue
                name = None
        if name in names:
            i += 2 if takes else 1
            continue
        out.append(tok)
        i += 1
    return out


def make_finding(rule: Rule, scope: Scope, ctx: Dict[str, Any]) -> Finding:
    bound = scope.bound
    # what the templates name, as a tuple (BOUND's order): a rule may hold on thousands of runs, and a finding keeps
    # this until its texts are read
    values = (scope.run, scope.server, scope.client, scope.other(), bound.get("message"), bound.get("param"),
              bound.get("fact"), bound.get("setting"), scope.item)
    evidence: List[Evidence] = []
    for e in scope.evidence:
        if e not in evidence:
            evidence.append(e)
    evidence.sort(key=lambda e: (e.source, e.line or 0))
    key = _Texts(rule, values, ctx).render(rule.key) if rule.key else _default_key(scope)
    later: Any = Later(partial(_texts, rule, values, ctx))    # each text field reads its own from it (model._Text)
    return Finding(rule=rule.id, cause=rule.cause, severity=rule.severity, title=later, explanation=later,
                   evidence=evidence, fix=later, confidence=rule.confidence, kind=rule.kind,
                   candidates=list(rule.candidates), next_steps=later,
                   refs=list(rule.refs), rung=rule.rung, probe_rung=rule.probe_rung, key=key)


BOUND = ("run", "server", "client", "other", "message", "param", "fact", "setting", "item")


def _texts(rule: Rule, values: Tuple[Any, ...], ctx: Dict[str, Any]) -> Dict[str, Any]:
    """A finding's title, explanation, fix and next steps, from its rule's templates."""
    lang = ctx.get("lang")
    texts = _Texts(rule, values, ctx)
    return {"title": texts.render(rule.text("title", lang)),
            "explanation": texts.render(rule.text("why", lang)).strip(),
            "fix": [texts.render_fix(f) for f in rule.text("fix", lang)],
            "next_steps": [texts.render_fix(s) for s in rule.text("next_steps", lang)]}


class _Texts:
    """A rule's templates rendered for one finding: the values it bound, the facts view and ctx's public part."""

    def __init__(self, rule: Rule, values: Tuple[Any, ...], ctx: Dict[str, Any]):
        self.ctx = ctx
        self.bindings: Dict[str, Any] = dict(zip(BOUND, values))
        self.bindings.update(facts=ctx.get("facts_view"), ctx=ctx.get("public", {}))
        if rule.fix_command:
            self.bindings["fix_command"] = fix_command(rule.fix_command, self.bindings, ctx)

    def render(self, text: str) -> str:
        return reflow(template.render(text, self.bindings, self.ctx))

    def render_fix(self, text: str) -> str:
        # the parts between backticks are commands: their values are shell-quoted
        parts = text.split("`")
        if len(parts) % 2 == 0:
            return self.render(text)
        return reflow("`".join(template.render(part, self.bindings, self.ctx, shell=i % 2 == 1)
                               for i, part in enumerate(parts)))


_CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
_CJK_PUNCTUATION = re.compile(r"[\u3000-\u303f\uff00-\uffef]")
_OPENING, _CLOSING = "“‘", "”’"


def _blank_between(before: str, after: str) -> bool:
    """Whether joining two wrapped lines needs a blank: not between Chinese characters, nor beside Chinese
    punctuation (、，。), nor inside curly quotes, whose own glyphs carry the space."""
    if _CJK_PUNCTUATION.match(before) or _CJK_PUNCTUATION.match(after) or before in _OPENING or after in _CLOSING:
        return False
    chinese = (_CJK.match(before) or before in _CLOSING, _CJK.match(after) or after in _OPENING)
    return not all(chinese)


def _join(lines: List[str]) -> str:
    """Lines of one paragraph joined with a blank where the language puts one (see _blank_between)."""
    out = ""
    for line in (" ".join(piece.split()) for piece in lines):
        if not line:
            continue
        if out and _blank_between(out[-1], line[0]):
            out += " "
        out += line
    return out


def reflow(text: str) -> str:
    """A TOML multi-line string reads as wrapped prose: join its lines, keep its paragraphs."""
    paragraphs = [_join(p.split("\n")) for p in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _digest(item: Any) -> str:
    """A stable name for an item with no label: the same item gives the same key on every run."""
    text = json.dumps(item, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:12]


def _default_key(scope: Scope) -> str:
    parts = []
    for run in (scope.run, scope.server, scope.client):
        if run is not None:
            parts.append(f"{run.source}#{run.index}")
    if scope.item is not None:
        parts.append(str(scope.item.get("label") or scope.item.get("name") or _digest(scope.item)))
    return "|".join(parts) or "input"


def _cite(cond: Dict[str, Any], scope: conditions.Scope) -> None:
    """A rule's `cite`: its evidence joins the finding's when it holds; it binds no name and decides nothing."""
    trial = scope.fork()
    if conditions.holds(cond, trial):
        scope.evidence.extend(trial.evidence)


class _Present:
    """The message ids of the input and of each run, against which a rule's needed_messages() are met before the rule
    is tried: most rules of the table read messages that most inputs do not hold."""

    def __init__(self, runs: Sequence[Run], ctx: Dict[str, Any]):
        self.input = frozenset(m.id for group in (runs, ctx.get("runs") or ()) for run in group for m in run.messages)
        self._runs: Dict[int, Tuple[Run, FrozenSet[str]]] = {}

    def needs(self, rule: Rule) -> Optional[Tuple[FrozenSet[str], ...]]:
        """None when the input cannot hold the rule; else the id sets that each scope's run must meet."""
        clauses = conditions.needed_messages(rule.when)
        if any(not (ids & self.input) for _, ids in clauses):
            return None
        return tuple(ids for where, ids in clauses if where == "run" and rule.scope == "run")

    def in_run(self, needs: Tuple[FrozenSet[str], ...], run: Optional[Run]) -> bool:
        if run is None:
            return True
        kept = self._runs.get(id(run))
        if kept is None or kept[0] is not run:
            kept = self._runs[id(run)] = (run, frozenset(m.id for m in run.messages))
        return all(ids & kept[1] for ids in needs)


def find(runs: Sequence[Run], ctx: Dict[str, Any], table: Optional[Iterable[Rule]] = None) -> List[Finding]:
    rules = list(table if table is not None else rule_table.load())
    found: Dict[Tuple[str, Optional[str]], Finding] = {}
    ctx.pop("cited", None)
    prepared = _prepare(runs)
    present = _Present(runs, ctx)
    for stage in (False, True):                 # fallback rules see what the others left unexplained
        if stage:
            ctx["cited"] = {(e.source, e.line) for f in found.values() for e in f.evidence}
        for rule in rules:
            if rule.fallback != stage:
                continue
            needs = present.needs(rule)
            if needs is None:
                continue
            for scope in scopes_for(rule, runs, ctx, prepared):
                if needs and not present.in_run(needs, scope.run):
                    continue
                if conditions.holds(rule.when, scope):
                    if rule.cite is not None:
                        _cite(rule.cite, scope)
                    finding = make_finding(rule, scope, ctx)
                    found.setdefault((rule.id, finding.key), finding)
    ctx.pop("cited", None)
    conditions.release(ctx)         # the findings' texts, made later from ctx, read no condition's index
    return list(found.values())


def _rank(f: Finding, order: Dict[str, int], priority: Dict[str, int]) -> Tuple:
    rung = RUNGS.index(f.rung) if f.rung in RUNGS else len(RUNGS)
    return (SEVERITY_RANK[f.severity], 0 if f.kind == "cause" else 1, CONFIDENCE_RANK.get(f.confidence, 3),
            -priority.get(f.rule, 0), rung, order.get(f.rule, 0))


def rank(findings: List[Finding], table: Optional[Iterable[Rule]] = None) -> List[Finding]:
    """Mark what each cause explains, then order: unexplained before explained, worst first."""
    rules = list(table if table is not None else rule_table.load())
    by_id = {r.id: r for r in rules}
    order = {r.id: i for i, r in enumerate(rules)}
    priority = {r.id: r.priority for r in rules}
    ordered = sorted(findings, key=lambda f: _rank(f, order, priority))
    # A cause explains the symptoms it produces; a symptom may also explain (supersede) a finding whose
    # conclusion it shows to be premature (e.g. "rejected" with many QPs is not just "no server").
    # Each finding is looked at through the findings of the rules it explains that are not yet explained (a list
    # per rule, emptied as they are), not through every finding: hundreds of runs give thousands of findings.
    unexplained: Dict[str, List[Finding]] = {}
    for finding in ordered:
        unexplained.setdefault(finding.rule, []).append(finding)
    for finding in ordered:
        if finding.explained_by:
            continue
        for rule_id in (set(by_id[finding.rule].explains) if finding.rule in by_id else ()):
            left = []
            for other in unexplained.get(rule_id, ()):
                if other.explained_by is not None:
                    continue
                if other is finding:
                    left.append(other)
                else:
                    other.explained_by = finding.rule
            if rule_id in unexplained:
                unexplained[rule_id] = left
    return sorted(ordered, key=lambda f: (f.explained_by is not None, _rank(f, order, priority)))
