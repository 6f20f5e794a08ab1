"""engine/evaluate.py pairs(): a server and a client pair by the queue pair addresses they exchanged, else in order.

Every log here is a lab capture (fixtures/lab/bookworm: Soft-RoCE, perftest 4.5, see fixtures/lab/README.md),
combined as a user combines them: a client that retried, two tests' logs given node by node.
"""
import io
from pathlib import Path

from rdmadoctor.engine import diagnose
from rdmadoctor.engine.evaluate import exchanged, pairs
from rdmadoctor.logparse.streams import parse_streams

LAB = Path(__file__).resolve().parent.parent.parent / "fixtures" / "lab" / "bookworm"


def _parse(*inputs):
    """(name, [lab log paths]) -> one input each, the logs one after the other as a terminal shows them."""
    return parse_streams([(name, io.BytesIO(b"".join((LAB / p).read_bytes() for p in paths)))
                          for name, paths in inputs])


def _retried():
    # the first attempt ran before the server listened; the server was started, the second attempt (the same
    # command) passed
    first = (LAB / "server-not-running/client.log").read_bytes().replace(b"-n 100", b"-n 200")
    return parse_streams([("server.log", io.BytesIO((LAB / "healthy-write-bw/server.log").read_bytes())),
                          ("client.log", io.BytesIO(first + (LAB / "healthy-write-bw/client.log").read_bytes()))])


def test_a_client_that_retried_pairs_its_attempt_that_reached_the_server():
    parsed = _retried()
    server = next(r for r in parsed.runs if r.side == "server")
    failed, passed = [r for r in parsed.runs if r.side == "client"]
    assert not failed.results and passed.results
    assert pairs(parsed.runs) == [(server, passed)]
    # so the failed attempt is judged alone: nothing listened when it tried, not "no rule explains it"
    verdict = diagnose.explain(parsed).verdict
    assert (verdict.status, verdict.cause) == ("failure", "server-not-running")


def test_two_tests_given_node_by_node_pair_each_server_with_its_own_client():
    parsed = _parse(("node1.log", ["healthy-write-bw/server.log", "healthy-send-bw/client.log"]),
                    ("node2.log", ["healthy-send-bw/server.log", "healthy-write-bw/client.log"]))
    assert [(s.tool, c.tool) for s, c in pairs(parsed.runs)] == [("ib_write_bw", "ib_write_bw"),
                                                                ("ib_send_bw", "ib_send_bw")]
    # in order, the write server met the send client: a "test mismatch" between two healthy tests
    assert diagnose.explain(parsed).verdict.status == "ok"


def test_sides_whose_addresses_do_not_cross_pair_in_order():
    """Two sides of different tests: no address of one is the other's, so they are paired by order, and the
    mismatch between them is reported."""
    parsed = _parse(("server.log", ["healthy-write-bw/server.log"]), ("client.log", ["healthy-send-bw/client.log"]))
    servers = [r for r in parsed.runs if r.side == "server"]
    clients = [r for r in parsed.runs if r.side == "client"]
    assert exchanged(servers, clients) == []
    assert pairs(parsed.runs) == [(servers[0], clients[0])]
    assert diagnose.explain(parsed).verdict.cause == "option-mismatch"


def test_one_side_that_printed_only_its_own_address_is_no_evidence():
    parsed = _parse(("server.log", ["healthy-write-bw/server.log"]), ("client.log", ["healthy-write-bw/client.log"]))
    server = next(r for r in parsed.runs if r.side == "server")
    client = next(r for r in parsed.runs if r.side == "client")
    assert exchanged([server], [client]) == [(server, client)]
    client.addresses = [a for a in client.addresses if a.role == "local"]
    assert exchanged([server], [client]) == []
    assert pairs(parsed.runs) == [(server, client)]       # still a pair: by order


def test_the_example_programs_pair_by_the_addresses_they_print_too():
    """ibv_rc_pingpong prints its addresses as rdma-core's examples do (VERBS.EX_ADDRESS): two tests (the bookworm
    and the trixie pair's) given node by node pair by them, not by order."""
    a, b = "healthy/ibv_rc_pingpong", "../trixie/healthy/ibv_rc_pingpong"
    parsed = _parse(("node1.log", [f"{a}/server.log", f"{b}/client.log"]),
                    ("node2.log", [f"{b}/server.log", f"{a}/client.log"]))
    psn = {r.source + r.side: next(m.fields["psn"] for m in r.messages if m.fields.get("side") == "local")
           for r in parsed.runs}
    assert sorted(psn.values()) == ["01a566", "4e965c", "db23d6", "de2ce0"]
    assert [(s.source, c.source) for s, c in pairs(parsed.runs)] == [("node1.log", "node2.log"),
                                                                    ("node2.log", "node1.log")]


def test_the_address_messages_are_in_the_catalogue_with_the_fields_pairs_read():
    from rdmadoctor.engine.evaluate import ADDRESS_MESSAGES
    from rdmadoctor.logparse import catalog
    fields = catalog.fields_by_id(catalog.load())
    for message_id in ADDRESS_MESSAGES:
        assert {"side", "qpn", "psn"} <= fields[message_id]
