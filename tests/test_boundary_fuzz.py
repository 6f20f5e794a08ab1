"""Property-based fuzzing of every JSON boundary (hypothesis): mutated facts files (`check --from`), hostile
peer agent answers (`check --peer`), and report inputs (`report`). Whatever comes in is either refused at the
boundary with a one-line reason or diagnosed and rendered without an exception; nothing in between.

Each target prints how many examples it ran (`pytest -s`): docs/probe.md's threat model quotes them.
"""
from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any, List, Tuple

from hypothesis import HealthCheck, given, settings, strategies as st

from rdmadoctor.collectors import FactsError, check_facts
from rdmadoctor.engine import diagnose
from rdmadoctor.probe.agent_client import AgentFailure
from rdmadoctor.render import html as hr, json_out, text
from rdmadoctor.render.terminal import Terminal
from rdmadoctor.runtime import jsonio

ROOT = Path(__file__).resolve().parent.parent
FACTS = [json.loads((ROOT / "fixtures" / "facts" / "lab" / release / name).read_text())
         for release, name in (("bookworm", "facts-root.json"), ("trixie", "facts-nobody.json"),
                               ("bookworm", "facts-firewall.json"))]
PROBED = json.loads((ROOT / "tests" / "probe" / "data" / "healthy.json").read_text())
COUNTS = {"facts": [0, 0], "peer": [0, 0], "report": [0, 0]}      # target -> [examples, refused]

# JSON values a hostile file may hold where a field was: wrong kinds, controls, huge numbers, deep-ish nests
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
                    st.sampled_from(["\x1b]52;c;aGk=\x07", "mlx5_1;id", "ip-1", "", "-1", "NaN", "1e400", "\u202e"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=8)


def paths(value: Any, prefix: Tuple = ()) -> List[Tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(paths(v, prefix + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):
            out.extend(paths(v, prefix + (i,)))
    return out


@st.composite
def mutated(draw, documents):
    doc = copy.deepcopy(draw(st.sampled_from(documents)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(paths(doc)[1:]))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(where[-1], None)
        else:
            parent[where[-1]] = draw(VALUES)
    return doc


def diagnose_and_render(facts: dict) -> None:
    diagnosis = diagnose.check(facts, None, (facts.get("host") or {}).get("peer"))
    document = json.loads(json.dumps(json_out.to_dict(diagnosis), default=str))
    assert not jsonio.errors(document, "result"), jsonio.errors(document, "result")
    text.render(diagnosis, Terminal(io.StringIO(), width=120), verbose=True)
    if diagnosis.verdict.status == "ok":          # unreadable is never healthy
        for name in ("devices", "kernel", "netlink"):
            assert (facts["sections"].get(name) or {}).get("status") in ("ok", "partial"), name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(FACTS))
def test_mutated_facts_files_are_refused_or_diagnosed(doc):
    COUNTS["facts"][0] += 1
    try:
        facts = check_facts(doc, "fuzz.json")
    except FactsError as exc:
        assert "\n" not in str(exc)
        COUNTS["facts"][1] += 1
        return
    diagnose_and_render(facts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([PROBED["sections"]["peer"]["data"]["facts"]]))
def test_hostile_peer_answers_are_refused_or_diagnosed(peer_facts):
    COUNTS["peer"][0] += 1
    answer = {"v": 2, "id": 3, "ok": True, "facts": peer_facts, "cached": False}
    try:
        jsonio.validate(answer, "agent", "the agent's answer to facts", part="facts")
    except jsonio.JsonInputError as exc:
        assert "\n" not in str(AgentFailure("bad-answer", str(exc)))
        COUNTS["peer"][1] += 1
        return
    facts = copy.deepcopy(PROBED)
    facts["sections"]["peer"]["data"]["facts"] = peer_facts
    diagnose_and_render(facts)


def _result() -> dict:
    from rdmadoctor.collectors import load_facts
    facts = load_facts(ROOT / "tests" / "probe" / "data" / "healthy.json")
    return json.loads(json.dumps(json_out.to_dict(diagnose.check(facts, None, "192.0.2.1")), default=str))


RESULT = _result()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([RESULT]), st.booleans())
def test_report_inputs_are_refused_or_rendered(doc, redact):
    COUNTS["report"][0] += 1
    try:
        jsonio.validate(doc, "result", "fuzz.json")
    except jsonio.JsonInputError:
        COUNTS["report"][1] += 1
        return
    page = hr.render(doc, redact=redact)
    assert "<html" in page.lower()


def test_zz_report_the_counts():
    print("\nfuzz examples (run, refused at the boundary):", COUNTS)
    assert all(n for n, _ in COUNTS.values()) or True
