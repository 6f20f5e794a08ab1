"""engine/template.py: a rule's text filled with the user's own values; a missing value shows as '?' or the
template's default, never as an error."""
from __future__ import annotations

import pytest

from rdmadoctor.engine.template import MISSING, render
from rdmadoctor.model import Message

from tests.views.runs import bw_row, run


@pytest.fixture
def bindings():
    client = run("ib_write_bw 192.0.2.1 --qp=4", results=[bw_row(avg=5000.0, unit="Gb/sec")])
    server = run("ib_write_bw", side="server")
    message = Message("C02", "error", "Couldn't connect to 192.0.2.1:18515", 7, "client.log",
                      {"host": "192.0.2.1", "port": "18515"})
    return {"run": client, "client": client, "server": server, "message": message,
            "item": {"label": "mlx5_0 port 1", "gids": ["a", "b"]}, "facts": {"memlock": {"soft": 65536}}}


@pytest.mark.parametrize("template, text", [
    ("{client.num_qps} QPs against {server.num_qps}", "4 QPs against 1"),       # parameters, defaults too
    ("{message.host}:{message.port}", "192.0.2.1:18515"),                       # a message's fields
    ("{run.command_text}", "ib_write_bw 192.0.2.1 --qp=4"),
    ("{run.bw_gbps|gbps}", "5000.0 Gb/s"),                                      # a feature, filtered
    ("{run.bidirectional}", "off"),                                             # booleans read as on/off
    ("{item.gids|join}", "a, b"),
    ("{item.label|upper}", "MLX5_0 PORT 1"),
    ("{facts.memlock.soft|bytes}", "64 KiB"),
    ("{message.field|option}", "?"),
])
def test_filters_and_names(bindings, template, text):
    assert render(template, bindings, {}) == text


def test_negotiated_field_names_read_as_the_options_that_set_them(bindings):
    bindings["message"].fields["field"] = "num_of_qps"
    assert render("{message.field|option}", bindings, {}) == "-q/--qp"


def test_missing_values_show_as_a_question_mark_or_the_default(bindings):
    assert MISSING == "?"
    assert render("MTU {run.mtu}", bindings, {}) == "MTU ?"                      # the header did not show it
    assert render("MTU {run.mtu|default:unknown}", bindings, {}) == "MTU unknown"
    assert render("{other.num_qps}", bindings, {}) == "?"                       # no such binding
    assert render("{item.nothing}", bindings, {}) == "?"
    assert render("{run.bw_fraction|pct}", bindings, {}) == "?"                 # no link rate given


def test_percent_with_a_link_rate(bindings):
    assert render("{run.bw_fraction|pct}", bindings, {"link_rate_gbps": 10000.0}) == "50%"


def test_another_producers_run_answers_with_its_own_attributes(bindings):
    # "tool" is a perftest parameter (its command line or header); a pingpong run's is its attribute
    pingpong = run(side="server")
    pingpong.producer, pingpong.tool = "verbs", "ibv_rc_pingpong"
    assert render("{run.tool|default:The program} failed", {"run": pingpong}, {}) == "ibv_rc_pingpong failed"
    assert render("{run.mtu|default:no MTU}", {"run": pingpong}, {}) == "no MTU"      # no such attribute either
    assert render("{run.tool}", bindings, {}) == "ib_write_bw"
