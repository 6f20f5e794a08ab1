"""The log parser on the shapes real pastes take."""
import io
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from rdmadoctor.logparse.streams import parse_paths, parse_streams, parse_text
from rdmadoctor.logparse.command import parse_command
from rdmadoctor.logparse.lines import perftest_gid, side_label
from rdmadoctor.logparse.reader import SourceReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED = FIXTURES / "handwritten" / "seed-qp-mismatch"

HEADER_TRIXIE = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : rxe0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: OFF\t\tLock-free      : OFF
 ibv_wr* API     : OFF\t\tUsing DDP      : OFF
 TX depth        : 128
 CQ Moderation   : 1
 CQE Poll Batch  : Dynamic
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 1
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
"""


def test_seed_two_files_sides_header_and_garbage_row():
    parsed = parse_paths([str(SEED / "server.log"), str(SEED / "client.log")])
    server, client = parsed.runs
    assert (server.side, client.side) == ("server", "client")
    assert server.header["num_qps"].value == "1" and client.header["num_qps"].value == "10"
    assert server.header["num_qps"].line == 9
    assert client.command.options == {"ib-dev": "mlx5_0", "qp": "10"}
    assert client.command.host == "192.168.100.1"
    assert server.results[0].size == 3472328296395452464
    assert [a.gid for a in server.addresses] == ["::ffff:192.168.100.1", "::ffff:192.168.100.2"]
    # the client's error was flattened into one line: three messages, one line number
    assert [(m.id, m.line) for m in client.messages] == [("X06", 18), ("X08", 18), ("X02", 18)]
    assert parsed.sources[1].flattened == 1


def test_both_sides_in_one_paste_with_separators_and_crlf():
    server = (SEED / "server.log").read_text()
    client = (SEED / "client.log").read_text()
    paste = "===== SERVER =====\n" + server + "\n===== CLIENT =====\n" + client
    parsed = parse_text(paste.replace("\n", "\r\n"))
    assert [r.side for r in parsed.runs] == ["server", "client"]
    assert parsed.runs[0].label.lower() == "server"
    assert parsed.runs[1].header["num_qps"].value == "10"


def test_both_sides_without_separators_or_commands():
    server = "\n".join(line for line in (SEED / "server.log").read_text().splitlines() if not line.startswith("[root"))
    client = "\n".join((SEED / "client.log").read_text().splitlines()[1:])
    parsed = parse_text(server + "\n" + client)
    assert [r.side for r in parsed.runs] == ["server", "client"]
    assert parsed.runs[0].side_reason.startswith("prints")


@pytest.mark.parametrize("invalid", [b"", b"\xff"])
def test_a_line_end_of_several_crs_is_one_line_end(invalid):
    # a CRLF file converted to CRLF again ends its lines with CR CR LF: read as one line end, the lines keep their
    # numbers (a lone CR still ends a line of its own); with a byte that is not UTF-8 the decoding path does the same
    raw = (b"Couldn't connect to 192.0.2.1:18515\r\r\nUnable to open file descriptor for socket connection\r\r\r\n"
           b" Unable to init the socket connection\rCouldn't connect to 192.0.2.1:18515" + invalid + b"\r\r\n")
    parsed = parse_streams([("x.log", io.BytesIO(raw))])
    assert [(m.id, m.line) for m in parsed.runs[0].messages] == [("C02", 1), ("C02", 2), ("C02", 3), ("C02", 4)]
    assert parsed.sources[0].total_lines == 4


def test_ansi_colour_nul_bytes_and_invalid_utf8_are_cleaned():
    raw = (b"\x1b[31mCouldn't connect to 192.0.2.1:18515\x1b[0m\r\n\x00\x01Unable to open file descriptor "
           b"for socket connection\xff\xfe\n Unable to init the socket connection\n")
    parsed = parse_streams([("x.log", io.BytesIO(raw))])
    run = parsed.runs[0]
    assert [m.id for m in run.messages] == ["C02", "C02", "C02"]
    assert run.messages[0].fields == {"host": "192.0.2.1", "port": "18515", "phase": "connect"}
    assert run.side == "client"
    assert parsed.sources[0].decode_errors > 0


def test_markdown_emphasis_around_a_line_is_removed_and_perftest_boxes_stay():
    # an issue's `_..._` around a pasted NCCL line (NVIDIA/nccl#769): the marker must not end up in the errno text
    # and a line posted as inline code (aws/aws-ofi-nccl#879); a code fence stays
    raw = (b"_misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out_\n"
           b"**ethernet_read_keys: Couldn't read remote address**  \n"
           b"************************************\n"
           b"* Waiting for client to connect... *\n"
           b"`fi_getinfo: -61 (No data available)`\n"
           b"```\n")
    reader = SourceReader("x.log", io.BytesIO(raw))
    assert [text for _, text in reader.lines()] == [
        "misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
        "ethernet_read_keys: Couldn't read remote address",
        "************************************",
        "* Waiting for client to connect... *",
        "fi_getinfo: -61 (No data available)",
        "```"]
    parsed = parse_streams([("x.log", io.BytesIO(raw))])
    fields = [m.fields for r in parsed.runs for m in r.messages if m.id == "NCCL.IB_MODIFY_QP_FAILED"]
    assert fields and fields[0].get("error") == "Connection timed out"
    # a paste whose lines end with a lone CR loses the markers too
    lone_cr = SourceReader("x.log", io.BytesIO(raw.split(b"\n")[0] + b"\rnext line\r"))
    assert [text for _, text in lone_cr.lines()] == [
        "misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out", "next line"]


def test_markdown_bold_inside_a_line_is_removed_and_code_and_runner_stars_stay():
    # ofiwg/libfabric#7368: a maintainer bolded the part of a kernel line that mattered
    raw = (b"[1899678.679848] mlx5_core 0000:5e:00.0: mlx5_cmd_check:824:(pid 46096): CREATE_QP(0x500) op_mod(0x0) "
           b"failed, **status limits exceeded(0x8),** syndrome (0x19c6d6)\n"
           b"    engine_core = EngineCoreProc(*args, **kwargs)\n"
           b"80/98 Test #80: test_spgmr .....***Failed    0.50 sec\n")
    reader = SourceReader("x.log", io.BytesIO(raw))
    assert [text for _, text in reader.lines()] == [
        "[1899678.679848] mlx5_core 0000:5e:00.0: mlx5_cmd_check:824:(pid 46096): CREATE_QP(0x500) op_mod(0x0) "
        "failed, status limits exceeded(0x8), syndrome (0x19c6d6)",
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        "80/98 Test #80: test_spgmr .....***Failed    0.50 sec"]
    parsed = parse_streams([("x.log", io.BytesIO(raw))])
    statuses = [m.fields.get("cmd_status_name") for r in parsed.runs for m in r.messages
                if m.id == "KERNEL.MLX5_CMD_FAILED"]
    assert statuses == ["limits exceeded"]


def test_smart_quotes_and_prompt_side_labels():
    paste = ("server$ ib_write_bw --ib-dev=mlx5_1\n"
             "client$ ib_write_bw --ib-dev=mlx5_0 192.168.100.1 --qp=10\n"
             "ethernet_read_keys: Couldn\u2019t read remote address\n")
    parsed = parse_text(paste)
    assert [r.side for r in parsed.runs] == ["server", "client"]
    assert parsed.runs[1].messages[0].id == "X06"


@pytest.mark.parametrize("invalid", [b"", b"\xff"])
def test_invisible_characters_a_chat_or_editor_adds_are_dropped(invalid):
    # a byte-order mark, zero-width spaces at a line's start and inside a word, a soft hyphen, a direction mark; the
    # same with a byte that is not UTF-8 elsewhere in the block (the decoding path)
    raw = ("\ufeffserver$ ib_write_bw --ib-dev=mlx5_1\n"
           "\u200bethernet_read_keys: Couldn't read re\u200bmote ad\u00address\u200e\n").encode() + invalid + b"\n"
    parsed = parse_streams([("x.log", io.BytesIO(raw))])
    run = parsed.runs[0]
    assert run.side == "server" and run.command is not None and run.command.tool == "ib_write_bw"
    assert [m.id for m in run.messages] == ["X06"]
    assert run.messages[0].text == "ethernet_read_keys: Couldn't read remote address"


def test_flattened_header_addresses_and_results_in_one_line():
    lines = HEADER_TRIXIE.splitlines() + [
        " local address: LID 0000 QPN 0x0011 PSN 0xddc4e3 RKey 0x000202 VAddr 0x007f3706732000",
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:00:02:02",
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]",
        " 65536      5000             16.77              14.45  \t\t   0.000231"]
    parsed = parse_text(" ".join(lines))
    run = parsed.runs[0]
    assert run.header["lock_free"].value == "OFF" and run.header["ddp"].value == "OFF"
    assert run.test == {"verb": "RDMA_Write", "tst": "BW", "atomic": None, "bidirectional": False}
    assert run.addresses[0].qpn == 0x11 and run.addresses[0].gid == "::ffff:192.0.2.2"
    assert run.results[0].size == 65536 and run.results[0].unit == "MiB/sec"
    assert run.results[0].values["bw_avg"] == pytest.approx(14.45)


def test_latency_rows_and_duration_rows():
    text = HEADER_TRIXIE.replace("RDMA_Write BW Test", "RDMA_Write Latency Test") + (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
        "   99% percentile[usec]   99.9% percentile[usec] \n"
        " 2       1000          0.98           3.61         1.01     \t       1.02        \t0.05   \t\t1.21"
        "    \t\t3.61   \n")
    run = parse_text(text).runs[0]
    assert run.results[0].kind == "lat" and run.results[0].values["t_typical"] == pytest.approx(1.01)
    dur = parse_text(" #bytes        #iterations       t_avg[usec]    tps average\n"
                     " 2       123456            1.10        901234.00\n")
    assert dur.runs[0].results[0].kind == "lat_dur"


@pytest.mark.parametrize("pair", ["bookworm", "mixed", "trixie"])
def test_the_dashes_a_read_latency_server_prints_once_it_closed_are_read(pair):
    # perftest's read_lat.c: the server prints RESULT_LINE after ctx_close_connection(), and no table
    recording = FIXTURES / "lab" / pair / "healthy-read-lat"
    server = parse_paths([str(recording / "server.log")]).runs[0]
    lines = (recording / "server.log").read_text().splitlines()
    remote = next(a.line for a in server.addresses if a.role == "remote")
    assert server.closed_line is not None and server.closed_line > remote
    assert set(lines[server.closed_line - 1].strip()) == {"-"} and server.result_header_line is None
    # the dashes before a table's titles are the table's: the client's, and every side of a bandwidth test
    client = parse_paths([str(recording / "client.log")]).runs[0]
    assert client.closed_line is None and client.result_header_line is not None
    for log in ("server.log", "client.log"):
        run = parse_paths([str(FIXTURES / "lab" / pair / "healthy-write-bw" / log)]).runs[0]
        assert run.closed_line is None and run.result_header_line is not None


def test_numbers_outside_a_result_table_are_not_rows():
    run = parse_text("Couldn't connect to 192.0.2.1:18515\n12 34 56 78\n").runs[0]
    assert run.results == []


def test_completion_error_both_generations():
    old = parse_text(" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\nscnt=128, ccnt=0\n")
    new = parse_text(" Completion with error at client\n Failed status-transport retry counter exceeded (12): "
                     "wr_id 0 syndrom 0x81\n scnt=128, ccnt=0\n")
    for parsed, name in ((old, None), (new, "transport retry counter exceeded")):
        m = [m for m in parsed.runs[0].messages if m.id == "T01S"][0]
        assert m.fields["status"] == "12" and m.fields.get("status_name") == name
        assert m.fields["syndrome"] == "0x81"


def test_negotiation_mismatch_and_old_typo():
    run = parse_text(" num_of_qps mismatch: local=1, remote=10\n Failed to negotiate parameters\n").runs[0]
    assert run.messages[0].fields["field"] == "num_of_qps" and run.messages[0].fields["remote"] == "10"
    old = parse_text(" Unable to read to socket/rdam_cm\n").runs[0]
    assert old.side == "server" and old.messages[0].fields["gen"] == "<=5.92"


def test_generated_catalogue_covers_uncurated_messages():
    run = parse_text(" Failed to deallocate PD - Device or resource busy\n Couldn't login. err=5.\n").runs[0]
    ids = [m.id for m in run.messages]
    assert ids[0] == "O02"
    assert ids[1] == "A:perftest_resources.c:ctx_open_device"


def test_a_generated_one_word_line_is_perftest_s_only_alone_on_its_line():
    # write_bw.c prints "Skipping" alone; Mooncake's "Skipping unavailable device: mlx5_0" is not perftest's
    alone = parse_text("Skipping\n").runs
    assert [m.id for r in alone for m in r.messages] == ["A:write_bw.c:main"]
    inside = parse_text("W0116 05:27:02.295555 20488 topology.cpp:164] Skipping unavailable device: mlx5_0\n").runs
    assert not [m for r in inside for m in r.messages if m.id.startswith("A:")]


def test_a_producer_catch_all_reads_only_the_lines_no_other_entry_reads():
    # NCCL's and UCX's error forms: a line another entry reads keeps that entry (the catch-all loses every overlap,
    # even to an entry of no more fixed text that starts later, as the devx one does), a line none reads is still an
    # error of that producer's run, whole
    known = parse_text("node1:1234:1250 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n"
                       "[1700000000.1] [node1:1234:0]   rc_mlx5_devx.c:99   UCX  ERROR "
                       "mlx5dv_devx_create_event_channel() failed: Protocol not supported\n").runs
    assert [m.id for r in known for m in r.messages] == ["NCCL.IB_ASYNC_EVENT", "UCX.MLX5_DEVX_CALL_FAILED"]
    unknown = parse_text("node1:1234:1250 [0] enqueue.cc:321 NCCL WARN Some failure no entry reads\n").runs
    assert [(r.producer, m.id, m.kind, m.text) for r in unknown for m in r.messages] == [
        ("nccl", "NCCL.WARN", "error", "NCCL WARN Some failure no entry reads")]


@pytest.mark.parametrize("line,tool,options,host", [
    ("ib_write_bw -d mlx5_0 --qp 10 -s4096 -aR 10.0.0.1", "ib_write_bw",
     {"ib-dev": "mlx5_0", "qp": "10", "size": "4096", "all": True, "rdma_cm": True}, "10.0.0.1"),
    ("sudo numactl -N 0 ./ib_send_lat --ib-dev=rxe0 -x 3", "ib_send_lat", {"ib-dev": "rxe0", "gid-index": "3"}, None),
    ("$ /usr/bin/ib_read_bw --report_gb -F node2 2>&1 | tee out", "ib_read_bw",
     {"report_gbits": True, "CPU-freq": True}, "node2"),
    ("ib_atomic_bw -A FETCH_AND_ADD fe80::1%eth0 --ipv6-addr", "ib_atomic_bw",
     {"atomic_type": "FETCH_AND_ADD", "ipv6-addr": True}, "fe80::1%eth0"),
])
def test_command_lines(line, tool, options, host):
    parsed = parse_command(line)
    assert parsed[0] == tool and parsed[2] == options and parsed[3] == host


@pytest.mark.parametrize("prose", [
    "  ib_write_bw            start a server and wait for connection",
    "ib_write_bw <host>     connect to server at <host>",
    "I ran ib_write_bw with --qp=10 on the client",
    "ib_write_bw --not-an-option",
])
def test_prose_and_usage_text_are_not_commands(prose):
    assert parse_command(prose) is None


def test_gid_conversion_and_side_labels():
    assert perftest_gid("254:128:00:00:00:00:00:00:158:99:192:255:254:101:171:144") == "fe80::9e63:c0ff:fe65:ab90"
    assert perftest_gid("00:00:00") is None
    assert side_label("===== SERVER =====") == "server"
    assert side_label("[client] node2 (192.168.1.2):") == "client"
    assert side_label("* Waiting for client to connect... *") is None
    assert side_label("the server and the client both crashed") is None


def test_a_huge_line_and_a_long_log_stay_bounded():
    text = "x" * 3_000_000 + "\n" + ("noise line\n" * 50_000) + "ethernet_read_keys: Couldn't read remote address\n"
    parsed = parse_text(text)
    assert parsed.sources[0].total_lines == 50_002
    assert parsed.sources[0].truncated
    assert parsed.runs[0].messages[0].line == 50_002


def test_result_row_after_a_warning_in_a_flattened_paste():
    """A healthy client paste flattened into one line, perftest's CPU-frequency warning between the table's titles
    and its row: the row is read (the run completed, it did not stall in the traffic)."""
    client = (FIXTURES / "real" / "felixfu-cx3-write-bw-healthy" / "client.log").read_text()
    assert "Conflicting CPU frequency" in client
    run = parse_text(" ".join(client.split("\n"))).runs[0]
    assert [(r.size, r.iterations) for r in run.results] == [(65536, 5000)]
    assert run.results[0].values["bw_avg"] == pytest.approx(4508.79)
    assert "T13" in [m.id for m in run.messages]


@pytest.mark.parametrize("offset", [-30, -10, -1, 0, 1])
def test_message_across_an_internal_cut_of_a_long_line(offset):
    """A line longer than reader.MAX_LINE is read in pieces; a message that crosses where one piece ends is found."""
    from rdmadoctor.logparse import reader
    message = "Couldn't connect to 192.0.2.1:18515"
    start = reader.MAX_LINE + offset
    line = "x" * (start - 1) + " " + message + " " + "y " * 20000
    assert len(line) > 2 * reader.MAX_LINE and line.index(message) == start
    run = parse_text(line + "\n").runs[0]
    assert [(m.id, m.fields.get("host"), m.line) for m in run.messages] == [("C02", "192.0.2.1", 1)]


def test_result_rows_are_summarised_not_listed():
    """Thousands of rows: every one counted, the rows that matter kept (first, last, best), min/median/max."""
    header = (SEED / "server.log").read_text().split("#bytes")[0]
    rows = "".join(f" 65536      5000           {9000 + i % 100}.00            {9000 + (i * 7) % 101}.50"
                   f"\t\t   0.146000\n" for i in range(20000))
    text = header + " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" + rows
    run = parse_text(text).runs[0]
    summary = run.row_summary
    assert summary["rows"] == summary["real_rows"] == 20000 and summary["sizes"] == [65536]
    assert len(run.results) <= 5 and len(run.results) + run.results_dropped == 20000
    measured = summary["measured"][0]
    assert (measured["column"], measured["min"], measured["max"]) == ("bw_avg", 9000.5, 9100.5)
    assert measured["median_exact"] and 9000.5 <= measured["median"] <= 9100.5
    best = max(run.results, key=lambda r: r.values["bw_avg"])
    assert best.values["bw_avg"] == 9100.5


def test_patterns_are_written_as_hyperscan_takes_them():
    """Hyperscan has no \\u escape; it scans a block, where a blank or a negated class must not reach the next line."""
    from rdmadoctor.logparse.prefilter import for_hyperscan
    assert for_hyperscan(r"driver '(?P<d>[^\s'\u2019\"]+)'$") == "driver '(?P<d>[^\\n\\s'’\\\"]+)'"
    assert for_hyperscan(r"a\s+[\s,][^]a]") == r"a\h+[\h,][^]\na]"
    assert for_hyperscan(r"a\Z|b$|[$\Z]|\\z|\$") == r"a|b|[$\Z]|\\z|\$"


@pytest.fixture(scope="module")
def hyperscan_prefilter():
    hs = pytest.importorskip("hyperscan")
    from rdmadoctor.logparse import prefilter
    sources = prefilter._sources()
    database = prefilter._compile(hs, sources)
    return prefilter.Prefilter(hs, database, prefilter.rows_database(hs), [s for s, _ in sources]) \
        if database is not None else None


def test_hyperscan_takes_every_pattern_that_makes_a_line_matter(hyperscan_prefilter):
    """One pattern hyperscan rejects would cost the prefilter a stand-in: every pattern compiles as it is, other
    producers' row patterns in their own database."""
    hs = pytest.importorskip("hyperscan")
    from rdmadoctor.logparse import prefilter
    assert hyperscan_prefilter is not None and prefilter.rows_database(hs) is not None


def test_every_catalogue_example_is_named_whatever_line_precedes_it(hyperscan_prefilter):
    """hyperscan lost a match anchored at a line's start in the whole database, after some lines and not others
    ("\tPort 1:" after "Node GUID: 0x...", ibv_devinfo's "\tstate:" lines): every example line of every catalogue,
    after several others in turn, is named."""
    import tomllib
    from rdmadoctor.logparse import catalog
    examples = []
    for path in catalog.catalogue_files():
        with open(path, "rb") as f:
            examples += [e for entry in tomllib.load(f)["message"] for e in entry.get("examples", [])
                         if "\n" not in e and e.isascii()]
    examples = sorted(set(examples))
    assert len(examples) > 500
    block = "".join(f"{line}\n" for line in examples + examples[::-1] + examples[1::2] + examples[::2]).encode()
    # (other producers' result rows are named by the database of rows, in the gaps between named lines)
    named = {end for end, _ in hyperscan_prefilter.matches(block)} | set(hyperscan_prefilter.row_lines(block) or ())
    ends, missed = 0, []
    for line in block.split(b"\n")[:-1]:
        ends += len(line) + 1
        if ends not in named:
            missed.append(line.decode())
    assert not missed, missed[:5]
    assert hyperscan_prefilter.matches(b"\tNode GUID: 0x98039b03009283de\n\tPort 1:\n")


def test_every_catalogue_example_is_named_by_its_own_pattern_inside_a_block(hyperscan_prefilter):
    """The classifier tries only the patterns the database names on a line: an example named by some other pattern
    but not its own loses its message. Every example, deep inside a block of them all, is named by its own."""
    import re
    from rdmadoctor.logparse import catalog, prefilter
    where: dict = {}
    for i, source in enumerate(hyperscan_prefilter.sources):
        where.setdefault(source, set()).add(i)
    rows = set(prefilter._row_sources())       # (named by the database of rows, in the gaps)
    wanted = []
    for source, lines in catalog.examples_by_source().items():
        if source in rows:
            continue
        regex = re.compile(source, re.IGNORECASE)
        wanted += [(line, where[source]) for line in lines
                   if "\n" not in line and line.isascii() and regex.search(line)]
    assert len(wanted) > 1000
    block, ends = b"\n" * 300, []
    for line, _ids in wanted[::-1] + wanted:
        block += line.encode() + b"\n"
        ends.append(len(block))
    named = dict(hyperscan_prefilter.matches(block))
    missed = [line for (line, ids), end in zip(wanted[::-1] + wanted, ends)
              if ids.isdisjoint(named.get(end, ())) and -1 not in named.get(end, ())]
    assert not missed, missed[:5]


def test_a_pattern_hyperscan_loses_past_a_blocks_start_is_stood_in_for(monkeypatch):
    """hyperscan names "# OSU MPI Latency Test" by `#\\s*OSU...` at a block's start and, beside `#\\s*Out of bounds
    values`, never some 25 bytes into one: the compiled database puts the pattern's literal in its place."""
    hs = pytest.importorskip("hyperscan")
    from rdmadoctor.logparse import catalog, prefilter
    osu, bounds = r"#\s*OSU\s+MPI\b.*\bTest\b", r"#\s*Out of bounds values\s*:\s*\d+"
    monkeypatch.setattr(catalog, "examples_by_source", lambda: {osu: ["# OSU MPI Latency Test v5.6.1"],
                                                               bounds: ["# Out of bounds values : 0 OK"]})
    monkeypatch.setattr(prefilter, "_row_sources", lambda: [])
    database = prefilter._compile(hs, [(osu, "osu"), (bounds, "out of bounds")])
    for padding in (b"", b"\n" * 40, b"mpirun --mca btl self,vader,tcp ./osu_latency\n"):
        named: list = []
        database.scan(padding + b"# OSU MPI Latency Test v5.6.1\n",
                      match_event_handler=lambda p, _s, _e, _f, _c, to=named: to.append(p))
        assert 0 in named, padding


def test_the_compiled_databases_are_cached_and_read_back(tmp_path, monkeypatch):
    """The first large input compiles both databases and keeps them in the cache; the next run reads them back and
    finds the same lines (a row of another producer's table among them)."""
    pytest.importorskip("hyperscan")
    from rdmadoctor.logparse import prefilter
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("RDMADOCTOR_PREFILTER", "on")
    monkeypatch.setattr(prefilter, "_LOADED", {})
    compiled = prefilter.load(None)
    (cached_file,) = (tmp_path / "rdmadoctor").glob("prefilter-*.hsdb")
    monkeypatch.setattr(prefilter, "_LOADED", {})
    read_back = prefilter.load(None)
    assert compiled is not None and read_back is not None and read_back is not compiled
    data = b"kernel: noise\nethernet_read_keys: Couldn't read remote address\n" \
           b"1k      100     =100     200k        0.92s      0.22    4622.23       0.00\n"
    assert read_back.matches(data) == compiled.matches(data) and read_back.matches(data)
    assert read_back.row_lines(data) == compiled.row_lines(data) == [len(data)]
    assert cached_file.stat().st_size > 8


def test_the_prefilter_parses_as_every_line_read(hyperscan_prefilter, monkeypatch):
    from rdmadoctor.logparse import prefilter
    text = ((SEED / "client.log").read_text() + "kernel: noise 1\n"
            "libibverbs: Warning: couldn't load driver 'libmlx4-rdmav34.so': No such file\n"
            "ucp_worker.c:1783 UCX  INFO  ep_cfg[1]: tag(rc_mlx5/mlx5_0:1);\n" + " 65536  5000  1.0  1.0  0.1\n" * 5)
    monkeypatch.setattr(prefilter, "load", lambda *_a: None)
    every_line = parse_text(text)
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    scanned = parse_text(text)
    assert [(r.first_line, r.last_line, r.tool, [(m.id, m.line, m.fields) for m in r.messages], len(r.results))
            for r in scanned.runs] == \
        [(r.first_line, r.last_line, r.tool, [(m.id, m.line, m.fields) for m in r.messages], len(r.results))
         for r in every_line.runs]
    assert [m.fields["driver"] for r in scanned.runs for m in r.messages if "driver" in m.fields] == \
        ["libmlx4-rdmav34.so"]


def test_a_line_of_a_known_shape_reads_as_if_read_on_its_own():
    """The classifier reuses how it read a line for the lines of the same shape (the same text, other digits): for
    every line of the fixtures with digits in it, a variant with other digits reads exactly as a fresh classifier
    reads it, and counts as flattened the same."""
    import random
    from rdmadoctor.logparse.lines import LineClassifier, line_shape
    rng = random.Random(5)
    lines = dict.fromkeys(line for path in sorted(FIXTURES.rglob("*.log"))
                          for line in path.read_text(encoding="utf-8", errors="replace").split("\n")
                          if any(c.isdigit() for c in line))
    seen = LineClassifier()
    replayed = 0
    for line in lines:
        seen.classify(line)
        variant = "".join(str(rng.randrange(10)) if c.isdigit() and c.isascii() else c for c in line)
        fresh = LineClassifier()
        expected = fresh.classify(variant)
        before, known = seen.flattened, variant not in seen._cache and seen._shapes.get(
            line_shape(variant), ("unsafe",))[0] != "unsafe"
        assert seen.classify(variant) == expected, (line, variant)
        if known:
            replayed += 1
            assert seen.flattened - before == fresh.flattened, (line, variant)
    assert replayed > len(lines) // 2


def test_a_shape_rechecks_only_the_patterns_whose_text_its_lines_can_hold():
    """A pattern that tells digits apart is searched again in each line of a shape where it found nothing, unless the
    line lacks a needle of it without a digit: no line of the shape (the same text, other digits) can hold that
    needle, so the pattern is neither compiled nor searched for them. The fixtures have such patterns."""
    from rdmadoctor.logparse import catalog, lines
    seen = lines.LineClassifier()
    left_out = 0
    for path in sorted(FIXTURES.rglob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if not line.isascii() or not any(c.isdigit() for c in line):
                continue
            seen.classify(line)
            plan = seen._shapes.get(lines.line_shape(line))
            if plan is None or plan is lines._UNSAFE:
                continue
            low = line.lower()
            for _, pattern in plan[-1].recheck:
                assert all(n in low for n in pattern.needles if not any(c.isdigit() for c in n)), (line, pattern.id)
            left_out += sum(1 for _, p in seen.catalog.numbered(catalog.line_words(line))
                            if not p.digit_blind and lines._lacks_needle(low, p.needles))
    assert left_out > 0


@pytest.mark.parametrize("pattern, blind", [(r"Couldn't connect to (?P<host>\S+):(?P<port>\d+)", True),
                                            (r"[0-9a-f]+\b", True), (r"IPv4\s+tunnel", False),
                                            (r"syndrome\s+0x", False), (r"[1-9]", False), (r"(\w)\1", False)])
def test_which_patterns_tell_digits_apart(pattern, blind):
    from rdmadoctor.logparse.catalog import digit_blind
    assert digit_blind(pattern) is blind


def test_shell_words_split_as_the_shell_does():
    import shlex
    from rdmadoctor.logparse.command import shell_words
    for text in ("-d mlx5_0 -x 3\t192.0.2.1 | tee log", "-x 'NCCL_IB_HCA=mlx5_0 mlx5_1' -np 2", "a\\ b c", "-s 1\x0b2"):
        assert shell_words(text) == shlex.split(text, posix=True)
    with pytest.raises(ValueError):
        shell_words("-x 'open")


def test_a_failing_run_beyond_the_kept_ones_keeps_its_own_side():
    """Runs beyond the kept ones are let go; a later run may be given the memory (and the id) of one of them, and must
    not inherit what was known about it (its side's evidence)."""
    banner = "************************************\n* Waiting for client to connect... *\n" \
             "************************************\n"
    healthy = banner + HEADER_TRIXIE + \
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" \
        " 65536      5000           9000.00            9000.00\t\t   0.140000\n"
    failed = banner + "ethernet_read_keys: Couldn't read remote address\n Unable to read to socket/rdma_cm\n"
    runs = [r for r in parse_text(healthy * 300 + failed * 20).runs if r.messages]
    assert len(runs) == 20 and {r.side for r in runs} == {"server"}


def test_anchors_found_part_by_part_are_the_anchors():
    """A line where only one kind of anchor can be is searched for that kind alone: the same places as the whole
    alternation, on every fixture line and on flattened pastes."""
    from rdmadoctor.logparse.lines import _ANCHOR_RE, anchor_starts
    texts = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(FIXTURES.rglob("*.log"))]
    lines = {line for text in texts for line in text.split("\n")} | {" ".join(text.split("\n")) for text in texts}
    for line in lines:
        assert anchor_starts(line) == [m.start() for m in _ANCHOR_RE.finditer(line)], line[:200]


def test_every_fixture_parses_the_same_with_the_prefilter(hyperscan_prefilter, monkeypatch):
    """The prefilter only decides which lines reach the classifier: on every log fixture the runs come out as
    when every line is read (a bandwidth row cut after two numbers was lost between prefiltered lines)."""
    from rdmadoctor.logparse import prefilter

    def shape(parsed):
        return [(r.first_line, r.last_line, r.side, r.tool, [(m.id, m.line) for m in r.messages],
                 [(row.line, row.size) for row in r.results], r.row_summary) for r in parsed.runs]

    differ = []
    for path in sorted(FIXTURES.rglob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        monkeypatch.setattr(prefilter, "load", lambda *_a: None)
        every_line = shape(parse_text(text, path.name))
        monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
        if shape(parse_text(text, path.name)) != every_line:
            differ.append(str(path.relative_to(FIXTURES)))
    assert not differ, differ



def test_lines_beyond_ascii_parse_as_every_line_read(hyperscan_prefilter, monkeypatch):
    """The database reads bytes: a line with other characters (curly quotes, a Chinese prompt, Latin-1 read as
    UTF-8) is named for every pattern, so what the classifier finds in it is what it finds reading every line."""
    from rdmadoctor.logparse import prefilter
    extra = ("libibverbs: Warning: couldn\u2019t load driver \u2018libmlx4-rdmav34.so\u2019: No such file\n"
             "\u9519\u8bef\uff1aethernet_read_keys: Couldn't read remote address\n"
             "K\u00e4se \u00e9t\u00e9 65536 5000 1.0 1.0 0.1\n"
             "NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE \u2014 \u00b5s\n")
    text = (SEED / "client.log").read_text() + extra
    monkeypatch.setattr(prefilter, "load", lambda *_a: None)
    every_line = parse_text(text)
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    scanned = parse_text(text)

    def shape(parsed):
        return [(r.first_line, r.last_line, r.producer, [(m.id, m.line, m.fields) for m in r.messages])
                for r in parsed.runs]
    assert shape(scanned) == shape(every_line)
    data = extra.encode()
    named = [end for end, patterns in hyperscan_prefilter.matches(data) if prefilter.ANY in patterns]
    assert named == [i + 1 for i, byte in enumerate(data) if byte == 10]


def _scanned_as_every_line_read(text: str, hyperscan_prefilter) -> bool:
    """Whether the runs (lines, producer, messages, kept rows, row summary) come out the same with the prefilter as
    when every line is read (compared as text: a NaN figure equals itself)."""
    from unittest import mock

    from rdmadoctor.logparse import prefilter

    def shape():
        return repr([(r.first_line, r.last_line, r.producer, [(m.id, m.line) for m in r.messages], r.results,
                      r.row_summary) for r in parse_text(text).runs])
    with mock.patch.object(prefilter, "load", lambda *_a: None):
        every_line = shape()
    with mock.patch.object(prefilter, "load", lambda *_a: hyperscan_prefilter):
        return shape() == every_line


IMB_PINGPONG = ("#---------------------------------------------------\n"
                "# Benchmarking PingPong\n"
                "#---------------------------------------------------\n"
                "       #bytes #repetitions      t[usec]   Mbytes/sec\n"
                "            0         1000         0.85         0.00\n"
                "        65536          640        11.51      5693.54\n")

FI_ROWS = ("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
           "1k      100     =100     200k        0.92s      0.22    4622.23       0.00\n"
           "4k      100     =100     800k        0.93s      0.88    4651.10       0.00\n")


@pytest.mark.parametrize("after", [
    FI_ROWS,
    FI_ROWS.split("\n", 1)[1] + " 65536  5000  1.0  1.0  0.1\nkernel: noise 1.00s a b c\n",
    "kernel: noise\n" + IMB_PINGPONG.split("\n", 4)[4] + "$ mpirun -np 2 ./IMB-MPI1 PingPong\n" + IMB_PINGPONG,
    "7.25s  one two three\n  12  3.5\n" * 3,
])
def test_rows_after_a_failed_perftest_run_parse_as_every_line_read(after, hyperscan_prefilter):
    """After perftest has spoken with no table open, only another producer's row can matter among the lines the
    main database does not name; such a row may make its producer the one talking, and the lines after it are read
    as that producer's, as when every line is read."""
    text = (SEED / "client.log").read_text() + after
    assert _scanned_as_every_line_read(text, hyperscan_prefilter)


def _bw_table_header() -> str:
    """A recorded ib_write_bw client's output up to its table's titles."""
    text = (FIXTURES / "lab" / "bookworm" / "healthy-write-bw" / "client.log").read_text()
    return text[:text.index("\n", text.index("#bytes")) + 1]


def test_perftest_rows_between_matched_lines_are_read_in_bulk(hyperscan_prefilter, monkeypatch):
    """A row of perftest's open table has the shape of an MPI benchmark's row, so the prefilter names it; it is still
    perftest's row and is read with the stretch of rows around it, not line by line (a dense soak log read line by
    line runs at half the speed)."""
    from rdmadoctor.logparse import prefilter
    from rdmadoctor.logparse.streams import _Source
    rows = "".join(f" 65536      5000     {9000 + i}.12     {8900 + i}.34     0.1{i % 10}\n" for i in range(400))
    text = _bw_table_header() + rows
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    calls = []
    line = _Source.line
    monkeypatch.setattr(_Source, "line", lambda self, *a: calls.append(a[0]) or line(self, *a))
    runs = parse_text(text).runs
    assert sum(r.row_summary["rows"] for r in runs if r.row_summary) >= 400
    assert len(calls) < 100


def _bw_row(size: int, iterations: int, peak: float, average: float, rate: float) -> str:
    """A bandwidth row as perftest prints it (REPORT_FMT in src/perftest_parameters.h: fixed field widths)."""
    return " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f\n" % (size, iterations, peak, average, rate)


_SIZES = st.sampled_from([0, 2, 65536, 8388608, 999999999, 4294967296])
# figures of one width as often as not, so that stretches of one layout are common
_ROW_FIGURES = st.tuples(_SIZES, st.sampled_from([1, 5000, 5999, 999999999, 4294967296, 9999999999]),
                         st.sampled_from([0.0, 9000.0, 9160.45, 11234.5]),
                         st.sampled_from([9000.0, 9160.45, 9999.99, 0.05, 11234.5]), st.sampled_from([0.14, 0.15, 9.0]))


@settings(max_examples=80, deadline=None)
@given(figures=st.lists(_ROW_FIGURES, min_size=1, max_size=5), one_size=st.one_of(st.none(), _SIZES),
       copies=st.integers(1, 40),
       tail=st.sampled_from(["", " 65536      5000\n", "\n",
                             " 0          5000       1.00            1.00\t\t     0.1\n"]),
       sketch=st.sampled_from([None, 4, 16]), block=st.sampled_from([None, 300, 1000]))
def test_rows_laid_out_alike_add_up_as_rows_split_into_words(hyperscan_prefilter, figures, one_size, copies, tail,
                                                             sketch, block):
    """A stretch of rows of one layout (a soak at one size) is cut by column instead of split into words: the runs'
    kept rows and figures are the same either way, whatever the sizes (0 and 2^32 included), widths and rows that
    break the layout, and once the figures are sampled (`sketch`: values kept before sampling begins; `block`: bytes
    read at a time, so that a table comes in several stretches)."""
    from unittest import mock

    from rdmadoctor.logparse import reader, runs as runs_module
    if one_size is not None:
        figures = [(one_size, *f[1:]) for f in figures]
    text = _bw_table_header() + "".join(_bw_row(*f) for f in figures) * copies + tail
    with mock.patch.object(runs_module, "SKETCH_VALUES", sketch or runs_module.SKETCH_VALUES), \
            mock.patch.object(runs_module, "PENDING_TOKENS", sketch or runs_module.PENDING_TOKENS), \
            mock.patch.object(reader, "BLOCK", block or reader.BLOCK):
        cut = _cut_as_split(text, hyperscan_prefilter)
    assert sum(r[1]["rows"] for r in cut if r[1]) >= len(figures) * copies


@pytest.mark.parametrize("block,sketch,pending", [(300, 4, 8), (1000, 16, 1 << 14), (4096, 64, 8)])
def test_a_sampled_soak_of_one_layout_adds_up_as_rows_split_into_words(hyperscan_prefilter, block, sketch, pending):
    """Rows of one layout whose figures vary (and repeat their best), read in many stretches once the figures are
    sampled, their tokens converted in batches: the sample, the extremes and the first best row are the same as when
    every row is split into words."""
    from unittest import mock

    from rdmadoctor.logparse import reader, runs as runs_module
    average = {301: 9999.5, 433: 9000.5}        # extremes at odd places, which the sample skips
    rows = "".join(_bw_row(65536, 5000 + i % 900, 9000.25 + (i * 37) % 997, average.get(i, 9100.5 + (i * 7) % 23),
                           0.14) for i in range(600))
    with mock.patch.object(runs_module, "SKETCH_VALUES", sketch), \
            mock.patch.object(runs_module, "PENDING_TOKENS", pending), mock.patch.object(reader, "BLOCK", block):
        cut = _cut_as_split(_bw_table_header() + rows, hyperscan_prefilter)
    measured = cut[-1][1]["measured"][0]
    assert (measured["min"], measured["max"], measured["values"]) == (9000.5, 9999.5, 600)
    assert not measured["median_exact"]


@pytest.mark.parametrize("odd", ["9000.00.5", "9000.", ".5000", "90.0.0", "9000.0x", "9,000.0"])
def test_rows_of_one_layout_with_what_perftest_cannot_print_parse_as_split_rows(hyperscan_prefilter, odd):
    rows = "".join(_bw_row(65536, 5000, 9000.0, 9000.0, 0.14).replace("9000.00", odd, 1) for _ in range(20))
    _cut_as_split(_bw_table_header() + rows, hyperscan_prefilter)


# a token perftest prints, twice as likely as one it cannot print
_ROW_TOKENS = st.one_of(st.sampled_from(["9000.00", "0.14", "0.000000", "65536"]),
                        st.sampled_from(["9000.00", "0.14", "0.000000", "65536"]),
                        st.sampled_from(["0", "4294967296", "1.2.3", ".5", "5.", "10.00.5", "9000.00.5", "-1", "1e5",
                                         "inf", "nan", "x", "9,000"]))


@settings(max_examples=150, deadline=None)
@example(rows=[("65536", "5000", ["9000.00.5", "0.14"], " ")], copies=3)       # a number with two points
@given(rows=st.lists(st.tuples(st.sampled_from(["65536", "65536", "8", "0", "4294967296", "x"]),
                               st.sampled_from(["5000", "5000", "10", "1.5", "-1"]),
                               st.lists(_ROW_TOKENS, min_size=0, max_size=5), st.sampled_from([" ", "\t", "   "])),
                     min_size=1, max_size=8),
       copies=st.integers(1, 30))
def test_any_table_of_tokens_parses_with_the_prefilter_as_when_every_line_is_read(hyperscan_prefilter, rows, copies):
    """Whatever a table's rows hold (numbers perftest cannot print, words, blank lines, rows repeated into stretches of
    one layout), the bulk paths neither crash nor read it differently from the line-by-line path."""
    text = _bw_table_header() + "".join(" " + blank.join([size, count, *more]) + "\n"
                                        for size, count, more, blank in rows) * copies
    assert _scanned_as_every_line_read(text, hyperscan_prefilter)


def _cut_as_split(text: str, hyperscan_prefilter) -> list:
    """The runs' rows, figures and last lines, asserted the same whether stretches of one layout are cut by column or
    split into words."""
    from unittest import mock

    from rdmadoctor.logparse import prefilter, runs as runs_module

    def outcome():
        return [(r.results, r.row_summary, r.last_line) for r in parse_text(text).runs]
    with mock.patch.object(prefilter, "load", lambda *_a: hyperscan_prefilter):
        cut = outcome()
        with mock.patch.object(runs_module, "_uniform_layout", lambda *_a: None):
            split = outcome()
    assert cut == split
    return cut


def test_a_soak_of_one_size_is_cut_by_column(hyperscan_prefilter, monkeypatch):
    """The rows of a soak at one size take the column path (bulk_rows does not split them into words)."""
    from rdmadoctor.logparse import prefilter, runs as runs_module
    text = _bw_table_header() + "".join(_bw_row(65536, 5000 + i, 9100.25, 9050.5 + i, 0.141234) for i in range(300))
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    laid_out = []
    uniform = runs_module._uniform_layout
    monkeypatch.setattr(runs_module, "_uniform_layout", lambda *a: laid_out.append(uniform(*a)) or laid_out[-1])
    summary = parse_text(text).runs[-1].row_summary
    assert any(spans is not None for spans in laid_out)
    assert summary["rows"] == 300 and summary["measured"][0]["max"] == 9349.5


@pytest.mark.parametrize("inside", ["", "  0.00s  1.2  3.4  5.6\n", "kernel: [ 1.0] mlx5 0.00s a b c\n",
                                    "     1024   1000   1.51   700.54\n", "\n#---\n"])
def test_rows_and_row_shaped_lines_inside_a_table_parse_as_every_line_read(inside, hyperscan_prefilter):
    """Lines with another producer's row shape inside perftest's open table are left to the stretch of rows; what
    is not perftest's row in that stretch is read line by line, as when every line is read."""
    rows = " 65536      5000     9000.12     8900.34     0.14\n" * 20
    text = "$ mpirun -np 2 ./IMB-MPI1 PingPong\n" + _bw_table_header() + rows + inside + rows
    assert _scanned_as_every_line_read(text, hyperscan_prefilter)




@pytest.mark.parametrize("scanned", [False, True])
def test_mpi_benchmark_rows_are_the_mpirun_runs_results(scanned, hyperscan_prefilter, monkeypatch):
    """IMB's rows under an mpirun command line are that run's measurements, read the same with the prefilter; the
    same numbers without an mpirun run open are nobody's (no Open MPI run is made up from a column of numbers)."""
    from rdmadoctor.logparse import prefilter
    from rdmadoctor.views import features
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter if scanned else None)
    command = "$ mpirun -np 2 --host n1,n2 --mca pml ucx ./IMB-MPI1 PingPong\n"
    runs = parse_text(command + IMB_PINGPONG).runs
    assert [(r.producer, features.results(r, {})) for r in runs] == [("ompi", 2)]
    assert [r.producer for r in parse_text(IMB_PINGPONG).runs if r.producer == "ompi"] == []


def test_row_text_prefix_is_the_run_of_row_bytes_at_the_start():
    """The fast test for a flattened table's window agrees with scanning for the first other byte, on any bytes."""
    import random

    from rdmadoctor.logparse.streams import _ROW_TEXT, _row_text_prefix
    rng = random.Random(5)
    alphabet = _ROW_TEXT + b"abcZ\n-+e\x00\xff"
    for _ in range(5000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert _row_text_prefix(data) == len(data) - len(data.lstrip(_ROW_TEXT)), data
    assert _row_text_prefix(b"65536 1000 11.53 11.52 0.022\t") == 29
    assert _row_text_prefix(b"65536 1000 x") == 11


@pytest.mark.parametrize("line, same, other", [
    # NCCL.IBV_CALL_FAILED writes a digit (mlx5dv_): its match is made again in each line of the shape
    ("node1:1234:1250 [0] misc/ibvwrap.cc:116 NCCL WARN Call to mlx5dv_reg_dmabuf_mr failed with error Bad address",
     "node7:9934:1950 [3] misc/ibvwrap.cc:316 NCCL WARN Call to mlx5dv_reg_dmabuf_mr failed with error Bad address",
     "node1:1234:1250 [0] misc/ibvwrap.cc:116 NCCL WARN Call to mlx0dv_reg_dmabuf_mr failed with error Bad address"),
    # a keyword with digits (fe80): pinned, a line of the shape with another word there is read on its own
    ("H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
     "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe80::966d:ae03:8b:df78%ib0<53249> with error 5, opcode 12564, len 12564, vendor err 49 (Send)",
     "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe30::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)"),
])
def test_a_shape_whose_reading_depends_on_some_digits_is_replayed_only_where_they_agree(line, same, other):
    """A line of a known shape is replayed when the digits a pattern writes (or a keyword holds) are where they were,
    and read on its own where they are not; either way it reads as a fresh classifier reads it."""
    from rdmadoctor.logparse import lines
    seen = lines.LineClassifier()
    seen.classify(line)
    plan = seen._shapes[lines.line_shape(line)]
    assert plan is not lines._UNSAFE and (plan[-1].verify or plan[-1].pinned)
    assert lines._replayable(same, plan[-1], None) is not None
    assert lines._replayable(other, plan[-1], None) is None
    for variant in (same, other):
        assert lines.line_shape(variant) == lines.line_shape(line)
        assert seen.classify(variant) == lines.LineClassifier().classify(variant), variant
    fields = [i.data.fields for i in seen.classify(same) if i.kind == "message"]
    assert fields and fields == [i.data.fields for i in lines.LineClassifier().classify(same) if i.kind == "message"]


@pytest.mark.parametrize("prefixes", [("nccl-", "nccl-tests-"), ("ucx-",), ("ompi-",), ("libfabric-",)])
def test_a_long_job_log_whose_runs_fill_up_parses_as_every_line_read(prefixes, hyperscan_prefilter, monkeypatch):
    """A job's log repeats its lines with other digits (ranks, pids, queue pairs, codes) until its runs are full; the
    lines a full run leaves out are counted without their messages being made (streams._Source._repeat_left_out).
    Runs, kept messages, what each run left out, and the lines read as flattened are as when every line is read."""
    import random
    from rdmadoctor.logparse import lines, prefilter
    rng = random.Random(11)
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((FIXTURES / "real").glob("*/*.log"))
            if p.parent.name.startswith(prefixes) and p.stat().st_size < 1 << 16]
    assert len(logs) >= 3

    def varied(line):
        return "".join(str(rng.randrange(10)) if c.isdigit() and rng.random() < 0.3 else c for c in line)

    # each log as a long job prints it: each line over and over (every rank, every queue pair), with other digits
    text = "".join(varied(line) + "\n" for log in logs for line in log.split("\n") for _ in range(30))
    # and a job that ends printing the same few messages until the end: its run's last lines are ones it leaves out
    classifier = lines.LineClassifier()
    messages = [line for line in logs[-1].split("\n") if any(
        i.kind == "message" and i.data.pattern.producer != "perftest" for i in classifier.classify(line))]
    text += "".join(varied(line) + "\n" for line in messages[-5:] for _ in range(200))

    def shape(parsed):
        return [(r.first_line, r.last_line, r.producer, r.tool, r.messages_dropped,
                 [(m.id, m.line, m.kind, m.fields) for m in r.messages]) for r in parsed.runs]

    flattened = []
    made = lines.LineClassifier.__init__

    def counted(classifier):
        made(classifier)
        flattened.append(classifier)

    monkeypatch.setattr(lines.LineClassifier, "__init__", counted)
    monkeypatch.setattr(prefilter, "load", lambda *_a: None)
    every_line = shape(parse_text(text))
    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    left_out = []
    import rdmadoctor.logparse.streams as streams
    counting = streams._Source._repeat_left_out

    def spy(source, number, line, possible):
        done = counting(source, number, line, possible)
        left_out.append(done)
        return done

    monkeypatch.setattr(streams._Source, "_repeat_left_out", spy)
    scanned = shape(parse_text(text))
    assert scanned == every_line
    assert flattened[0].flattened == flattened[1].flattened
    assert sum(left_out) > 100       # (the lines were left out that way: the test shows that way reads the same)


def test_runs_that_can_no_longer_be_kept_parse_as_when_their_messages_are_made(hyperscan_prefilter, monkeypatch):
    """Past the runs a source keeps, once every kept run printed an error, no later run can take a place: its
    messages are counted, not made (producers.ProducerRuns._unkeepable). The runs kept, their messages, the runs let
    go and how each run is numbered are as when every message is made."""
    from rdmadoctor.logparse import kept, prefilter, producers
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((FIXTURES / "real").glob("*/*.log"))
            if p.parent.name.startswith("ucx-") and p.stat().st_size < 1 << 14]
    # UCX's logs, each a run, most of them failing: past the 256 runs kept, every kept run has printed an error
    text = "\n".join(logs[i % len(logs)] for i in range(kept.MAX_RUNS * 12))

    def shape(parsed):
        return ([(r.index, r.first_line, r.last_line, r.producer, r.tool, r.messages_dropped,
                  [(m.id, m.line, m.fields) for m in r.messages]) for r in parsed.runs],
                parsed.runs_dropped, [s.runs_dropped for s in parsed.sources])

    monkeypatch.setattr(prefilter, "load", lambda *_a: hyperscan_prefilter)
    sealed = []
    unkeepable = producers.ProducerRuns._unkeepable

    def spy(source_runs, run):
        sealed.append(unkeepable(source_runs, run))
        return sealed[-1]

    monkeypatch.setattr(producers.ProducerRuns, "_unkeepable", spy)
    counted = shape(parse_text(text))
    monkeypatch.setattr(producers.ProducerRuns, "_unkeepable", lambda _runs, _run: False)
    assert counted == shape(parse_text(text))
    assert sum(sealed) > 100


# MPICH's fatal-error report in its three generations of the OFI frame (src/mpid/ch4/netmod/ofi/ofi_impl.h
# MPIDI_OFI_CALL: file:line:function:error up to 4.3.0rc2, "default nic=" since; the text alone for a frame
# without details), behind the prefixes CTest and launchers add
MPICH_REPORTS = (
    ("3: Abort(1091215) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:\n"
     "3: MPID_Init(1138)..............:\n"
     "3: MPIDI_OFI_mpi_init_hook(1061): OFI addrinfo() failed (ofi_init.c:1061:MPIDI_OFI_mpi_init_hook:"
     "No data available)\n",
     {"function": "PMPI_Init", "rank": "0"}, {"call": "addrinfo()", "file": "ofi_init.c", "line": "1061",
                                             "error": "No data available"}),
    ("Abort(811174031): Fatal error in internal_Finalize: Other MPI error, error stack:\n"
     "flush_send(970)..................: OFI call tsenddata failed (default nic=bridge102: No such file or "
     "directory)\n",
     {"function": "internal_Finalize", "rank": None}, {"call": "tsenddata", "nic": "bridge102",
                                                     "error": "No such file or directory"}),
    ("[4] Abort(1615247) on node 4 (rank 4 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:\n"
     "[4] insert_addr_table_roots_only(462): OFI get address vector map failed\n",
     {"function": "PMPI_Init", "rank": "4"}, {"call": "get address vector map", "error": None}),
)


@pytest.mark.parametrize("text,fatal,call", MPICH_REPORTS)
def test_an_mpich_error_stack_reads_as_its_fatal_error_and_its_ofi_call(text, fatal, call):
    for pasted in (text, text.replace("\n", "\r\n"), text.replace("\n", " ")):
        messages = {m.id: m.fields for r in parse_text(pasted).runs for m in r.messages}
        assert {k: messages["MPICH.FATAL_ERROR"].get(k) for k in fatal} == fatal, pasted
        assert {k: messages["MPICH.OFI_CALL_FAILED"].get(k) for k in call} == call, pasted
        assert messages["MPICH.FATAL_ERROR"]["error_class"] == "Other MPI error"


@pytest.mark.parametrize("text", [
    "Abort(1) on node 0 (rank 0 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - process 0\n",
    # another program over libfabric (aws-ofi-nccl) prints "OFI ... failed" outside an MPICH error stack
    "ip-10-0-0-1:4242:4300 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data "
    "available\n",
])
def test_what_is_not_an_mpich_error_stack_reads_no_mpich_message(text):
    assert [m.id for r in parse_text(text).runs for m in r.messages if m.id.startswith("MPICH.")] == []


def test_ucx_infos_failed_interface_is_ucxs_line_not_perftests_failed_to_open():
    # ucx_info -d (src/tools/info/tl_info.c) after a transport's uct_iface_open() failed; perftest prints
    # "failed to open %s" (perftest_parameters.c), which the line also contains
    text = ("#      Transport: dc_mlx5\n#         Device: mlx5_0:1\n"
            "[1641387609.196524] [n1:181277:0]         dc_mlx5.c:505  UCX  ERROR mlx5dv_create_qp(DCT) failed: "
            "Invalid argument\n#   < failed to open interface >\n")
    runs = parse_text(text).runs
    assert [r.producer for r in runs] == ["ucx"]
    assert [(m.id, m.fields.get("function")) for m in runs[0].messages] == [
        ("UCX.IB_QUEUE_CREATE_FAILED", "mlx5dv_create_qp"), ("UCX.INFO_IFACE_OPEN_FAILED", None)]


@pytest.mark.parametrize("row,fields", [
    # mlnx-tools sbin/show_gids: VER and DEV from sysfs gid_attrs, both given
    ("mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:c000:020a\t192.0.2.10  \tv2\tens1f0np0",
     {"gid_index": "3", "ipv4": "192.0.2.10", "roce_version": "v2", "netdev": "ens1f0np0"}),
    ("mlx5_0\t1\t0\tfe80:0000:0000:0000:0e42:a1ff:fea1:b2c3\t\t\tv1\tens1f0np0",
     {"gid_index": "0", "roce_version": "v1", "netdev": "ens1f0np0"}),
    # neither given (pytorch/gloo#147's qedr port, the empty columns' tabs cut by the paste)
    ("qedr0\t1\t0\tfe80:0000:0000:0000:020e:1eff:fed7:a021", {"gid_index": "0", "roce_version": None, "netdev": None}),
    ("qedr0\t1\t1\t0000:0000:0000:0000:0000:ffff:c0a8:0a64\t192.168.10.100\t\t",
     {"gid_index": "1", "ipv4": "192.168.10.100", "roce_version": None, "netdev": None}),
    # an InfiniBand port: a type, no netdev
    ("mlx5_2\t1\t0\tfe80:0000:0000:0000:0c42:a103:00f1:2345\t\t\tv1\t", {"roce_version": "v1", "netdev": None}),
])
def test_show_gids_rows_with_and_without_their_ver_and_dev_values(row, fields):
    messages = [m for r in parse_text(row + "\n").runs for m in r.messages]
    assert [m.id for m in messages] == ["VERBS.SHOW_GIDS_ROW"]
    assert {k: messages[0].fields.get(k) for k in fields} == fields


def test_a_show_gids_table_without_ver_values_shows_a_roce_port_with_a_link_local_index_0():
    from rdmadoctor.logparse.pasted import facts_of
    text = (FIXTURES / "real" / "gloo-gloo-147-roce-default-gid-index-0" / "paste.log").read_text()
    parsed = parse_text(text)
    facts = facts_of(parsed.runs, [r.source for r in parsed.runs])
    port = facts["sections"]["devices"]["data"]["devices"][0]["ports"][0]
    assert port["link_layer"] == "Ethernet"
    assert [(g["index"], g["gid"], g["type"]) for g in port["gids"]] == [
        (0, "fe80::20e:1eff:fed7:a021", None), (1, "::ffff:192.168.10.100", None)]


@pytest.mark.parametrize("line", [
    "wc->status == IBV_WC_SUCCESS. 5 vs 0. Send for slot 0: Work Request Flushed Error",
    "2018-11-01 10:00:00 [rank 1] wc->status == IBV_WC_SUCCESS. 5 vs 0. Send for slot 0: Work Request Flushed Error",
    "  what():  [enforce fail at /root/gloo/gloo/transport/ibverbs/pair.cc:438] wc->status == IBV_WC_SUCCESS. 5 vs 0. "
    "Send for slot 0: Work Request Flushed Error",
    "gloo/transport/ibverbs/pair.cc:438] wc->status == IBV_WC_SUCCESS. 5 vs 0. Send for slot 0: Work Request Flushed "
    "Error",
    # a Markdown paste outside a code block, its underscores escaped
    "wc->status == IBV\\_WC\\_SUCCESS. 5 vs 0. Send for slot 0: Work Request Flushed Error",
])
def test_gloos_completion_line_is_gloos_however_it_was_pasted(line):
    runs = parse_text(line + "\n").runs
    assert [(r.producer, m.id, m.fields.get("status"), m.fields.get("status_name")) for r in runs
            for m in r.messages] == [("gloo", "GLOO.WC_ERROR", "5", "Work Request Flushed Error")]


def test_an_applications_own_completion_status_stays_rdma_cores_status_text():
    runs = parse_text("wc->status = 5 (Work Request Flushed Error)\n").runs
    assert [(r.producer, m.id) for r in runs for m in r.messages] == [("verbs", "VERBS.WC_STATUS_TEXT")]


def test_gloo_and_pytorch_gloo_settings_are_read():
    text = ("$ export GLOO_DEVICE_TRANSPORT=IBVERBS GLOO_SOCKET_IFNAME=ens1f0np0\n"
            "$ TORCH_GLOO_IBV_NAME=mlx5_0 TORCH_GLOO_IBV_INDEX=3 torchrun --nproc-per-node 8 train.py\n"
            "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/ibverbs/device.cc:116] Unable to find device "
            "named: ens1f0np0\n")
    run, = parse_text(text).runs
    assert {k: v.value for k, v in run.settings.items()} == {
        "GLOO_DEVICE_TRANSPORT": "IBVERBS", "GLOO_SOCKET_IFNAME": "ens1f0np0", "TORCH_GLOO_IBV_NAME": "mlx5_0",
        "TORCH_GLOO_IBV_INDEX": "3"}


@pytest.mark.parametrize("line,tool,side,options", [
    ("$ rdma_xclient -s 192.168.77.1 -c x", "rdma_xclient", "client", {"-s": "192.168.77.1", "-c": "x"}),
    ("./rdma_xserver -c x -p 7471", "rdma_xserver", "server", {"-c": "x", "-p": "7471"}),
    ("rdma_xclient -s node2", "rdma_xclient", "client", {"-s": "node2"}),
])
def test_librdmacms_xrc_examples_command_lines_are_read(line, tool, side, options):
    from rdmadoctor.logparse.producers import parse_command as parse_tool_command
    parsed = parse_tool_command(line)
    assert (parsed[0], parsed[3]) == (tool, options)
    run = parse_text(f"{line}\n{tool}: start\n").runs[0]
    assert (run.tool, run.side, run.command.options) == (tool, side, options)


@pytest.mark.parametrize("line, tool", [
    ("+ ibstat", "ibstat"),                    # bash's `set -x` trace of the command (PS4)
    ("++ rping -s -a 192.0.2.1 -v", "rping"),  # one more "+" in a nested shell
    ("+ sudo ibv_devinfo -v", "ibv_devinfo"),
    ("+ the ibstat output follows", None),     # a list item or a diff line is not a command
    ("+ibstat", None),
])
def test_a_shell_trace_line_is_a_command(line, tool):
    from rdmadoctor.logparse.producers import parse_command as parse_tool_command
    parsed = parse_tool_command(line)
    assert (parsed[0] if parsed else None) == tool


@pytest.mark.parametrize("line, settings", [
    ("$ export NCCL_IB_GID_INDEX=3", [("NCCL_IB_GID_INDEX", "3")]),
    ("mpirun -x UCX_TLS=rc,sm -np 2 ./a.out", [("UCX_TLS", "rc,sm")]),
    # a library's advice names a value to try, not one in force
    ("NCCL WARN ... HINT: you can set NCCL_CROSS_NIC=0 to avoid this", []),
    ("ib_md.c:316  UCX  ERROR ibv_reg_mr(address=0x2aaac0000000, length=4194304, access=0xf) failed: Invalid argument."
     " Application is using HUGE pages. Please set environment variable RDMAV_HUGEPAGES_SAFE=1", []),
])
def test_settings_a_line_shows(line, settings):
    from rdmadoctor.logparse import producers
    assert [(name, value) for name, value, _ in producers.settings_in(line)] == settings


def test_listed_ports_name_the_line_that_showed_each_ports_lid():
    from rdmadoctor.logparse.pasted import listed_ports
    text = ("hca_id:\tirdma0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tport_lid:\t\t1\n"
            "\t\t\tlink_layer:\t\tEthernet\n")
    parsed = parse_text(text)
    [(device, port, shown)] = listed_ports(parsed.runs, [r.source for r in parsed.runs])
    assert (device, port["lid"], port["link_layer"], port["state"]) == ("irdma0", 1, "Ethernet", "ACTIVE")
    assert shown["lid"].text.strip().startswith("port_lid") and shown["lid"].line == 6


def test_pasted_ports_keep_every_state_they_were_shown_in_in_order():
    # two `rdma link` runs of one host (iproute2 rdma/link.c's format), then an ibv_devinfo of mlx5_0: the facts keep
    # each port's last state and the states it went through, a state shown again right after itself counted once
    from rdmadoctor.logparse.pasted import facts_of
    listing = ("link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0\n"
               "link mlx5_1/1 state DOWN physical_state POLLING netdev ens1f1np1\n"
               "link mlx5_2/1 state ACTIVE physical_state LINK_UP netdev ens2f0np0\n")
    again = (listing.replace("1/1 state DOWN physical_state POLLING", "1/1 state ACTIVE physical_state LINK_UP")
             .replace("2/1 state ACTIVE physical_state LINK_UP", "2/1 state DOWN physical_state POLLING"))
    text = (f"$ rdma link\n{listing}$ rdma link\n{again}"
            "$ ibv_devinfo -d mlx5_0\nhca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n")
    parsed = parse_text(text)
    facts = facts_of(parsed.runs, [r.source for r in parsed.runs])
    shown = {(d["name"], p["port"]): (p["state"], p["states_shown"])
             for d in facts["sections"]["devices"]["data"]["devices"] for p in d["ports"]}
    assert shown == {("mlx5_0", 1): ("ACTIVE", ["ACTIVE"]), ("mlx5_1", 1): ("ACTIVE", ["DOWN", "ACTIVE"]),
                     ("mlx5_2", 1): ("DOWN", ["ACTIVE", "DOWN"])}


def test_a_tie_between_two_forms_of_one_message_goes_to_the_first_in_the_catalogue():
    """Two forms of one id keyed on different words, matching the same span with as much fixed text: the one the
    catalogue lists first wins, whichever order the set of a line's words gives their keywords."""
    from rdmadoctor.logparse.catalog import Catalog, Pattern
    line = "plugin: Fail to configure sriov; error = Link not found"

    def form(keyword: str, field: str) -> Pattern:
        return Pattern(id="K8S.SAME", kind="error", phase="setup", keyword=keyword, literal_length=20, curated=True,
                       source=rf"Fail to configure sriov; error = (?P<{field}>.+)", producer="k8s")

    first, second = form("sriov", "one"), form("configure", "two")
    assert [m.pattern for m in Catalog([first, second]).find(line)] == [first]
    assert [m.pattern for m in Catalog([second, first]).find(line)] == [second]
