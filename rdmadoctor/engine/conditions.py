"""The small interpreter of a rule's `when`: declarative conditions, never `eval`.

    { all = [..] } { any = [..] } { not = {..} }
    { message = "X06" | [ids] | "*", kind = "error", of = "run|other|server|client|any|input",
      fields = { name = value | [values] } }
    { differ = "num_qps" }                          both sides show the parameter, with different values
    { param = "size", of = "client", op = ">", versus = "server" | value = 65536 }
    { option = "rdma_cm", of = "client" }           the pasted command line has the option
    { feature = "garbage_row", of = "run", op = ">=", value = .. }   (truthy without op)
    { exists = "other" | "server" | "client" }      that side's log is in the input
    { side = "server" }                              the run is the server's
    { setting = "NCCL_IB_GID_INDEX", op = "==", value = 0 }            an environment/MCA setting the paste shows
    { fact = "limits.memlock.soft", op = "<", value = 131072 }        facts (check)
    { item = "state", op = "!=", value = "ACTIVE" }                   the `each` item (check)

A condition that holds records its evidence (the lines it read) and may bind names for the
rule's templates: `message`, `param`, `fact`.
"""
from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from rdmadoctor.views import params
from rdmadoctor.views import bysource
from rdmadoctor.model import Evidence, Message, Run

MAX_EVIDENCE_PER_CONDITION = 6
# what the conditions keep in ctx while the rules are tried (release() lets go of it)
_FOUND_IN_EVERY_RUN, _INPUT_INDEX, _RUN_INDEX = "_found_in_every_run", "_messages_by_id", "_messages_by_run"
_MEMOS = (_FOUND_IN_EVERY_RUN, _INPUT_INDEX, _RUN_INDEX)

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}


@dataclass
class Scope:
    runs: List[Run]
    ctx: Dict[str, Any]
    run: Optional[Run] = None
    server: Optional[Run] = None
    client: Optional[Run] = None
    item: Optional[Dict[str, Any]] = None
    bound: Dict[str, Any] = field(default_factory=dict)
    evidence: List[Evidence] = field(default_factory=list)

    def other(self) -> Optional[Run]:
        if self.run is None:
            return None
        if self.run is self.server:
            return self.client
        if self.run is self.client:
            return self.server
        return None

    def pick(self, of: Optional[str]) -> Sequence[Run]:
        """The runs a condition looks at (to read only: every run of the input, or of the scope, is the list they are
        held in, not a copy)."""
        default = "run" if self.run is not None else "any"
        which = of or default
        if which == "run":
            return [self.run] if self.run else []
        if which == "other":
            other = self.other()
            return [other] if other else []
        if which == "server":
            return [self.server] if self.server else []
        if which == "client":
            return [self.client] if self.client else []
        if which == "input":                 # every run of the input, of any producer (a kernel line, a listing)
            return self.ctx.get("runs") or self.runs
        if which == "any":
            if self.server is not None or self.client is not None:
                return [r for r in (self.server, self.client) if r is not None]
            return self.runs
        raise ValueError(f"unknown 'of': {which}")

    def fork(self) -> "Scope":
        return Scope(self.runs, self.ctx, self.run, self.server, self.client, self.item, dict(self.bound), [])

    def absorb(self, other: "Scope") -> None:
        self.bound.update(other.bound)
        self.evidence.extend(other.evidence)


def _norm(value: Any) -> Any:
    return _norm_text(value) if isinstance(value, str) else value


@lru_cache(maxsize=1 << 12)
def _norm_text(value: str) -> Any:
    # a field's values repeat across thousands of messages (a device, a status name): each is read once
    v = value.strip()
    try:
        return int(v, 0)
    except ValueError:
        return v.lower()


def _field_ok(actual: Any, expected: Any) -> bool:
    if expected == "*":
        return actual is not None
    if isinstance(expected, list):
        return any(_field_ok(actual, e) for e in expected)
    return _norm(actual) == _norm(expected)


def _compare(actual: Any, op: Optional[str], expected: Any) -> bool:
    if op is None:
        return bool(actual)
    if op == "known":
        return actual is not None
    if op == "unknown":
        return actual is None
    if actual is None:
        return False
    try:
        return bool(_OPS[op](actual, expected))
    except TypeError:
        return False


def _message(cond: Dict[str, Any], scope: Scope) -> bool:
    cited = scope.ctx.get("cited")          # set only for fallback rules: lines other findings explain
    whole = _every_run(scope, cond.get("of"))
    if whole is None:
        found = _messages_found(cond, scope, cited)
    else:
        # what a condition finds in every run of a list depends only on the condition, the list and `cited`: a rule
        # tried on each of thousands of runs without a partner reads every message of the input once, not once a run
        memo = scope.ctx.setdefault(_FOUND_IN_EVERY_RUN, {})
        hit = memo.get((id(cond), id(whole)))
        if hit is not None and hit[0] is cond and hit[1] is whole and hit[2] == len(whole) and hit[3] is cited:
            found = hit[4]
        else:
            found = _messages_found(cond, scope, cited)
            memo[(id(cond), id(whole))] = (cond, whole, len(whole), cited, found)
    if not found:
        return False
    scope.bound.setdefault("message", found[0])
    for m in found[:MAX_EVIDENCE_PER_CONDITION]:
        scope.evidence.append(Evidence(m.source, m.text, m.line))
    return True


def release(ctx: Dict[str, Any]) -> None:
    """Lets go of what the conditions kept in ctx to answer fast (an index of every message, by run and for the
    input): once every rule was tried, nothing asks."""
    for key in _MEMOS:
        ctx.pop(key, None)


def _every_run(scope: Scope, of: Optional[str]) -> Optional[Sequence[Run]]:
    """The list of runs a condition reads every run of (the input's, or the scope's when it has no server/client
    pair), or None when it reads only some."""
    picked = scope.pick(of)
    return picked if picked is scope.runs or picked is scope.ctx.get("runs") else None


def _messages_found(cond: Dict[str, Any], scope: Scope, cited: Optional[Set[Tuple[str, int]]]) -> List[Message]:
    ids = cond["message"] if isinstance(cond["message"], list) else [cond["message"]]
    wanted = cond.get("fields", {})
    kind = cond.get("kind")
    found: List[Message] = []
    for m in _candidates(scope, cond.get("of"), ids, kind):
        if ("*" not in ids and m.id not in ids) or (kind and m.kind != kind):
            continue
        if cited is not None and (m.source, m.line) in cited:
            continue
        if not wanted or all(_field_ok(m.fields.get(k), v) for k, v in wanted.items()):
            found.append(m)
            if len(found) == MAX_EVIDENCE_PER_CONDITION:      # all that is kept
                break
    return found


def _candidates(scope: Scope, of: Optional[str], ids: List[str], kind: Optional[str]) -> Iterable[Message]:
    """The messages of the runs `of` picks, in order; for the whole input or one run (a run is read by every rule of
    its producer, the input once per run by some), only those of the ids (or kind) asked, from an index of its
    messages built once per diagnosis."""
    runs = scope.ctx.get("runs")
    if of == "input" and runs:
        by_key = _index(scope.ctx.setdefault(_INPUT_INDEX, {}), runs, runs, len(runs))
    else:
        picked = scope.pick(of)
        if len(picked) != 1:
            return [m for run in picked for m in run.messages]
        by_key = _index(scope.ctx.setdefault(_RUN_INDEX, {}), picked[0], picked, len(picked[0].messages))
    if "*" in ids:
        keyed = by_key.get(("*", kind) if kind else "*", [])
    elif len(ids) == 1:
        keyed = by_key.get(ids[0], [])
    else:
        keyed = sorted((e for i in dict.fromkeys(ids) for e in by_key.get(i, [])), key=lambda e: e[0])
    return (m for _, m in keyed)


def _index(memo: Dict[int, Any], owner: object, runs: Sequence[Run], size: int) -> Dict[Any, List[Tuple[int, Message]]]:
    """The messages of the runs, each under its id, under ("*", its kind) and under "*", with its place (to merge
    the lists of several ids in order); built once for the `owner` (the input's list of runs, or the one run) while it
    is the `size` it was (`memo`: by the owner's id, with the owner, so that the id is never another's)."""
    cached = memo.get(id(owner))
    if cached is not None and cached[0] is owner and cached[1] == size:
        return cached[2]
    by_key: Dict[Any, List[Tuple[int, Message]]] = {}
    seq = 0
    for run in runs:
        for m in run.messages:
            entry = (seq, m)            # one tuple in the three lists (an input may hold 100,000 messages)
            by_key.setdefault(m.id, []).append(entry)
            by_key.setdefault(("*", m.kind), []).append(entry)
            by_key.setdefault("*", []).append(entry)
            seq += 1
    memo[id(owner)] = (owner, size, by_key)
    return by_key


def _value_evidence(run: Run, value: params.Value, name: str) -> Evidence:
    note = f"{run.side}: {params.label(name)} = {value.value}" + (" (default)" if value.source == "default" else "")
    return Evidence(run.source, value.text, value.line, note)


def _differ(cond: Dict[str, Any], scope: Scope) -> bool:
    name = cond["differ"]
    if scope.server is None or scope.client is None:
        return False
    diffs = params.differences(scope.server, scope.client, [name])
    if not diffs:
        return False
    _, a, b = diffs[0]
    scope.bound["param"] = {"name": name, "label": params.label(name), "option": params.option(name),
                            "server": a.value, "client": b.value}
    scope.evidence.append(_value_evidence(scope.server, a, name))
    scope.evidence.append(_value_evidence(scope.client, b, name))
    return True


def _param(cond: Dict[str, Any], scope: Scope) -> bool:
    name = cond["param"]
    runs = scope.pick(cond.get("of"))
    for run in runs:
        value = params.read(run, name)
        actual = value.value if value else None
        if "versus" in cond:
            others = scope.pick(cond["versus"])
            other_value = params.read(others[0], name) if others else None
            if other_value is None or value is None:
                continue
            ok = _compare(actual, cond.get("op", "!="), other_value.value)
            if ok:
                scope.evidence.append(_value_evidence(run, value, name))
                scope.evidence.append(_value_evidence(others[0], other_value, name))
        else:
            ok = _compare(actual, cond.get("op"), cond.get("value"))
            if ok and value is not None:
                scope.evidence.append(_value_evidence(run, value, name))
        if ok:
            return True
    return False


def _option(cond: Dict[str, Any], scope: Scope) -> bool:
    for run in scope.pick(cond.get("of")):
        if run.command and cond["option"] in run.command.options:
            scope.evidence.append(Evidence(run.source, run.command.text, run.command.line,
                                           f"{run.side}: command line has --{cond['option']}"))
            return True
    return False


def _feature(cond: Dict[str, Any], scope: Scope) -> bool:
    # imported on first use: check reads no run, and need not import the views of runs (about 17 ms)
    from rdmadoctor.views import features
    name = cond["feature"]
    for run in scope.pick(cond.get("of")):
        value = features.feature(run, name, scope.ctx)
        if _compare(value, cond.get("op"), cond.get("value")):
            scope.evidence.append(_feature_evidence(scope, run, name, value))
            return True
    return False


def _feature_evidence(scope: Scope, run: Run, name: str, value: Any) -> Evidence:
    """The line a feature rests on: its own line, the best result row, or where the output ends."""
    from rdmadoctor.views import features
    if isinstance(value, dict) and "quote" in value:
        # a record resting on a line of another run or file of the input (or on a fact) says which
        return Evidence(value.get("source", run.source), value["quote"], value.get("line"), value.get("note"))
    if isinstance(value, dict) and "line" in value:
        line, note = value["line"], None
    elif getattr(value, "line", None) is not None:        # a value that knows the line it was read from
        line, note = value.line, f"{name} = {value}"
    elif name in ("bw_fraction", "bw_gbps") and features.feature(run, "bw_row", scope.ctx) is not None:
        line = features.feature(run, "bw_row", scope.ctx).line
        note = f"{value * 100:.0f}% of line rate" if name == "bw_fraction" else f"{value:.1f} Gb/s"
    elif name == "stalled_at":
        line, note = run.last_line, f"the {run.side} printed nothing after this line"
    else:
        line, note = run.last_line, f"{name} = {value}"
    return Evidence(run.source, _line_text(scope, run, line), line, note)


def _line_text(scope: Scope, run: Run, line: int) -> str:
    text = bysource.line_text(scope.ctx, run.source, line)
    return text.strip() if text is not None else ""


def _lookup(root: Any, path: str) -> Any:
    value = root
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
        if value is None:
            return None
    return value


def _setting(cond: Dict[str, Any], scope: Scope) -> bool:
    """An environment or MCA setting the run's paste shows (NCCL_IB_GID_INDEX, UCX_TLS, OMPI_MCA_btl ...)."""
    name = cond["setting"]
    for run in scope.pick(cond.get("of")):
        shown = run.settings.get(name)
        actual = _norm(shown.value) if shown is not None else None
        expected = cond.get("value")
        expected = [_norm(v) for v in expected] if isinstance(expected, list) else _norm(expected)
        if _compare(actual, cond.get("op"), expected):
            if shown is not None:
                scope.bound.setdefault("setting", {"name": name, "value": shown.value})
                shown_text = _line_text(scope, run, shown.line) or f"{name}={shown.value}"
                scope.evidence.append(Evidence(run.source, shown_text,
                                               shown.line, f"{name}={shown.value}"))
            return True
    return False


def shown(value: Any) -> str:
    """A fact's value as a person reads it: JSON for everything but plain text (no Python reprs)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def fact_evidence(name: str, value: Any, label: str = "") -> Evidence:
    """Evidence for a fact, with its name and typed value (JSON) beside the sentence."""
    typed = value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else str(value)
    return Evidence("facts", f"{label} {name} = {shown(value)}".strip(), None, name=name, value=typed)


def _fact(cond: Dict[str, Any], scope: Scope) -> bool:
    view = scope.ctx.get("facts_view")
    if view is None:
        return False
    value = _lookup(view, cond["fact"])
    ok = _compare(value, cond.get("op"), cond.get("value"))
    if ok:
        scope.bound.setdefault("fact", value)
        scope.evidence.append(fact_evidence(cond["fact"], value))
    return ok


def _item(cond: Dict[str, Any], scope: Scope) -> bool:
    if scope.item is None:
        return False
    value = _lookup(scope.item, cond["item"])
    ok = _compare(value, cond.get("op"), cond.get("value"))
    if ok:
        label = scope.item.get("label") or scope.item.get("name") or ""
        scope.evidence.append(fact_evidence(cond["item"], value, label))
    return ok


def holds(cond: Dict[str, Any], scope: Scope) -> bool:
    if "side" in cond and len(cond) == 1:
        return scope.run is not None and scope.run.side == cond["side"]
    for key, test in _COMBINATIONS + _LEAVES:
        if key in cond:
            return test(cond, scope)
    raise ValueError(f"condition not understood: {cond}")


def _all(cond: Dict[str, Any], scope: Scope) -> bool:
    """Every part holds on one trial scope; its bindings and evidence are kept only then."""
    trial = scope.fork()
    if all(holds(c, trial) for c in cond["all"]):
        scope.absorb(trial)
        return True
    return False


def _any(cond: Dict[str, Any], scope: Scope) -> bool:
    """The first part that holds lends its bindings and evidence."""
    for c in cond["any"]:
        trial = scope.fork()
        if holds(c, trial):
            scope.absorb(trial)
            return True
    return False


def _not(cond: Dict[str, Any], scope: Scope) -> bool:
    return not holds(cond["not"], scope.fork())


def _exists(cond: Dict[str, Any], scope: Scope) -> bool:
    return bool(scope.pick(cond["exists"]))


_COMBINATIONS = (("all", _all), ("any", _any), ("not", _not), ("exists", _exists))
# the leaf conditions, by the key that names them
_LEAVES = (("message", _message), ("differ", _differ), ("param", _param), ("option", _option),
           ("feature", _feature), ("setting", _setting), ("fact", _fact), ("item", _item))


# A clause of what a condition needs: one of these message ids must be among the messages of the scope's own run
# ("run") or of the whole input ("input") for the condition to be able to hold.
Clause = Tuple[str, frozenset]


_NEEDED: Dict[int, Tuple[Dict[str, Any], Tuple[Clause, ...]]] = {}


def needed_messages(cond: Dict[str, Any]) -> Tuple[Clause, ...]:
    """What must be in the input for `cond` to hold, as clauses that must all be met (none: anything may hold it).
    Read from the condition alone, the way holds() reads it, and never more than holds() needs: a rule whose clause
    no message meets is one that cannot hold there, so it need not be tried on thousands of runs. Read once a
    condition (a rule's `when` is never changed once the table is loaded)."""
    kept = _NEEDED.get(id(cond))
    if kept is not None and kept[0] is cond:
        return kept[1]
    clauses = _needed(cond)
    _NEEDED[id(cond)] = (cond, clauses)
    return clauses


def _needed(cond: Dict[str, Any]) -> Tuple[Clause, ...]:
    if "side" in cond and len(cond) == 1:
        return ()
    key = next((k for k, _ in _COMBINATIONS + _LEAVES if k in cond), None)
    if key == "all":
        return tuple(c for part in cond["all"] for c in _needed(part))
    if key == "any":
        firsts = []
        for part in cond["any"]:
            clauses = _needed(part)
            if not clauses:
                return ()
            firsts.append(clauses[0])
        where = "run" if all(w == "run" for w, _ in firsts) else "input"
        return ((where, frozenset().union(*(ids for _, ids in firsts))),)
    if key == "message":
        ids = cond["message"] if isinstance(cond["message"], list) else [cond["message"]]
        if "*" in ids:
            return ()
        # without `of`, a run's scope reads its own run; any other scope reads runs of the input
        return (("run" if cond.get("of") in (None, "run") else "input", frozenset(ids)),)
    return ()
