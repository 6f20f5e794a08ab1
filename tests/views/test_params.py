"""views/params.py: each parameter read from the header, else the command line, else what the run shows
elsewhere, else perftest's default when the command line is known; which parameters must match."""
from __future__ import annotations

import pytest

from rdmadoctor.model import Message
from rdmadoctor.views import params

from tests.views.runs import bw_row, run


def test_the_header_beats_the_command_line_which_beats_the_default():
    shown = params.read(run("ib_write_bw --qp=2", header={"num_qps": "4"}), "num_qps")
    assert (shown.value, shown.source, shown.line, shown.text) == (4, "header", 10, "Number of qps   : 4")
    asked = params.read(run("ib_write_bw --qp=2"), "num_qps")
    assert (asked.value, asked.source, asked.text) == (2, "command", "ib_write_bw --qp=2")
    default = params.read(run("ib_write_bw"), "num_qps")
    assert (default.value, default.source) == (1, "default")
    assert default.text == "ib_write_bw  (no -q/--qp: perftest's default)"


def test_without_a_command_line_there_is_no_default():
    assert params.read(run(header={"mtu": "1024[B]"}), "num_qps") is None
    assert params.read(run(), "connection") is None


def test_a_header_value_that_does_not_convert_falls_through_to_the_command_line():
    value = params.read(run("ib_write_bw -q 3", header={"num_qps": "?"}), "num_qps")
    assert (value.value, value.source) == (3, "command")


@pytest.mark.parametrize("tool, size, iters", [
    ("ib_write_bw", 65536, 5000), ("ib_write_lat", 2, 1000), ("ib_read_bw", 65536, 1000),
    ("ib_atomic_bw", 8, 1000), ("ib_send_lat", 2, 1000),
])
def test_defaults_depend_on_the_test(tool, size, iters):
    r = run(tool)
    assert params.read(r, "size").value == size
    assert params.read(r, "iters").value == iters
    assert params.read(r, "size").source == params.read(r, "iters").source == "default"


def test_write_with_immediate_is_a_write_bandwidth_test_for_the_iterations_default():
    r = run("ib_write_bw --write_with_imm")
    assert params.read(r, "verb").value == "WRITE_IMM" and params.read(r, "iters").value == 5000


def test_size_suffixes_and_the_first_result_row():
    assert params.read(run("ib_write_bw -s 64K"), "size").value == 65536
    from_rows = params.read(run("ib_write_bw", results=[bw_row(size=4096, line=33)]), "size")
    assert (from_rows.value, from_rows.source, from_rows.line) == (4096, "results", 33)


def test_all_sizes_and_duration_take_size_and_iterations_away():
    swept = run("ib_write_bw -a")
    assert params.read(swept, "all_sizes").value is True and params.read(swept, "size") is None
    timed = run("ib_write_bw -D 10")
    assert params.read(timed, "duration").value == 10 and params.read(timed, "iters") is None
    several = run("ib_write_bw", results=[bw_row(size=2, line=31), bw_row(size=4, line=32)])
    value = params.read(several, "all_sizes")
    assert (value.value, value.source, value.line) == (True, "results", 32)


def test_flags_from_the_test_name_line_and_the_command_line():
    from_test = run("ib_write_bw", test={"verb": "RDMA_Write", "tst": "BW", "atomic": None, "bidirectional": True})
    assert params.read(from_test, "bidirectional").source == "header"
    assert params.read(run("ib_write_bw -b"), "bidirectional").value is True
    assert params.read(run("ib_write_bw"), "bidirectional").value is False
    assert params.read(run("ib_write_bw --report-per-port"), "report_per_port").value is True


def test_exchange_method_and_units():
    assert params.read(run("ib_write_bw -R"), "exchange_method").value == "rdma_cm"
    assert params.read(run("ib_write_bw -z"), "exchange_method").value == "rdma_cm"
    header = params.read(run("ib_write_bw -R", header={"data_ex_method": "Ethernet"}), "exchange_method")
    assert (header.value, header.source) == ("Ethernet", "header")
    assert params.read(run("ib_write_bw --report_gbits"), "report_units").value == "Gb/sec"
    shown = params.read(run("ib_write_bw", results=[bw_row(unit="MiB/sec")]), "report_units")
    assert (shown.value, shown.source) == ("MB/sec", "results")


def test_the_port_comes_from_a_message_when_the_command_line_does_not_set_it():
    message = Message("C02", "error", "Couldn't connect to 192.0.2.1:18600", 12, "t.log",
                      {"host": "192.0.2.1", "port": "18600"})
    value = params.read(run("ib_write_bw 192.0.2.1", messages=[message]), "port")
    assert (value.value, value.source, value.line) == (18600, "message", 12)
    assert params.read(run("ib_write_bw -p 20000", messages=[message]), "port").value == 20000
    assert params.read(run("ib_write_bw"), "port").value == 18515


def test_the_gid_index_typed_comes_before_the_header():
    value = params.read(run("ib_write_bw -x 3", header={"gid_index": "1"}), "gid_index")
    assert (value.value, value.source) == (3, "command")
    assert params.read(run("ib_write_bw", header={"gid_index": "1"}), "gid_index").value == 1


def test_gid_mode_is_read_on_infiniband_only():
    ib = run("ib_write_bw", header={"link_type": "IB", "gid_index": "0", "data_ex_method": "Ethernet"})
    assert params.read(ib, "gid_mode").value is True
    no_gid = run("ib_write_bw", header={"link_type": "IB", "data_ex_method": "Ethernet"})
    assert params.read(no_gid, "gid_mode").value is False
    assert params.read(run("ib_write_bw", header={"link_type": "Ethernet", "gid_index": "3"}), "gid_mode") is None


def test_must_match_and_the_comparison_order():
    assert params.must_match("num_qps") and params.must_match("tool")
    assert not params.must_match("mtu") and not params.must_match("host")
    compared = list(params.COMPARED)
    assert compared[:3] == ["tool", "verb", "test_kind"]
    assert compared[-5:] == ["link_type", "mtu", "device", "gid_index", "generation"]
    assert "host" not in compared and "transport" not in compared
    assert all(params.must_match(n) for n in compared[:-5])


def test_differences_compare_only_what_both_sides_show():
    server, client = run("ib_write_bw", side="server"), run("ib_write_bw 192.0.2.1 --qp=4")
    assert params.differences(server, client, ["num_qps"])[0][0] == "num_qps"
    assert params.differences(run("ib_write_bw"), run("ib_write_bw 192.0.2.1"), ["num_qps"]) == []   # defaults
    assert params.differences(run(), client, ["num_qps"]) == []                                     # unknown


def test_labels_options_and_how_a_default_names_its_option():
    assert params.label("num_qps") == "number of QPs" and params.option("num_qps") == "--qp"
    assert params.spelled(("qp",)) == "-q/--qp"
    assert params.spelled(("report_gbits",)) == "--report_gbits"
    assert params.spelled(("rdma_cm", "comm_rdma_cm")) == "-R/-z"


def test_every_parameter_reads_on_an_empty_run():
    table = params.table(run())
    assert set(table) == set(params.PARAMETERS)
    assert all(value is None for value in table.values())



@pytest.mark.parametrize("tool", ["ucmatose", "rping", "ibv_rc_pingpong", "ib_send"])
def test_a_program_that_is_not_perftest_has_no_perftest_verb(tool):
    from rdmadoctor.model import Command
    r = run()
    r.command = Command(tool, [tool, "192.0.2.1"], {}, "192.0.2.1", 1, f"{tool} 192.0.2.1")
    assert params.read(r, "verb") is None
