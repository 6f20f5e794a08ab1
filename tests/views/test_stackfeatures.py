"""views/stackfeatures.py on the rdma-core example programs: where a run that hung stopped, what the other side of
the paste shows. Pasted text, hand-written from rdma-core's strings (libibverbs/examples/rc_pingpong.c,
librdmacm/examples/rping.c, cmatose.c)."""
from __future__ import annotations

from rdmadoctor.logparse.streams import parse_text
from rdmadoctor.views import features

_LOCAL = "  local address:  LID 0x0000, QPN 0x000014, PSN 0x9d765a, GID ::ffff:192.0.2.2\n"
_REMOTE = "  remote address: LID 0x0000, QPN 0x000014, PSN 0xc5ed9c, GID ::ffff:192.0.2.1\n"


def _runs(text: str):
    parsed = parse_text(text)
    return parsed.runs, {"runs": parsed.runs}


def test_a_ucmatose_run_that_hangs_is_one_verbs_run_with_its_last_step():
    runs, ctx = _runs("root@h2:~# ucmatose -s 192.0.2.1 -S 16384\ncmatose: starting client\ncmatose: connecting\n"
                      "receiving data transfers\n^C\n")
    assert [(r.producer, r.tool) for r in runs] == [("verbs", "ucmatose")]
    assert features.feature(runs[0], "cmatose_step", ctx) == "receiving data transfers"
    assert features.feature(runs[0], "cmatose_stalled_at", ctx) == "data"


def test_ucmatose_stalls_at_connect_and_a_finished_run_does_not_stall():
    runs, ctx = _runs("$ ucmatose -s 192.0.2.1\ncmatose: starting client\ncmatose: connecting\n^C\n")
    assert features.feature(runs[0], "cmatose_stalled_at", ctx) == "connect"
    runs, ctx = _runs("$ ucmatose -s 192.0.2.1\ncmatose: starting client\ncmatose: connecting\n"
                      "receiving data transfers\nsending replies\ndata transfers complete\ntest complete\n"
                      "return status 0\n")
    assert features.feature(runs[0], "cmatose_stalled_at", ctx) is None


def test_a_pingpong_run_stalls_after_the_exchange_or_before_it():
    runs, ctx = _runs("$ ibv_rc_pingpong -d rxe0 -g 1 -m 4096 192.0.2.1\n" + _LOCAL + _REMOTE + "^C\n")
    assert features.feature(runs[0], "pingpong_stalled_at", ctx) == "exchange"
    assert features.feature(runs[0], "pingpong_mtu_option", ctx) == 4096
    runs, ctx = _runs("$ ibv_rc_pingpong -d rxe0 -g 1\n" + _LOCAL + "^C\n")
    assert features.feature(runs[0], "pingpong_stalled_at", ctx) == "connect"
    assert features.feature(runs[0], "pingpong_mtu_option", ctx) is None
    runs, ctx = _runs("$ ibv_rc_pingpong -d rxe0 -g 1 192.0.2.1\n" + _LOCAL + _REMOTE
                      + "8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec\n")
    assert features.feature(runs[0], "pingpong_stalled_at", ctx) is None


def test_the_other_side_shows_the_usable_gid_index_and_the_opened_device():
    runs, ctx = _runs("--- FILE server.log ---\n$ ibv_rc_pingpong -d rxe0 -g 1\n"
                      "  local address:  LID 0x0000, QPN 0x000012, PSN 0x1df8f7, GID ::ffff:192.0.2.1\n"
                      "--- FILE client.log ---\n$ ibv_rc_pingpong -d rxe0 -g 5 192.0.2.1\n"
                      "  local address:  LID 0x0000, QPN 0x000012, PSN 0x013b0c, GID ::\n")
    client = next(r for r in runs if r.side == "client")
    found = features.feature(client, "pingpong_gid_elsewhere", ctx)
    assert found is not None and found["index"] == 1 and found["gid"] == "::ffff:192.0.2.1"
    runs, ctx = _runs("$ ibv_rc_pingpong -d rxe0 -g 1\nIB device rxe0 not found\n"
                      "$ ibv_rc_pingpong -d rxe0 -g 1 192.0.2.1\n" + _LOCAL + "Couldn't connect to 192.0.2.1:18515\n")
    missing = next(r for r in runs if any(m.id == "VERBS.EX_DEVICE_NOT_FOUND" for m in r.messages))
    assert features.feature(missing, "device_opened_elsewhere", ctx)["device"] == "rxe0"


def test_an_rping_client_stopped_before_any_ping_stalled():
    runs, ctx = _runs("$ rping -c -a 192.0.2.1 -v -C 10\n^C\n")
    assert features.feature(runs[0], "rping_stalled", ctx) is True
    runs, ctx = _runs("$ rping -c -a 192.0.2.1 -v -C 10\nping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
                      "client DISCONNECT EVENT...\n")
    assert features.feature(runs[0], "rping_stalled", ctx) is False


def test_gpu_memory_reads_the_set_up_lines_down_to_the_run_before():
    """perftest's ROCm set-up lines (src/rocm_memory.c) are no messages: a run takes the first one after the end of
    the run before it, and the first match within a line. Its CUDA ones are messages (R14) of the run they follow."""
    text = ("$ ib_write_bw -d mlx5_0 192.0.2.1\n Couldn't connect to 192.0.2.1:18515\n"
            "Using ROCm Device with ID: 0, Name: gfx90a, PCI Bus ID: 0x29, GCN Arch: gfx90a\n"
            "$ ib_write_bw -d mlx5_0 192.0.2.1\nCouldn't allocate MR with error=14\nfailed to create mr\n"
            "creating CUDA Ctx\n$ ib_read_bw -d mlx5_0 192.0.2.1\n"
            "hipMalloc of 65536 bytes, then initializing CUDA\n Couldn't connect to 192.0.2.1:18515\n"
            "$ ib_send_bw -d mlx5_0 192.0.2.1\n Couldn't connect to 192.0.2.1:18515\n")
    parsed = parse_text(text)
    ctx = {"runs": parsed.runs, "sources": parsed.sources}
    assert [(r.first_line, r.last_line) for r in parsed.runs] == [(1, 2), (4, 7), (8, 10), (11, 12)]
    assert [features.feature(r, "gpu_memory", ctx) for r in parsed.runs] == [
        None, {"kind": "rocm", "how": "Using ROCm Device", "line": 3},
        {"kind": "rocm", "how": "hipMalloc", "line": 9}, None]


def test_gpu_memory_words_match_in_any_case_and_are_quoted_as_printed():
    """The input is searched once, lowered; each run's answer quotes the line's own words."""
    text = ("$ ib_write_bw -d mlx5_0 192.0.2.1\nINITIALIZING cuda\nCouldn't allocate MR with error=14\n"
            "$ ib_write_bw -d mlx5_0 192.0.2.1\nCouldn't allocate MR with error=14\n")
    parsed = parse_text(text)
    ctx = {"runs": parsed.runs, "sources": parsed.sources}
    assert [features.feature(r, "gpu_memory", ctx) for r in parsed.runs] == [
        {"kind": "cuda", "how": "INITIALIZING cuda", "line": 2}, None]
