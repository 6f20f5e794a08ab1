"""A finding's texts (title, explanation, fix, next steps) are rendered from its rule's templates when first read:
a rule can hold on thousands of runs, and the renderers show a few of its findings.

The log is a lab capture (fixtures/lab/bookworm/server-not-running: Soft-RoCE, perftest 4.5), the client's attempt
repeated as a script that retries prints it.
"""
import dataclasses
import io
from pathlib import Path

from rdmadoctor.engine import diagnose, evaluate, template
from rdmadoctor.logparse.streams import parse_streams
from rdmadoctor.model import Finding

LAB = Path(__file__).resolve().parent.parent.parent / "fixtures" / "lab" / "bookworm"
TEXTS = ("title", "explanation", "fix", "next_steps")


def _attempts(n):
    data = (LAB / "server-not-running/client.log").read_bytes()
    return parse_streams([("client.log", io.BytesIO(data * n))])


def _counting(monkeypatch):
    calls = []
    real = template.render

    def render(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(template, "render", render)
    return calls


def test_finding_many_runs_renders_no_text_until_one_is_read(monkeypatch):
    parsed = _attempts(40)
    ctx = diagnose.context(parsed, None, None, None)
    calls = _counting(monkeypatch)
    findings = [f for f in evaluate.find(parsed.runs, ctx) if f.rule == "PT-CONNECT-FAILED"]
    assert len(findings) == 40
    assert calls == []
    first = findings[0]
    assert first.title == "Nothing accepted the connection to 192.0.2.1:18515"
    rendered = len(calls)
    assert rendered >= 2           # the title and the rest of that finding's texts, at once
    assert all(isinstance(getattr(first, name), (str, list)) for name in TEXTS)
    assert first.fix and all(isinstance(step, str) for step in first.fix)
    assert len(calls) == rendered  # read again: kept, not rendered again
    assert all(type(vars(f)["_title"]).__name__ == "Later" for f in findings[1:])


def test_texts_read_late_are_the_texts_the_templates_give_each_run():
    parsed = _attempts(3)
    ctx = diagnose.context(parsed, None, None, None)
    findings = [f for f in evaluate.find(parsed.runs, ctx) if f.rule == "PT-CONNECT-FAILED"]
    # the evidence of each finding is its own run's line, and so are the texts read after the others were found
    lines = [f.evidence[0].line for f in findings]
    assert lines == sorted(set(lines))
    as_dicts = [f.to_dict() for f in findings]
    assert [d["title"] for d in as_dicts] == [findings[0].title] * 3
    assert all(d["explanation"] and "{" not in d["explanation"] for d in as_dicts)


def test_a_finding_given_its_texts_keeps_them_and_copies_with_them():
    f = Finding(rule="R", cause="port-down", severity="fail", title="t", explanation="e", evidence=[], fix=["x"])
    assert (f.title, f.explanation, f.fix, f.next_steps) == ("t", "e", ["x"], [])
    g = dataclasses.replace(f, title="[combo] t")
    assert (g.title, g.fix) == ("[combo] t", ["x"])
    other = Finding(rule="R", cause="port-down", severity="fail", title="t", explanation="e", evidence=[], fix=[])
    other.next_steps.append("ibv_devinfo")
    assert f.next_steps == []                       # each finding given no next steps has a list of its own
    assert f.to_dict()["next_steps"] == [] and f == Finding(**{**f.to_dict(), "evidence": []})
