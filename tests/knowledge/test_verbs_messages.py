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
    assert message_id == "VERBS.APP_VERB_FAILED"
    assert (fields["verb"], fields.get("enosys")) == ("ibv_get_device_list", enosys)


def test_another_unknown_errno_stays_in_the_error_field():
    ((_, _, fields),) = _messages("ibv_get_device_list failed: Unknown error -381\n")
    assert "enosys" not in fields and fields["error"] == "Unknown error -381"


@pytest.mark.parametrize("line, message_id", [
    # as perftest prints them (src/perftest_communication.c, src/perftest_resources.c), and behind rdma_bw's old head
    ("rdma_bind_addr failed", "C17"), (" rdma_bind_addr failed", "C17"), ("rdma_listen failed", "C17"),
    ("rdma_resolve_addr failed", "C12"), ("rdma_resolve_route failed", "C12"),
    (" rdma_create_event_channel failed", "C10"), ("rdma_create_id failed", "C10"),
    ("4242:pp_server_connect: rdma_listen failed", "C17"),
    # another program's line with the errno: the generic entry
    ("INFO:  trans_rdma.c (2055), msk_bind_client: rdma_resolve_addr failed: No such device (19)",
     "VERBS.APP_CM_CALL_FAILED"),
    ("myapp: rdma_create_id failed: No such device", "VERBS.APP_CM_CALL_FAILED"),
])
def test_perftests_rdma_cm_call_texts_are_perftests_only_alone_on_their_line(line, message_id):
    assert [m for _, m, _ in _messages(line + "\n")] == [message_id]


def test_perftests_rdma_cm_call_texts_keep_a_pastes_decorations():
    lines = ["$ ib_write_bw -R 192.0.2.1", " rdma_bind_addr failed", " Unable to perform rdma_server function"]
    text = "".join(f"2024-05-01T10:00:0{i}.123456 {line}\n" for i, line in enumerate(lines))
    assert [m for _, m, _ in _messages(text)] == ["C17", "C17S"]
