"""Languages: the engine speaks the rule's own Chinese text when asked, and its own phrases in both languages."""
import pytest

from rdmadoctor.engine import diagnose, rules
from rdmadoctor.engine.evaluate import reflow
from rdmadoctor.knowledge import phrases
from rdmadoctor.logparse.streams import parse_text

SITE = '''[[rule]]
id = "SITE-NO-DEVICE"
cause = "no-rdma-device"
severity = "fail"
title = "No device here"
scope = "run"
why = "perftest found none."
fix = ["Install one."]
when = { message = "D01" }

[rule.zh]
title = "这里没有设备"
why = """
perftest 没有找到
任何 RDMA 设备。
"""
fix = ["装一块。"]
'''


def test_every_phrase_has_both_languages():
    assert all(set(entry) == set(phrases.LANGUAGES) for entry in phrases.PHRASES.values())


@pytest.mark.parametrize("environ, lang", [({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LC_ALL": "C", "LANG": "zh_CN"}, "en"),
                                           ({}, "en"), ({"LANG": "en_US.UTF-8"}, "en")])
def test_the_language_comes_from_the_locale(environ, lang):
    assert phrases.language(None, environ) == lang


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="not one of en, zh"):
        phrases.language("fr")


def test_a_rule_speaks_chinese_when_asked_and_english_otherwise(tmp_path):
    (tmp_path / "site.toml").write_text(SITE)
    table = rules.build([rules.rules_dir(), tmp_path])
    parsed = parse_text("$ ib_write_bw -d mlx5_0\nNo IB devices found\n")
    zh = next(f for f in diagnose.explain(parsed, table=table, lang="zh").findings if f.rule == "SITE-NO-DEVICE")
    en = next(f for f in diagnose.explain(parsed, table=table).findings if f.rule == "SITE-NO-DEVICE")
    assert (zh.title, zh.explanation, zh.fix) == ("这里没有设备", "perftest 没有找到任何 RDMA 设备。", ["装一块。"])
    assert (en.title, en.fix) == ("No device here", ["Install one."])


def test_a_translation_must_match_the_rule_item_by_item(tmp_path):
    (tmp_path / "site.toml").write_text(SITE.replace('fix = ["装一块。"]', 'fix = ["装一块。", "再装一块。"]'))
    with pytest.raises(rules.RuleError, match=r"\[zh\]\.fix has 2 items, the rule 1"):
        rules.build([rules.rules_dir(), tmp_path])


def test_reflow_joins_chinese_lines_without_a_blank_and_others_with_one():
    assert reflow("RDMA 设备\n没有找到\nafter it") == "RDMA 设备没有找到 after it"


def test_reflow_puts_no_blank_beside_chinese_punctuation_or_inside_curly_quotes():
    said = reflow("客户端报\n“Couldn't read remote address”\n之后退出")
    assert said == "客户端报“Couldn't read remote address”之后退出"
    assert reflow("检查 MTU、\nGID 和\nPFC。\n然后重试") == "检查 MTU、GID 和 PFC。然后重试"
    assert reflow("the server printed\n“done” and\nexited") == "the server printed “done” and exited"


def test_every_shipped_rule_has_its_chinese_text():
    """Every rule of the package's table speaks both languages: a rule added without [rule.zh] fails here."""
    table = rules.build([rules.rules_dir()])
    missing = [f"{r.id} ({r.source})" if hasattr(r, "source") else r.id
               for r in table for lang in rules.LANGUAGES if getattr(r, lang, None) is None]
    assert not missing, f"{len(missing)} rules lack [rule.zh]: {', '.join(missing[:20])}"


def test_a_completion_status_is_explained_in_the_results_language():
    from rdmadoctor.views.completions import statuses
    assert all(s.get("meaning_zh") for s in statuses().values())
    parsed = parse_text(" Completion with error at client\n Failed status 14: wr_id 0 syndrom 0x0\nscnt=128, ccnt=0\n")
    zh = next(f for f in diagnose.explain(parsed, lang="zh").findings if f.rule == "PT-COMPLETION-OTHER")
    assert statuses()[14]["meaning_zh"] in zh.explanation and "Reliable Datagram only" not in zh.explanation
