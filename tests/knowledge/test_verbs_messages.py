"""knowledge/messages/verbs.toml and perftest.toml: which entry owns a line another entry also reads."""
from __future__ import annotations

from pathlib import Path

from rdmadoctor.logparse.streams import parse_text

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"


def _messages(text: str):
    return [(r.producer, m.id, dict(m.fields)) for r in parse_text(text).runs for m in r.messages]


def test_wukongs_completion_line_is_one_message_with_its_status_read_both_ways():
    line = (FIXTURES / "real" / "verbs-wukong-5-retry-exc-roce" / "paste.log").read_text()
    (found,) = _messages(line)
    producer, message_id, fields = found
    assert (producer, message_id) == ("verbs", "VERBS.WC_BAD_COMPLETION")
    assert (fields["status"], fields["status_name"]) == ("0xc", "transport retry counter exceeded")


def test_rdma_rc_examples_line_without_the_words_has_no_status_name():
    ((_, message_id, fields),) = _messages("got bad completion with status: 0x5, vendor syndrome: 0xf9\n")
    assert message_id == "VERBS.WC_BAD_COMPLETION" and "status_name" not in fields
