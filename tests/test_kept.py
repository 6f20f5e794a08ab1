"""What a log keeps never hides its evidence: a run that prints more messages than it keeps still keeps every kind
it printed (the error after a thousand ranks' INFO lines, the status 12 after hundreds of flush errors:
logparse/kept.py), and a source with more runs than it keeps still examines the run that failed."""
import io

from rdmadoctor.engine.diagnose import explain
from rdmadoctor.logparse import kept, streams
from rdmadoctor.logparse.streams import parse_streams, parse_text
from rdmadoctor.logparse.kept import (MAX_INPUT_RUNS, MAX_MESSAGES, MAX_RUNS, InputRuns, KeptMessages, kind_of,
                                      trim)
from rdmadoctor.model import Message, Run

# NCCL's lines as ncclIbInitDevices() and ncclIbTest() print them (src/transport/net_ib.cc, 2.18-2.19)
NCCL_INFO = ("node{n}:{pid}:{tid} [{dev}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; "
             "OOB eth0:10.0.0.{n}<0>")
NCCL_WC = ("node3:25466:25600 [3] transport/net_ib.cc:1155 NCCL WARN NET/IB : Got completion from peer "
           "10.2.8.{peer}<25466> with error {status}, opcode 0, len 0, vendor err {vendor} (Recv) "
           "localGid fe80::966d:aeff:fe5d:0950 remoteGid fe80::1e92:cfff:fe87:ca50")


def _info_lines(count: int) -> list:
    return [NCCL_INFO.format(n=i % 200, pid=1000 + i, tid=2000 + i, dev=i % 8) for i in range(count)]


def _nccl_messages(text: str) -> list:
    runs = [r for r in parse_text(text).runs if r.producer == "nccl"]
    assert len(runs) == 1
    return runs[0].messages


def test_the_error_after_a_thousand_info_lines_is_kept_and_explained():
    text = "\n".join(_info_lines(1000) + [NCCL_WC.format(peer=2, status=12, vendor=129)]) + "\n"
    messages = _nccl_messages(text)
    assert len(messages) <= MAX_MESSAGES
    errors = [m for m in messages if m.id == "NCCL.IB_WC_ERROR"]
    assert [m.line for m in errors] == [1001]
    diagnosis = explain(parse_text(text))
    assert diagnosis.verdict.status == "failure"
    assert diagnosis.findings[0].cause == "wrong-gid-index"


def test_a_status_after_hundreds_of_another_status_is_kept():
    flushes = [NCCL_WC.format(peer=i % 250, status=5, vendor=249) for i in range(600)]
    text = "\n".join(_info_lines(50) + flushes + [NCCL_WC.format(peer=7, status=12, vendor=129)]) + "\n"
    messages = _nccl_messages(text)
    assert len(messages) == MAX_MESSAGES
    statuses = [m.fields["status"] for m in messages if m.id == "NCCL.IB_WC_ERROR"]
    assert statuses[-1] in (12, "12") and statuses.count(statuses[-1]) == 1
    # the INFO lines, less severe and repeated, gave their place up first; the first of them is still there
    assert messages[0].line == 1
    assert [m.line for m in messages] == sorted(m.line for m in messages)


def test_a_run_under_the_limit_keeps_every_message_in_order():
    text = "\n".join(_info_lines(120) + [NCCL_WC.format(peer=1, status=12, vendor=129)] * 3) + "\n"
    messages = _nccl_messages(text)
    assert [m.line for m in messages] == list(range(1, 124))


def test_one_kind_repeated_keeps_its_first_copies():
    text = "\n".join(_info_lines(MAX_MESSAGES + 300)) + "\n"
    runs = [r for r in parse_text(text).runs if r.producer == "nccl"]
    assert [m.line for m in runs[0].messages] == list(range(1, MAX_MESSAGES + 1))
    assert runs[0].messages_dropped == 300


def test_a_perftest_run_keeps_its_completion_error_after_many_kernel_lines():
    header = ["ib_write_bw -d mlx5_0 -x 3 192.0.2.1",
              "---------------------------------------------------------------------------------------",
              "                    RDMA_Write BW Test",
              " Dual-port       : OFF\t\tDevice         : mlx5_0",
              "---------------------------------------------------------------------------------------"]
    kernel = [f"mlx5_core 0000:3b:00.0: Port module event: module {i % 2}, Cable plugged" for i in range(700)]
    failure = [" Completion with error at client", " Failed status 12: wr_id 0 syndrom 0x81"]
    runs = parse_text("\n".join(header + kernel + failure) + "\n").runs
    perftest = [r for r in runs if r.producer == "perftest"]
    assert len(perftest) == 1
    ids = [m.id for m in perftest[0].messages]
    assert len(ids) <= MAX_MESSAGES
    assert "T01S" in ids and ids[-1] == "T01S"
    assert perftest[0].messages_dropped + len(ids) == 702


def _message(i: int, kind: str = "notice", mid: str = "X", **fields) -> Message:
    return Message(id=mid, kind=kind, text=f"line {i}", line=i, source="t", fields=fields)


def test_hostile_codes_stay_bounded():
    keep, run = KeptMessages(), Run(source="t", index=0, first_line=1, last_line=1)
    for i in range(5000):
        keep.add(run, _message(i, "error", "E", status=str(i)))
    assert len(run.messages) == MAX_MESSAGES
    assert run.messages_dropped == 5000 - MAX_MESSAGES


def test_kinds_are_told_apart_by_codes_not_by_addresses():
    a = _message(1, "error", "E", status="12", peer="10.0.0.1")
    b = _message(2, "error", "E", status="12", peer="10.0.0.2")
    c = _message(3, "error", "E", status="5", peer="10.0.0.1")
    assert kind_of(a) == kind_of(b) != kind_of(c)


def test_the_least_severe_repeated_kind_gives_its_place_up():
    keep, run = KeptMessages(), Run(source="t", index=0, first_line=1, last_line=1)
    for i in range(MAX_MESSAGES - 2):
        keep.add(run, _message(i, "error", "E", status="5"))
    keep.add(run, _message(1000, "notice", "N"))
    keep.add(run, _message(1001, "notice", "N"))
    keep.add(run, _message(1002, "warning", "W"))          # a new kind: one of the two notices goes
    assert [m.line for m in run.messages if m.id == "N"] == [1000]
    keep.add(run, _message(1003, "error", "E", status="12"))   # no notice repeats now: an error of status 5 goes
    assert len(run.messages) == MAX_MESSAGES
    assert sum(1 for m in run.messages if m.fields.get("status") == "5") == MAX_MESSAGES - 3
    assert run.messages[-1].line == 1003



def test_a_message_a_full_run_leaves_out_need_not_be_made():
    """admits() decides as add() does, for a message not made yet: the same messages kept, one left out never made."""
    offered, added = Run(source="t", index=0, first_line=1, last_line=1), Run(source="t", index=1, first_line=1,
                                                                            last_line=1)
    keep_offered, keep_added = KeptMessages(), KeptMessages()
    made = []

    def maker(message):
        def make():
            made.append(message.line)
            return message
        return make
    stream = ([_message(i, "notice", "N") for i in range(MAX_MESSAGES)] + [_message(1000, "notice", "N")]
              + [_message(1001, "error", "E", status="12"), _message(1002, "error", "E", status="12")])
    for m in stream:
        if keep_offered.admits(offered, m.kind, m.id, m.fields):
            offered.messages.append(maker(m)())
        keep_added.add(added, m)
    assert [m.line for m in offered.messages] == [m.line for m in added.messages]
    assert offered.messages_dropped == added.messages_dropped == 3
    # the repeated notice and the second status 12 were left out unmade; the first status 12 took a notice's place
    assert 1000 not in made and 1002 not in made and 1001 in made
    assert kept.kind_key("error", "E", {"status": "12", "peer": "x"}) == kind_of(stream[-1])

# ibv_rc_pingpong as rdma-core's libibverbs/examples/rc_pingpong.c prints a healthy run (its addresses, then the
# bandwidth and latency lines) and a run whose QP cannot be connected (pp_connect_ctx(): "Failed to modify QP to RTR",
# then main(): "Couldn't connect to remote QP")
PINGPONG = ["$ ibv_rc_pingpong -d rxe0 -g 1 192.0.2.1",
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0x0c7a5d, GID fe80::5054:ff:fe12:3456",
            "  remote address: LID 0x0000, QPN 0x000012, PSN 0x0c7a5e, GID fe80::5054:ff:fe12:3457",
            "8192000 bytes in 0.01 seconds = 6553.60 Mbit/sec",
            "1000 iters in 0.01 seconds = 10.00 usec/iter"]
PINGPONG_FAILED = PINGPONG[:2] + ["Failed to modify QP to RTR", "Couldn't connect to remote QP"]


def test_a_failed_run_after_more_healthy_runs_than_a_source_keeps_is_examined():
    text = "\n".join(PINGPONG * (MAX_RUNS + 44) + PINGPONG_FAILED + PINGPONG * 3) + "\n"
    parsed = parse_text(text)
    assert len(parsed.runs) == MAX_RUNS and parsed.sources[0].runs_dropped == 48
    failed = [r for r in parsed.runs if any(m.kind == "error" for m in r.messages)]
    assert [r.first_line for r in failed] == [(MAX_RUNS + 44) * len(PINGPONG) + 1]
    # it took the place of the last kept run: the first runs are still there, in order
    assert [r.first_line for r in parsed.runs[:3]] == [1, 6, 11]
    assert [r.first_line for r in parsed.runs] == sorted(r.first_line for r in parsed.runs)
    diagnosis = explain(parsed)
    assert diagnosis.verdict.status == "failure"
    assert diagnosis.notes == [f"<text>: 48 run(s) beyond the {MAX_RUNS} kept were not examined one by one (a run "
                               "that failed is kept in the place of one that did not, while one is left)"]


def test_more_healthy_runs_than_a_source_keeps_are_not_a_failure():
    parsed = parse_text("\n".join(PINGPONG * (MAX_RUNS + 44)) + "\n")
    assert len(parsed.runs) == MAX_RUNS and parsed.sources[0].runs_dropped == 44
    assert not any(m.kind == "error" for r in parsed.runs for m in r.messages)
    assert explain(parsed).verdict.status != "failure"


def test_failed_runs_beyond_a_source_of_failed_runs_keep_the_first():
    parsed = parse_text("\n".join(PINGPONG_FAILED * (MAX_RUNS + 20)) + "\n")
    assert len(parsed.runs) == MAX_RUNS
    assert [r.first_line for r in parsed.runs] == [1 + i * len(PINGPONG_FAILED) for i in range(MAX_RUNS)]


# -- all the inputs together -------------------------------------------------------------------------------------

def _inputs(*texts):
    return [(f"node{i:05d}.log", io.BytesIO(("\n".join(lines) + "\n").encode())) for i, lines in enumerate(texts)]


def _failed_status(parsed, status):
    return [r for r in parsed.runs if any(m.fields.get("status") in (status, str(status)) for m in r.messages)]


def test_many_inputs_keep_a_bounded_number_of_runs_and_every_kind_of_failure():
    flush = [NCCL_WC.format(peer=1, status=5, vendor=249)]
    texts = [PINGPONG] * 10 + [PINGPONG_FAILED] * (MAX_INPUT_RUNS - 10) + [flush] * 30 + [PINGPONG] * 5
    texts += [[NCCL_WC.format(peer=2, status=12, vendor=129)], PINGPONG_FAILED, PINGPONG]
    parsed = parse_streams(_inputs(*texts))
    assert len(parsed.runs) == MAX_INPUT_RUNS
    # the healthy runs gave their places to the flush errors but one (what it shows, no other kept run shows), then
    # the most repeated failure gave a place to the one error 12
    assert len([r for r in parsed.runs if not any(m.kind == "error" for m in r.messages)]) == 1
    assert len(_failed_status(parsed, 5)) == 9 and len(_failed_status(parsed, 12)) == 1
    assert parsed.runs_dropped == len(texts) - MAX_INPUT_RUNS
    assert [r.source for r in parsed.runs] == sorted(r.source for r in parsed.runs)
    diagnosis = explain(parsed)
    assert diagnosis.verdict.cause == "wrong-gid-index"
    assert any(note.startswith(f"{parsed.runs_dropped} run(s) beyond the {MAX_INPUT_RUNS} all the inputs keep")
               for note in diagnosis.notes)


def test_inputs_under_the_bound_keep_every_run(monkeypatch):
    parsed = parse_streams(_inputs(*[PINGPONG] * 40))
    assert len(parsed.runs) == 40 and parsed.runs_dropped == 0 and parsed.inputs_unlisted == 0
    assert all(len(s.lines) == len(PINGPONG) for s in parsed.sources)
    assert not any("all the inputs keep" in note for note in explain(parsed).notes)


def test_an_input_whose_runs_are_all_let_go_gives_its_lines_back_and_later_is_not_listed(monkeypatch):
    monkeypatch.setattr(streams, "InputRuns", lambda: InputRuns(limit=4))
    monkeypatch.setattr(streams, "MAX_LISTED_INPUTS", 6)
    parsed = parse_streams(_inputs(*[PINGPONG] * 10, ["noise only"] * 3, PINGPONG_FAILED))
    assert len(parsed.runs) == 4 and parsed.runs_dropped == 7
    assert [s.name for s in parsed.sources] == [f"node{i:05d}.log" for i in range(6)] + ["node00011.log"]
    assert parsed.inputs_unlisted == 5         # node6-9 (their runs let go) and node10 (no run): nothing kept
    assert [len(s.lines) for s in parsed.sources[:4]] == [len(PINGPONG)] * 4
    assert list(parsed.sources[4].lines) == [] and parsed.sources[4].truncated
    assert any(r.source == "node00011.log" and r.messages for r in parsed.runs)
    assert any(note.startswith("5 more input(s) were read and are not listed") for note in explain(parsed).notes)


def test_a_run_that_shows_what_no_kept_run_shows_is_kept_in_the_place_of_a_repeated_one():
    inputs = InputRuns(limit=4)
    runs = [Run(source=f"s{i}", index=0, first_line=1, last_line=1, producer="verbs") for i in range(7)]
    for run in runs[:5]:
        run.messages.append(_message(1, "error", "E", status="5"))
    runs[5].messages.append(_message(1, "warning", "W"))        # no error: a stall's warning
    assert [inputs.add(r) for r in runs[:6]] == [True] * 4 + [False, True]
    assert runs[5] in inputs.runs and runs[3] not in inputs.runs
    assert inputs.add(runs[6]) is True                         # no message at all: shows something new again
    assert inputs.runs == [runs[0], runs[1], runs[5], runs[6]] and inputs.dropped == 3


def test_a_failed_run_whose_failure_is_kept_already_is_let_go_once_every_kept_run_failed():
    inputs = InputRuns(limit=3)
    runs = [Run(source=f"s{i}", index=0, first_line=1, last_line=1) for i in range(6)]
    for i, run in enumerate(runs):
        status = "12" if i == 4 else "5"
        run.messages.append(_message(i, "error", "E", status=status))
    assert [inputs.add(r) for r in runs[:3]] == [True] * 3
    assert inputs.add(runs[3]) is False              # error 5 again: kept three times already
    assert inputs.add(runs[4]) is True               # error 12: takes the place of the last error 5
    assert inputs.add(runs[5]) is False
    assert inputs.runs == [runs[0], runs[1], runs[4]] and inputs.dropped == 3
    single = InputRuns(limit=1)
    assert single.add(runs[0]) and not single.add(runs[4])      # one kept run, its failure the only copy: kept


def test_kept_messages_are_halved_when_the_inputs_keep_too_many(monkeypatch):
    monkeypatch.setattr(kept, "MAX_INPUT_MESSAGES", 100)
    monkeypatch.setattr(kept, "MIN_RUN_MESSAGES", 10)
    inputs = InputRuns(limit=10)                # as MIN_RUN_MESSAGES is: what all may keep over the runs kept
    for i in range(12):
        run = Run(source=f"s{i}", index=0, first_line=1, last_line=1)
        run.messages.extend(_message(j, "notice", "N") for j in range(30))
        run.messages.append(_message(99, "error", "E", status="12"))
        inputs.add(run)
    assert inputs.messages == sum(len(r.messages) for r in inputs.runs) <= 100
    assert all(len(r.messages) == 10 and r.messages[-1].id == "E" for r in inputs.runs)
    assert all(r.messages_dropped == 21 for r in inputs.runs)


def test_trim_gives_up_the_last_copies_of_the_most_repeated_least_severe_kind_first():
    run = Run(source="t", index=0, first_line=1, last_line=1)
    run.messages.extend([_message(1, "error", "E", status="5"), _message(2, "notice", "N"),
                         _message(3, "error", "E", status="5"), _message(4, "notice", "N"),
                         _message(5, "notice", "N"), _message(6, "warning", "W"), _message(7, "error", "E", status=1)])
    trim(run, 5)
    assert [m.line for m in run.messages] == [1, 2, 3, 6, 7]
    trim(run, 3)                            # one copy of each kind is left, then whole kinds: the notice goes
    assert [m.line for m in run.messages] == [1, 6, 7]
    trim(run, 1)
    assert [m.line for m in run.messages] == [1] and run.messages_dropped == 6
    trim(run, 5)
    assert [m.line for m in run.messages] == [1]


def test_a_server_or_client_let_go_leaves_its_partner_alone_and_the_later_pairs_as_they_were():
    from rdmadoctor.engine.evaluate import pairs
    inputs = InputRuns(limit=6)
    runs = [Run(source=f"{side}{k}.log", index=0, first_line=k, last_line=k, side=side)
            for k in range(4) for side in ("server", "client")]
    runs[6].messages.append(_message(1, "error", "E", status="12"))         # server 3 failed: it shows something new
    for run in runs[:7]:
        inputs.add(run)
    # server 3 took the place of server 2 (every server had its client: the last went), leaving client 2 alone
    assert [r.source for r in inputs.runs][4:] == ["client2.log", "server3.log"]
    inputs.place_pairs()
    assert [(s.source, c.source) for s, c in pairs(inputs.runs)] == [("server0.log", "client0.log"),
                                                                      ("server1.log", "client1.log")]
    # client 3 repeats what kept clients show, but its server is kept: it takes the place of client 2, alone
    assert inputs.add(runs[7])
    inputs.place_pairs()
    assert [r.source for r in inputs.runs] == ["server0.log", "client0.log", "server1.log", "client1.log",
                                               "server3.log", "client3.log"]
    assert [(s.source, c.source) for s, c in pairs(inputs.runs)][2:] == [("server3.log", "client3.log")]
    # with nothing let go, pairs go by order as they always did
    whole = InputRuns(limit=8)
    fresh = [Run(source=r.source, index=0, first_line=r.first_line, last_line=1, side=r.side) for r in runs]
    for run in fresh:
        whole.add(run)
    whole.place_pairs()
    assert all(r.pair is None for r in whole.runs) and len(pairs(whole.runs)) == 4


def test_a_server_let_go_is_kept_after_all_when_its_client_is():
    from rdmadoctor.engine.evaluate import pairs
    inputs = InputRuns(limit=4)
    runs = [Run(source=f"{side}{k}.log", index=0, first_line=k, last_line=k, side=side)
            for k in range(3) for side in ("server", "client")]
    runs[5].messages.append(_message(1, "error", "E", status="12"))         # client 2 failed
    assert [inputs.add(r) for r in runs] == [True] * 4 + [False, True]      # server 2 repeated what servers show
    inputs.place_pairs()
    assert [r.source for r in inputs.runs] == ["server0.log", "client0.log", "client2.log", "server2.log"]
    assert [(s.source, c.source) for s, c in pairs(inputs.runs)] == [("server0.log", "client0.log"),
                                                                      ("server2.log", "client2.log")]
    assert inputs.dropped == 2 and len(inputs.runs) == 4
