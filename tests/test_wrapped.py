"""logparse/wrapped.py: lines a mail client or a narrow terminal broke are joined where a message reads across the
break, and nowhere else; every line keeps its number."""
from __future__ import annotations

import io
import textwrap

from rdmadoctor.engine import diagnose
from rdmadoctor.logparse import reader, wrapped
from rdmadoctor.logparse.streams import parse_streams

# NCCL's lines as net_ib.cc and init.cc print them (a job's last lines before it failed)
NCCL = ("node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 192.0.2.2<59402> "
        "with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
        "node1:1234:1300 [0] NCCL INFO transport/net_ib.cc:1707 -> 6\n"
        "node1:1234:1234 [0] NCCL INFO init.cc:1554 -> 6\n")


def _lines(text: str):
    return [line for _, line in reader.SourceReader("paste", io.BytesIO(text.encode())).lines()]


def _verdict(text: str):
    return diagnose.explain(parse_streams([("paste", io.BytesIO(text.encode()))])).verdict


def _wrapped(text: str, width: int, quote: str = "") -> str:
    return "".join(quote + piece + "\n" for line in text.splitlines()
                   for piece in (textwrap.wrap(line, width, break_on_hyphens=False) or [""]))


def test_a_mail_quote_wrapped_at_72_reads_as_printed():
    as_printed = _verdict(NCCL)
    assert as_printed.rule is not None and as_printed.status != "ok"
    quoted = _wrapped(NCCL, 72, "> ")
    assert len(quoted.splitlines()) > len(NCCL.splitlines())          # the error line was broken
    got = _verdict(quoted)
    assert (got.status, got.cause, got.rule, got.candidates) == \
        (as_printed.status, as_printed.cause, as_printed.rule, as_printed.candidates)


def test_joined_lines_keep_every_later_line_at_its_number():
    text = _wrapped(NCCL, 72)
    lines = _lines(text)
    assert len(lines) == len(text.splitlines())
    assert lines[0].startswith("node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN") and "(Recv)" in lines[0]
    assert all(line == "" for line in lines[1:3])                     # the pieces it took in
    assert lines[3:] == text.splitlines()[3:]


def test_a_terminal_that_cut_lines_at_its_width_inside_words():
    cut = "".join(line[i:i + 80] + "\n" for line in NCCL.splitlines() for i in range(0, len(line), 80))
    assert _verdict(cut).rule == _verdict(NCCL).rule
    assert "with error 12, opcode 0" in _lines(cut)[0]


def test_lines_a_program_printed_apart_stay_apart():
    # two lines of the same NCCL process, each whole: the second starts as the first does
    text = ("node1:454:587 [0] include/socket.h:196 WARN Connection closed by remote peer\n"
            "node1:454:587 [0] INFO transport/net_socket.cu:149 -> 2\n")
    assert _lines(text) == text.splitlines()
    # a kernel stack whose frames each match on their own line
    frames = ("Call Trace:\n ? kmem_cache_alloc_trace+0x219/0x230\n ib_security_modify_qp+0x244/0x3b0 [ib_core]\n"
              " _ib_modify_qp+0x1ad/0x3a0 [ib_core]\n ipoib_init_qp+0x7b/0x1a0 [ib_ipoib]\n")
    assert _lines(frames) == frames.splitlines()


# libibverbs' warnings as rdma-core's libibverbs/dynamic_driver.c and init.c print them: the reason (dlerror()) takes
# the rest of the line, so the first piece of a broken line matches on its own, cut short
PROVIDER = ("libibverbs: Warning: couldn't load driver 'rxe': librxe-rdmav2.so: cannot open shared object file: No "
            "such file or directory\n"
            "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n"
            "    device                 node GUID\n"
            "    ------              ----------------\n")


def test_a_field_that_takes_the_rest_of_its_line_is_joined_across_a_mail_break():
    text = _wrapped(PROVIDER, 72, "> ")
    assert len(text.splitlines()) > len(PROVIDER.splitlines())
    joined = _lines(text)
    assert "librxe-rdmav2.so: cannot open shared object file: No such file or directory" in joined[0]
    got, as_printed = _verdict(text), _verdict(PROVIDER)
    assert (got.status, got.cause, got.rule) == (as_printed.status, as_printed.cause, as_printed.rule)


def test_a_terminal_cut_field_is_glued_without_a_blank():
    cut = "".join(line[i:i + 80] + "\n" for line in PROVIDER.splitlines() for i in range(0, len(line), 80))
    assert "cannot open shared object file" in _lines(cut)[0]


def test_a_cut_field_is_not_continued_by_a_line_a_program_started():
    # the next line starts with a program's own prefix, not the middle of a sentence (openucx/ucx's perftest.c)
    text = ("perftest.c:430  UCX  ERROR client failed. connect() failed: Connection refused, try again later\n"
            "perftest.c:890  UCX  ERROR failed to setup RTE transport: Input/output error\n")
    assert _lines(text) == text.splitlines()


def test_a_word_field_at_a_break_is_not_glued_into_the_next_word_of_a_mail():
    # Open MPI's help text (help-mpi-btl-openib.txt [pp rnr retry exceeded]) is wrapped by Open MPI itself; its first
    # line ends with the queue's name, which only a terminal's cut would continue inside the word
    text = ('The OpenFabrics "receiver not ready" retry count on a per-peer\n'
            "connection between two MPI processes has been exceeded.\n")
    assert _lines(text) == text.splitlines()


def test_an_input_wider_than_a_mail_or_a_terminal_is_not_looked_at():
    assert wrapped.width(b"x" * 150 + b"\n" + b"y" * 90 + b"\n") is None
    assert wrapped.width(b"short\nlines\n") is None
    assert wrapped.width(b"z" * 76 + b"\nrest\n") == 76


def test_the_searches_an_input_spends_are_bounded(monkeypatch):
    # 80-column lines of the catalogue's words, each line broken at the width: every break is a candidate
    words = "error failed port device completion status rdma cannot connect timeout memory register modify".split()
    lines = [(" ".join(words[i % len(words):] + words) * 2)[:80] for i in range(5000)]
    data = "".join(line + "\n" for line in lines).encode()
    searches = []
    search = wrapped._search

    def counted(text):
        searches.append(text)
        return search(text)

    monkeypatch.setattr(wrapped, "_search", counted)
    out = wrapped.rejoin(data, wrapped.width(data))
    assert 0 < len(searches) <= wrapped.SEARCHES
    assert out.count(b"\n") == data.count(b"\n")
