"""knowledge/messages/verbs.toml and perftest.toml: which entry owns a line another entry also reads."""
from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.parametrize("line, enosys", [
    ("ibv_get_device_list failed: Function not implemented", "Function not implemented"),
    ("ibv_get_device_list: Function not implemented", "Function not implemented"),
    ("ibv_get_device_list() failed, errno 38", "errno 38"),
    ("ibv_get_device_list failed: ENOSYS", "ENOSYS"),
    # rdma-core v20.1 to v24 set errno to -ENOSYS (libibverbs/device.c ibv_get_device_list())
    ("ibv_get_device_list failed: Unknown error -38", "Unknown error -38"),
])
def test_enosys_of_a_verb_is_its_own_class_in_every_form(line, enosys):
    ((_, message_id, fields),) = _messages(line + "\n")
    assert (message_id, fields["verb"], fields.get("enosys")) == ("VERBS.APP_VERB_FAILED", "ibv_get_device_list", enosys)


def test_another_unknown_errno_stays_in_the_error_field():
    ((_, _, fields),) = _messages("ibv_get_device_list failed: Unknown error -381\n")
    assert "enosys" not in fields and fields["error"] == "Unknown error -381"
