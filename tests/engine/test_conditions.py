"""engine/conditions.py: each leaf condition, and all / any / not, with the evidence and bindings they keep."""
from __future__ import annotations

import pytest

from rdmadoctor.engine.conditions import Scope, holds
from rdmadoctor.model import Message

from tests.views.runs import bw_row, run

ERROR = Message("C02", "error", "Couldn't connect to 192.0.2.1:18515", 7, "client.log",
                {"host": "192.0.2.1", "port": "18515"})


@pytest.fixture
def pair():
    server = run("ib_write_bw --qp=2", side="server")
    client = run("ib_write_bw 192.0.2.1 --qp=4 -R", messages=[ERROR])
    return server, client


def scope_of(server, client, run=None, ctx=None, item=None) -> Scope:
    return Scope([server, client], ctx or {}, run=run, server=server, client=client, item=item)


def test_message_binds_the_first_match_and_quotes_it(pair):
    scope = scope_of(*pair, run=pair[1])
    assert holds({"message": "C02", "fields": {"port": 18515}}, scope)
    assert scope.bound["message"] is ERROR and scope.evidence[0].line == 7
    assert not holds({"message": "C02", "fields": {"port": 1}}, scope_of(*pair, run=pair[1]))
    assert not holds({"message": "C02", "of": "other"}, scope_of(*pair, run=pair[1]))    # the server has none
    assert holds({"message": "*", "kind": "error"}, scope_of(*pair))


def test_differ_needs_both_sides_and_binds_the_parameter(pair):
    scope = scope_of(*pair)
    assert holds({"differ": "num_qps"}, scope)
    assert scope.bound["param"] == {"name": "num_qps", "label": "number of QPs", "option": "--qp",
                                    "server": 2, "client": 4}
    assert [e.note for e in scope.evidence] == ["server: number of QPs = 2", "client: number of QPs = 4"]
    assert not holds({"differ": "connection"}, scope_of(*pair))       # both RC by default: not compared
    assert not holds({"differ": "num_qps"}, Scope([pair[0]], {}, server=pair[0]))


def test_param_against_a_value_or_the_other_side(pair):
    scope = scope_of(*pair, run=pair[1])
    assert holds({"param": "num_qps", "op": ">", "value": 2}, scope)
    assert scope.evidence[0].note == "client: number of QPs = 4"
    assert holds({"param": "num_qps", "op": ">", "versus": "server"}, scope_of(*pair, run=pair[1]))
    assert not holds({"param": "num_qps", "op": "<", "versus": "server"}, scope_of(*pair, run=pair[1]))
    default = scope_of(*pair, run=pair[0])
    assert holds({"param": "connection", "op": "==", "value": "RC"}, default)
    assert default.evidence[0].note.endswith("(default)")


def test_option_feature_side_and_exists(pair):
    assert holds({"option": "rdma_cm", "of": "client"}, scope_of(*pair))
    assert not holds({"option": "rdma_cm", "of": "server"}, scope_of(*pair))
    assert holds({"side": "client"}, scope_of(*pair, run=pair[1]))
    assert not holds({"side": "server"}, scope_of(*pair, run=pair[1]))
    assert holds({"exists": "server"}, scope_of(*pair))
    assert not holds({"exists": "other"}, Scope([pair[1]], {}, run=pair[1], client=pair[1]))
    healthy = run("ib_write_bw", results=[bw_row()])
    assert holds({"feature": "completed"}, Scope([healthy], {}, run=healthy))
    assert holds({"feature": "results", "op": ">=", "value": 1}, Scope([healthy], {}, run=healthy))
    assert not holds({"feature": "completed"}, scope_of(*pair, run=pair[1]))


def test_fact_and_item():
    ctx = {"facts_view": {"memlock": {"soft": 65536}, "ports": [{"label": "mlx5_0 port 1", "state": "DOWN"}]}}
    scope = Scope([], ctx)
    assert holds({"fact": "memlock.soft", "op": "<", "value": 131072}, scope)
    assert scope.bound["fact"] == 65536 and scope.evidence[0].text == "memlock.soft = 65536"
    assert not holds({"fact": "memlock.hard", "op": "known"}, Scope([], ctx))
    assert holds({"fact": "memlock.hard", "op": "unknown"}, Scope([], ctx))
    item = Scope([], ctx, item=ctx["facts_view"]["ports"][0])
    assert holds({"item": "state", "op": "!=", "value": "ACTIVE"}, item)
    assert item.evidence[0].text == "mlx5_0 port 1 state = DOWN"
    assert not holds({"item": "state", "op": "==", "value": "ACTIVE"}, Scope([], ctx))   # no item


def test_all_keeps_evidence_only_when_every_part_holds(pair):
    scope = scope_of(*pair, run=pair[1])
    assert holds({"all": [{"message": "C02"}, {"option": "rdma_cm"}]}, scope)
    assert len(scope.evidence) == 2 and "message" in scope.bound
    failed = scope_of(*pair, run=pair[1])
    assert not holds({"all": [{"message": "C02"}, {"option": "all"}]}, failed)
    assert failed.evidence == [] and "message" not in failed.bound


def test_any_keeps_the_first_part_that_holds(pair):
    scope = scope_of(*pair, run=pair[1])
    assert holds({"any": [{"option": "all"}, {"message": "C02"}, {"option": "rdma_cm"}]}, scope)
    assert [e.line for e in scope.evidence] == [7]
    assert not holds({"any": [{"option": "all"}, {"side": "server"}]}, scope_of(*pair, run=pair[1]))


def test_not_keeps_no_evidence(pair):
    scope = scope_of(*pair, run=pair[1])
    assert holds({"not": {"option": "all"}}, scope) and scope.evidence == []
    assert not holds({"not": {"message": "C02"}}, scope_of(*pair, run=pair[1]))


def test_a_condition_it_does_not_understand_is_an_error(pair):
    with pytest.raises(ValueError):
        holds({"colour": "blue"}, scope_of(*pair))


def test_a_condition_on_every_run_reads_them_once_for_all_the_runs_it_is_tried_on(monkeypatch):
    """A rule tried on each of many runs without a partner, whose condition reads every run of the input, found the
    same messages again for each run (2,500 ranks' logs took ten minutes): it reads them once, and again only when
    the runs or the lines other findings explain change."""
    from rdmadoctor.engine import conditions
    runs = [run("ib_write_bw", messages=[Message("C02", "error", f"Couldn't connect {i}", i, f"n{i}.log", {})])
            for i in range(1, 30)]
    reads = []
    real = conditions._messages_found
    monkeypatch.setattr(conditions, "_messages_found", lambda *a: reads.append(1) or real(*a))
    cond = {"message": "C02", "of": "input"}
    ctx = {"runs": runs}
    scopes = [Scope(runs, ctx, run=r) for r in runs]
    assert all(holds(cond, s) for s in scopes)
    assert len(reads) == 1
    assert all(s.evidence[0].line == 1 and s.bound["message"] is runs[0].messages[0] for s in scopes)
    ctx["cited"] = {("n1.log", 1)}                  # a fallback rule's pass: what other findings explain is left out
    scope = Scope(runs, ctx, run=runs[3])
    assert holds(cond, scope) and scope.evidence[0].line == 2 and len(reads) == 2
    # a condition on the run alone is read for each run
    assert all(holds({"message": "C02"}, Scope(runs, ctx, run=r)) for r in runs[5:8]) and len(reads) == 5
