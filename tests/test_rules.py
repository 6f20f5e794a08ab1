"""Each rule fires on its own cases and stays quiet on the others (the `[[rule.case]]` beside it), and the
table is sound: names checked at load, causes from the vocabulary, symptoms never named as causes."""
import json
import re
from pathlib import Path

import pytest

from rdmadoctor.engine import cases as rule_cases
from rdmadoctor.engine import rules as rule_table
from rdmadoctor.knowledge import causes

TABLE = rule_table.load()
CASE_PARAMS = [pytest.param(rule, kind, index, spec, verdict, rate, id=f"{rule.id}-{kind}-{index}")
               for rule in TABLE for kind, index, spec, verdict, rate in rule_cases.cases_of(rule)]


@pytest.mark.parametrize("rule,kind,index,spec,verdict,rate", CASE_PARAMS)
def test_rule_case(rule, kind, index, spec, verdict, rate):
    outcome = rule_cases.run_case(rule, kind, index, spec, verdict, rate, TABLE)
    assert outcome.ok, f"{outcome.name}: {outcome.message}"


def test_every_rule_has_a_firing_and_a_quiet_case():
    missing = {r.id: rule_cases.coverage(r) for r in TABLE if rule_cases.coverage(r)}
    assert not missing, f"rules without both a firing and a quiet case: {missing}"


def test_rule_table_is_sound():
    slugs = set(causes.slugs())
    for rule in TABLE:
        assert rule.cause in slugs, rule.id
        if rule.kind == "symptom":
            assert rule.cause == "unknown", f"{rule.id}: a symptom names no cause"
        else:
            assert rule.cause != "unknown" and rule.fix, rule.id


RULE = """[[rule]]
id = "X-1"
cause = "port-down"
severity = "fail"
title = "t {run.num_qps}"
scope = "{scope}"
why = "w"
fix = ["f"]
when = {when}
"""


def _toml(value):
    """A value as TOML writes it inline (JSON's strings, lists and numbers are TOML's; a table is not)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _load(tmp_path, when, scope="run", **extra):
    text = RULE.replace("{when}", when).replace("{scope}", scope)
    for key, value in extra.items():
        line = f"{key} = {_toml(value)}"
        text = re.sub(rf"^{key} = .*$", line, text, flags=re.M) if re.search(rf"^{key} = ", text, re.M) \
            else text + line + "\n"
    (tmp_path / "site.toml").write_text(text)
    return rule_table.build([rule_table.rules_dir(), tmp_path])


@pytest.mark.parametrize("when, extra, error", [
    ('{ message = "D05" }', {"severity": "fatal"}, "rule X-1: severity must be one of"),
    ('{ mesage = "D05" }', {}, "unknown condition key"),
    ('{ message = "D99" }', {}, "message 'D99' is not in any catalogue"),
    ('{ feature = "garbage_rows" }', {}, "feature 'garbage_rows' is not in views/features.py"),
    ('{ differ = "num_qp" }', {}, "parameter 'num_qp' is not in views/params.py"),
    ('{ option = "gid_index" }', {}, "option 'gid_index' is not a perftest option"),
    ('{ fact = "memlock.below_defualt" }', {}, "'below_defualt' is not a name of memlock"),
    ('{ message = "X09", fields = { fieldd = "*" } }', {}, "message field 'fieldd' is not bound"),
    ('{ message = "*", kind = "eror" }', {}, "message kind 'eror' is not one of error, info, notice, warning"),
    ('{ message = "*", kind = ["error", "warning"] }', {}, "message kind ['error', 'warning'] is not one of"),
    ('{ message = "D05" }', {"cause": "port-dwn"}, "cause 'port-dwn' is not in the cause vocabulary"),
    ('{ message = "D05" }', {"explains": ["PT-NOPE"]}, "explains unknown rule PT-NOPE"),
    ('{ message = "D05" }', {"probe_rung": "peer-nowhere"}, "probe_rung 'peer-nowhere' is not a rung"),
    ('{ message = "D05" }', {"cite": {"message": "D98"}}, "cite: message 'D98' is not in any catalogue"),
])
def test_the_loader_refuses_unknown_names_naming_file_and_rule(tmp_path, when, extra, error):
    with pytest.raises(rule_table.RuleError) as info:
        _load(tmp_path, when, **extra)
    assert "site.toml: rule X-1" in str(info.value) and error in str(info.value), str(info.value)


def test_the_loader_refuses_unknown_template_names(tmp_path):
    (tmp_path / "site.toml").write_text(RULE.replace("{when}", '{ message = "D05" }').replace("{scope}", "run")
                                        .replace("t {run.num_qps}", "t {run.num_qp} {message.hots}"))
    with pytest.raises(rule_table.RuleError) as info:
        rule_table.build([rule_table.rules_dir(), tmp_path])
    text = str(info.value)
    assert "{run.num_qp}: 'num_qp' is neither a parameter" in text
    assert "{message.hots}: 'hots' is not a field of message(s) ['D05']" in text


def test_a_template_naming_a_field_that_a_message_attribute_hides_is_refused(tmp_path):
    """NCCL.RETURN_TRACE binds the source line as `line`, and every message has its own `line` (where it stands in
    the log): {message.line} would print the second, so the table refuses it; a field of another name passes."""
    text = RULE.replace("{when}", '{ message = "NCCL.RETURN_TRACE" }').replace("{scope}", "run")
    (tmp_path / "site.toml").write_text(text.replace("t {run.num_qps}", "t {message.path}:{message.line}"))
    with pytest.raises(rule_table.RuleError, match=r"\{message\.line\}: 'line' is a field of message "
                                                   r"NCCL\.RETURN_TRACE and an attribute of every message"):
        rule_table.build([rule_table.rules_dir(), tmp_path])
    (tmp_path / "site.toml").write_text(text.replace("t {run.num_qps}", "t {message.path}"))
    assert any(r.id == "X-1" for r in rule_table.build([rule_table.rules_dir(), tmp_path]).rules)


def test_a_fact_rule_with_a_misspelt_item_is_refused(tmp_path):
    with pytest.raises(rule_table.RuleError, match=r"item field 'stat' is not a name of ports's items"):
        _load(tmp_path, '{ item = "stat", op = "==", value = "DOWN" }', scope="facts", each="ports")


def test_a_site_rule_loads_beside_the_package_rules(tmp_path):
    table = _load(tmp_path, '{ message = "D05" }')
    assert table.by_id()["X-1"].file.endswith("site.toml") and len(table) == len(TABLE) + 1


def test_explains_names_a_group_of_rules_in_place_of_its_members(tmp_path):
    """rules/_groups.toml's groups expand to their rules; a site's directory may add its own; an unknown group is
    refused with the rule's file and id."""
    table = _load(tmp_path, '{ message = "D05" }', explains=["PT-FLUSH", "@perftest-knock-on"])
    assert set(table.by_id()["X-1"].explains) == {"PT-FLUSH", "PT-SIDE-CHANNEL", "PT-GENERIC-ERROR"}
    (tmp_path / "_site_groups.toml").write_text('[groups]\nmine = ["PT-STALLED"]\n')
    table = _load(tmp_path, '{ message = "D05" }', explains=["@mine", "@nccl-error-codes"])
    assert table.by_id()["X-1"].explains == ("PT-STALLED", "NCCL-SYSTEM-ERROR", "NCCL-SYSTEM-ERROR-ONE-HOST",
                                                 "NCCL-INTERNAL-ERROR")
    with pytest.raises(rule_table.RuleError, match="site.toml: rule X-1: explains unknown group @nope"):
        _load(tmp_path, '{ message = "D05" }', explains=["@nope"])
    (tmp_path / "_site_groups.toml").write_text('[groups]\nmine = "PT-STALLED"\n')
    with pytest.raises(rule_table.RuleError, match="group mine must list rule ids"):
        _load(tmp_path, '{ message = "D05" }')


def test_use_writes_a_named_condition_in_its_place(tmp_path):
    """`{ use = NAME }` stands for `[conditions]`' NAME, written out where it stands (a named condition may use another;
    a site's directory may add its own): the rule loads as if written out, and one written out fires alike."""
    (tmp_path / "_site_conditions.toml").write_text(
        '[conditions]\nmine = { any = [ { message = "D05" }, { use = "verbs-wc-retry-exceeded" } ] }\n')
    table = _load(tmp_path, '{ all = [ { use = "mine" }, { not = { use = "nccl-socket-requested" } } ] }')
    package = rule_table.build([rule_table.rules_dir()])
    assert "use" not in json.dumps(table.by_id()["X-1"].when)
    written_out = {"all": [{"any": [{"message": "D05"}, package.by_id()["VERBS-WC-RETRY-EXCEEDED"].when]},
                           {"not": {"any": [{"setting": "NCCL_IB_DISABLE", "op": "==", "value": 1},
                                            {"setting": "NCCL_NET", "op": "==", "value": "Socket"}]}}]}
    assert table.by_id()["X-1"].when == written_out
    # the package's own: a rule naming one evaluates as it did written out (its cases, the snapshot, show it too)
    assert package.by_id()["VERBS-WC-RETRY-EXCEEDED"].when == {"any": [
        {"message": "VERBS.WC_STATUS_TEXT", "fields": {"status_name": "transport retry counter exceeded"}},
        {"message": "VERBS.WC_BAD_COMPLETION", "fields": {"status": 12}}]}


@pytest.mark.parametrize("conditions, when, error", [
    ("", '{ use = "nope" }', "site.toml: rule X-1: uses unknown condition 'nope'"),
    ("", '{ use = "nccl-socket-requested", message = "D05" }', "names one condition and nothing else"),
    ('loop = { all = [ { message = "D05" }, { not = { use = "loop" } } ] }', '{ use = "loop" }',
     "condition 'loop' uses itself (loop -> loop)"),
    ('mine = "D05"', '{ message = "D05" }', "condition mine must be a condition table"),
])
def test_the_loader_refuses_a_use_it_cannot_write_out(tmp_path, conditions, when, error):
    (tmp_path / "_site_conditions.toml").write_text(f"[conditions]\n{conditions}\n")
    with pytest.raises(rule_table.RuleError, match=re.escape(error)):
        _load(tmp_path, when)


def test_no_condition_is_written_out_in_two_rules():
    """A part of a condition (an `any` or `all`) that two rules test alike is named once in rules/_conditions.toml
    and used by name, so that a fix to it (a message id, a field's value) reaches every rule that means it."""
    tomllib = rule_table.tomllib        # (tomli before Python 3.11)
    seen = {}

    def walk(node, rule_id):
        if isinstance(node, list):
            for part in node:
                walk(part, rule_id)
        elif isinstance(node, dict):
            for key in ("any", "all"):
                if key in node:
                    text = json.dumps(node, sort_keys=True)
                    if len(text) > 60:
                        seen.setdefault(text, set()).add(rule_id)
                    walk(node[key], rule_id)
            walk(node.get("not"), rule_id)

    for path in sorted(rule_table.rules_dir().glob("*.toml")):
        for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("rule", []):
            for key in ("when", "cite"):
                walk(entry.get(key), entry["id"])
    twins = {text: sorted(ids) for text, ids in seen.items() if len(ids) > 1}
    assert not twins, "name these in rules/_conditions.toml and `use` them:\n" + "\n".join(
        f"{ids}: {text}" for text, ids in twins.items())


def test_a_site_rule_cannot_reuse_an_id(tmp_path):
    (tmp_path / "site.toml").write_text(RULE.replace("X-1", "PT-QP-COUNT").replace("{when}", '{ message = "D05" }')
                                        .replace("{scope}", "run"))
    with pytest.raises(rule_table.RuleError, match="rule PT-QP-COUNT already defined in perftest-pair.toml"):
        rule_table.build([rule_table.rules_dir(), tmp_path])


@pytest.mark.parametrize("spec, rate", [("tree:sysfs/handmade-mlx5-pcie-degraded", 100.0),
                                        ("facts:facts/lab/bookworm/facts-root.json", None)])
def test_check_judges_against_the_hardware_port_rate_only(spec, rate):
    """A ConnectX port's rate is the reference line of check's charts; Soft-RoCE's nominal 2.5 Gb/s is not."""
    from rdmadoctor.engine.diagnose import check
    rule = TABLE[0]
    facts = rule_cases.facts_of(spec, rule, Path(rule_cases.REPO_FIXTURES))
    assert check(facts).link_rate_gbps == rate


def test_a_nested_template_field_is_refused(tmp_path):
    (tmp_path / "site.toml").write_text(RULE.replace("{when}", '{ message = "D05" }').replace("{scope}", "run")
                                        .replace("t {run.num_qps}", "t {run.tool|default:the {run.side}}"))
    with pytest.raises(rule_table.RuleError, match="fields do not nest"):
        rule_table.build([rule_table.rules_dir(), tmp_path])


def test_cite_adds_its_evidence_when_it_holds_and_never_decides(tmp_path):
    """`cite` quotes a line that belongs to the finding when the line is there; the rule fires the same without it."""
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_text
    table = _load(tmp_path, '{ message = "NCCL.IB_DEVICE_OPEN_FAILED" }',
                  cite={"message": "NCCL.IBV_CALL_FAILED", "fields": {"function": "ibv_open_device"}})
    wrapper = "node1:1234:1234 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed\n"
    scan = "node1:1234:1234 [0] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_2\n"
    other = "node1:1234:1234 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_reg_mr failed\n"
    quoted = {}
    for name, text in (("with", wrapper + scan), ("without", scan), ("another call", other + scan)):
        found = [f for f in diagnose.explain(parse_text(text), table=table).findings if f.rule == "X-1"]
        assert len(found) == 1, name
        quoted[name] = [e.text for e in found[0].evidence]
    assert any("ibv_open_device" in t for t in quoted["with"]) and len(quoted["with"]) == 2
    assert len(quoted["without"]) == 1 and len(quoted["another call"]) == 1


def test_ucx_assertion_title_gives_the_source_line_not_the_log_line():
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_text
    text = "job started\n" * 6 + "[node1:1234 :0:1234]   rc_mlx5.inl:345  Assertion `qp_num == txqp->qp_num' failed\n"
    found = [f for f in diagnose.explain(parse_text(text)).findings if f.rule == "UCX-ASSERTION"]
    assert found and "rc_mlx5.inl:345 Assertion" in found[0].title, [f.title for f in found]
