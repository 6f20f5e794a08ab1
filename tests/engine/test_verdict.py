"""engine/verdict.py: one function picks every command's verdict, and never says ok without evidence of health."""
from pathlib import Path

from rdmadoctor.collectors import load_facts
from rdmadoctor.engine import diagnose
from rdmadoctor.logparse.streams import parse_paths, parse_text

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
HEALTHY = FIXTURES / "facts/lab/bookworm/facts-root.json"


def test_check_with_the_device_rung_not_inspected_is_unknown_not_ok():
    d = diagnose.check(load_facts(FIXTURES / "facts/lab/bookworm/facts-root-contended.json"))
    assert d.verdict.status == "unknown"
    assert "device: could not read devices: timed out" in d.verdict.summary
    assert any("--timeout" in step for step in d.verdict.next_steps)


def test_check_with_only_the_address_rung_unread_is_unknown():
    facts = load_facts(HEALTHY)
    facts["sections"]["netlink"] = {"status": "unavailable", "reason": "permission denied"}
    d = diagnose.check(facts)
    assert d.verdict.status == "unknown" and "address" in d.verdict.summary


def test_check_of_a_healthy_host_is_ok_and_says_what_it_did_not_inspect():
    d = diagnose.check(load_facts(HEALTHY))
    assert d.verdict.status == "ok"
    assert "not inspected: route" in d.verdict.summary       # no --peer: the route rung is not judged


def test_explain_without_any_result_or_error_is_unknown():
    d = diagnose.explain(parse_text("$ ib_write_bw -d mlx5_0\n"
                                    "************************************\n"
                                    "* Waiting for client to connect... *\n"
                                    "************************************\n"))
    assert d.verdict.status in ("unknown", "failure")
    assert d.verdict.status != "ok"


def test_a_paste_of_listings_alone_asks_for_the_failing_program_not_for_both_sides():
    # show_gids (mlnx-tools) prints a table and ends: no run of it is incomplete, and nothing in it is a fault
    listing = ("$ show_gids\nDEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n"
               "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"
               "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:c000:0201\t192.0.2.1  \tv2\tens1f0np0\n")
    d = diagnose.explain(parse_text(listing))
    assert d.verdict.status == "unknown" and "show_gids" in d.verdict.summary, d.verdict
    assert any("program that failed" in step for step in d.verdict.next_steps)
    d = diagnose.explain(parse_text(listing + "$ ib_write_bw -d mlx5_0 192.0.2.2\n"))
    assert "listings" not in d.verdict.summary           # a test program that printed nothing is not a listing


def test_healthy_kernel_lines_alone_ask_for_the_program_not_for_a_run_to_its_end():
    # mlx5_core's probe lines (drivers/net/ethernet/mellanox/mlx5/core/main.c): no error, and no program's run that a
    # paste could have cut short: the kernel never prints a result
    probe = ("[   10.643316] mlx5_core 0004:01:00.0: firmware version: 16.27.2048\n"
             "[   10.643346] mlx5_core 0004:01:00.0: 63.008 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x8 link)\n")
    d = diagnose.explain(parse_text(probe))
    assert d.verdict.status == "unknown" and "Only kernel lines" in d.verdict.summary, d.verdict
    assert any("program that failed" in step for step in d.verdict.next_steps)
    d = diagnose.explain(parse_text(probe + "$ ib_write_bw -d mlx5_0 192.0.2.2\n"))
    assert d.verdict.status == "unknown" and "Only kernel" not in d.verdict.summary, d.verdict


def test_a_read_latency_server_alone_finished_but_shows_no_result_and_asks_for_the_client():
    recording = FIXTURES / "lab/bookworm/healthy-read-lat"
    alone = diagnose.explain(parse_paths([str(recording / "server.log")]))
    assert alone.verdict.status == "unknown" and not alone.findings
    assert "ib_read_lat server finished normally" in alone.verdict.summary
    assert any("client's output" in step for step in alone.verdict.next_steps)
    both = diagnose.explain(parse_paths([str(recording / "server.log"), str(recording / "client.log")]))
    assert both.verdict.status == "ok"
    # the same server stopped at the client's address (its client hung or died): a stall, not a finish
    cut = parse_text("\n".join((recording / "server.log").read_text().splitlines()[:-1]) + "\n")
    stalled = diagnose.explain(cut)
    assert stalled.verdict.status == "unknown" and [f.rule for f in stalled.findings] == ["PT-STALLED"]


def test_explain_of_nothing_recognised_is_unknown():
    d = diagnose.explain(parse_text("hello world\nthis is not a log of any RDMA tool\n"))
    assert d.verdict.status == "unknown" and "recognised" in d.verdict.summary


def test_a_failure_after_hundreds_of_healthy_runs_is_still_the_verdict():
    healthy = (FIXTURES.parent / "tests" / "data" / "healthy-write-bw.log").read_text()
    failing = "$ ib_write_bw -d mlx5_0 -s 1048576 192.0.2.1\n Couldn't allocate MR\n Couldn't create IB resources\n"
    d = diagnose.explain(parse_text(healthy * 300 + failing))
    assert d.verdict.status == "failure" and d.verdict.cause == "memlock-limit", d.verdict
    assert any("run(s) beyond the" in note for note in d.notes)


def test_a_program_killed_after_its_results_is_not_healthy():
    """rping printed its pings (results) and then the shell's "Killed": no rule reads a lone rping killed, and the
    verdict must not be ok. rping's own "wait for ... state 10" after a disconnect is its normal end, and stays ok."""
    from rdmadoctor.engine import verdict
    from rdmadoctor.logparse import catalog
    assert set(verdict.ENDED_ABNORMALLY) <= {p.id for p in catalog.load().patterns}
    ping = "ping data: rdma-ping-%d: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\n"
    pings = "".join(ping % i for i in range(3))
    killed = diagnose.explain(parse_text("$ rping -c -a 192.0.2.1 -v -C 100000\n" + pings + "Killed\n"))
    assert killed.verdict.status == "unknown" and "Killed" in killed.verdict.summary
    ended = diagnose.explain(parse_text("$ rping -c -a 192.0.2.1 -v -C 3\n" + pings + "client DISCONNECT EVENT...\n"
                                        "wait for RDMA_WRITE_ADV state 10\n"))
    assert ended.verdict.status == "ok"
