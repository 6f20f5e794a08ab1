"""views/features.py: what an engineer reads between the lines of a run."""
from __future__ import annotations

from rdmadoctor.model import Address, HeaderField, Message, ResultRow
from rdmadoctor.views import features

from tests.views.runs import bw_row, run

KEY_TEXT = int.from_bytes(b"0000:000", "big")          # 8 bytes of a key record read as a number


def test_a_garbage_row_is_a_key_record_read_as_numbers():
    r = run("ib_write_bw", results=[ResultRow(31, "bw", KEY_TEXT, 5000, {"bw_avg": 1.0}, "MB/sec")])
    found = features.garbage_row(r, {})
    assert found == {"line": 31, "size": KEY_TEXT, "iterations": 5000, "ascii": "0000:000"}
    assert features.results(r, {}) == 0 and not features.completed(r, {})
    assert features.garbage_row(run("ib_write_bw", results=[bw_row()]), {}) is None


def test_a_row_beyond_2_32_that_is_not_text_has_no_ascii():
    r = run("ib_write_bw", results=[ResultRow(31, "bw", (1 << 40) + 0x01, 5000, {"bw_avg": 1.0}, "MB/sec")])
    assert features.garbage_row(r, {})["ascii"] is None


def test_stalled_at_names_the_last_thing_printed():
    assert features.stalled_at(run("ib_write_bw"), {}) == "command"
    waiting = run("ib_write_bw")
    waiting.banner_line = 3
    assert features.stalled_at(waiting, {}) == "waiting"
    # a --use_cuda server sets up its GPU only after a client connected (ctx_init() follows establish_connection())
    waiting.messages = [Message("R14", "notice", "initializing CUDA", 4, "t.log", {})]
    assert features.stalled_at(waiting, {}) == "gpu-setup"
    waiting.messages = [Message("R14", "notice", "initializing CUDA", 2, "t.log", {})]
    assert features.stalled_at(waiting, {}) == "waiting"
    header = run("ib_write_bw", header={"num_qps": "1"})
    assert features.stalled_at(header, {}) == "header"
    header.addresses = [Address("local", 20)]
    assert features.stalled_at(header, {}) == "addresses"
    header.result_header_line = 30
    assert features.stalled_at(header, {}) == "traffic"


def test_a_server_that_measures_nothing_and_closed_did_not_stall():
    # perftest's read_lat.c and atomic_lat.c: the server prints RESULT_LINE after ctx_close_connection() and no table
    server = run("ib_read_lat", test={"verb": "RDMA_Read", "tst": "LATENCY"}, side="server")
    server.addresses = [Address("local", 20), Address("remote", 22)]
    assert features.stalled_at(server, {}) == "addresses" and not features.passive_server_closed(server, {})
    server.closed_line = 24
    assert features.passive_server_closed(server, {}) and features.stalled_at(server, {}) is None
    atomic = run("ib_atomic_lat", test={"verb": "Atomic", "tst": "LATENCY"}, side="server")
    atomic.closed_line = 24
    assert features.passive_server_closed(atomic, {})
    # a client, a bandwidth test's server, or a side that printed an error: the dashes alone show nothing
    for other in (run("ib_read_lat", test={"verb": "RDMA_Read", "tst": "LATENCY"}, side="client"),
                  run("ib_read_bw", test={"verb": "RDMA_Read", "tst": "BW"}, side="server"),
                  run("ib_write_lat", test={"verb": "RDMA_Write", "tst": "LATENCY"}, side="server"),
                  run("ib_read_lat", test={"verb": "RDMA_Read", "tst": "LATENCY"}, side="server",
                      messages=[Message("C02", "error", "Couldn't connect to 192.0.2.1:18515", 5, "t.log", {})])):
        other.closed_line = 24
        assert not features.passive_server_closed(other, {})


def test_a_run_with_results_or_an_error_did_not_stall():
    assert features.stalled_at(run("ib_write_bw", results=[bw_row()]), {}) is None
    error = Message("C02", "error", "Couldn't connect to 192.0.2.1:18515", 5, "t.log", {})
    assert features.stalled_at(run("ib_write_bw", messages=[error]), {}) is None


def test_completion_takes_the_first_error_and_the_counts_that_follow():
    messages = [Message("T01S", "error", "Completion with error at client", 40, "t.log",
                        {"status": "12", "status_name": "transport retry counter exceeded", "wr_id": "0"}),
                Message("T01C", "error", "scnt=128, ccnt=0", 41, "t.log", {"scnt": "128", "ccnt": "0"}),
                Message("T01S", "error", "Completion with error at client", 42, "t.log", {"status": "5"})]
    info = features.completion(run("ib_write_bw", messages=messages), {})
    assert info["status"] == 12 and info["name"] == "transport retry counter exceeded" and info["line"] == 40
    assert (info["scnt"], info["ccnt"]) == (128, 0)
    assert features.completion(run("ib_write_bw"), {}) is None


def test_bandwidth_against_the_link_rate():
    r = run("ib_write_bw", results=[bw_row(avg=5000.0, unit="Gb/sec", line=31),
                                    bw_row(avg=80.0, unit="Gb/sec", line=32)])
    assert features.bw_gbps(r, {}) == 5000.0 and features.bw_row(r, {}).line == 31
    assert features.bw_fraction(r, {"link_rate_gbps": 10000.0}) == 0.5
    assert features.bw_fraction(r, {}) is None


def test_the_feature_cache_is_per_run_and_name():
    ctx: dict = {}
    r = run("ib_write_bw")
    r.test_name = HeaderField("RDMA_Write BW Test", 3)
    assert features.feature(r, "stalled_at", ctx) == "header"
    r.test_name = None
    assert features.feature(r, "stalled_at", ctx) == "header"          # cached for this run
    assert features.feature(run("ib_write_bw"), "stalled_at", ctx) == "command"
