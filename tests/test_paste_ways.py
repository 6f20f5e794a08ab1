"""However a log reaches rdmadoctor, it reads it as its programs printed it.

Every real fixture (fixtures/real) must keep its verdict when each of its lines carries what a paste, a log
collector or a job launcher puts in front of it (logparse/decorations.py), and when it comes HTML-escaped
(logparse/reader.py). Each way below writes its prefix as the tool that adds it does. Left on, a prefix hides
perftest's header, tables and rows and the tools' listings, whose patterns hold at a line's start: a healthy run
reads as `unknown`, a listing that shows a device goes unread.

And a listing that numbers its own lines, or lines that only share a program's name, keep what starts them.
"""
from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

from rdmadoctor.engine import diagnose
from rdmadoctor.logparse import decorations, reader
from rdmadoctor.logparse.streams import parse_paths

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
FIXTURES = sorted(p for p in REAL.iterdir() if (p / "meta.toml").is_file())
LOG_NAMES = ("server.log", "client.log", "paste.log")


def _each_line(prefix: str) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix + line for line in text.split("\n"))


WAYS: Dict[str, Callable[[str], str]] = {
    "markdown quote": lambda text: "\n".join(f"> {line}" if line else ">" for line in text.split("\n")),
    "mail quote, nested": _each_line("> > "),
    "markdown code block": lambda text: "\n".join(f"    {line}" if line else "" for line in text.split("\n")),
    "kubectl logs --timestamps": _each_line("2024-05-01T12:00:00.123456789Z "),
    "ts (moreutils)": _each_line("May 01 12:00:00 "),
    "journalctl": _each_line("May 01 12:00:00 node1 ib_write_bw[4242]: "),
    "journalctl -o short-iso": _each_line("2024-05-01T12:00:00+0000 node1 app[4242]: "),
    "srun --label": _each_line(" 3: "),
    "mpirun --tag-output (Open MPI 4)": _each_line("[1,0]<stdout>:"),
    "mpirun --tag-output (Open MPI 5)": _each_line("[1,0]<stdout>: "),
    "mpiexec -prepend-rank (MPICH)": _each_line("[0] "),
    "torchrun --tee": _each_line("[default0]:"),
    "torchrun (PyTorch 2.2+)": _each_line("[rank0]: "),
    "pdsh -w gpu-node01": _each_line("gpu-node01: "),
    "docker compose logs": _each_line("worker-1  | "),
    "kubectl logs --prefix": _each_line("[pod/trainer-0/main] "),
    "quoted srun --label": _each_line("> 0: "),
    "cat -n": lambda text: "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(text.split("\n"), 1)),
    "an editor's gutter, copied with the text": lambda text: "\n".join(
        f"{i:5d}  {line}" for i, line in enumerate(text.split("\n"), 1)),
    "html source": lambda text: html.escape(text),
}


def _verdicts(logs: List[Path]) -> Tuple[str, str, str]:
    verdict = diagnose.explain(parse_paths([str(p) for p in logs])).verdict
    return verdict.status, verdict.cause, verdict.confidence


@pytest.fixture(scope="module")
def as_printed() -> Dict[str, Tuple[str, str, str]]:
    return {f.name: _verdicts([f / n for n in LOG_NAMES if (f / n).is_file()]) for f in FIXTURES}


@pytest.mark.parametrize("way", list(WAYS))
def test_every_real_fixture_keeps_its_verdict(way, as_printed, tmp_path):
    assert len(FIXTURES) >= 150
    changed = []
    for fixture in FIXTURES:
        logs = []
        for name in LOG_NAMES:
            if (fixture / name).is_file():
                text = (fixture / name).read_text(encoding="utf-8", errors="replace")
                out = tmp_path / f"{fixture.name}-{name}"
                out.write_text(WAYS[way](text), encoding="utf-8")
                logs.append(out)
        got = _verdicts(logs)
        if got != as_printed[fixture.name]:
            changed.append(f"{fixture.name}: {as_printed[fixture.name]} -> {got}")
    assert not changed, "\n".join(changed)


def _lines(data: bytes) -> List[str]:
    return [text for _, text in reader.SourceReader("paste", io.BytesIO(data)).lines()]


@pytest.mark.parametrize("text", [
    # `rdma dev`: each device's own number
    "0: mlx5_0: node_type ca fw 16.35.2000 node_guid 0c42:a103:0065:6e8e sys_image_guid 0c42:a103:0065:6e8e\n"
    "1: mlx5_1: node_type ca fw 16.35.2000 node_guid 0c42:a103:0065:6e8f sys_image_guid 0c42:a103:0065:6e8e\n",
    # `ip -o addr`: an interface's number on each of its addresses
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever\n"
    "2: eth0    inet 192.0.2.1/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever\n"
    "2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever\n",
    # a program's name at the start of each of its lines
    "libibverbs: Warning: couldn't load driver 'libmlx4-rdmav34.so': libmlx4-rdmav34.so: cannot open shared object\n"
    "libibverbs: Warning: couldn't load driver 'libcxgb4-rdmav34.so': libcxgb4-rdmav34.so: cannot open shared "
    "object\n",
    # rdma-core's mlx5 provider names itself, then the host (mlx5_cq.c, mlx5_get_next_cqe's dump)
    "mlx5: gpu-node01: got completion with error:\nmlx5: gpu-node01: got completion with error:\n"
    "mlx5: gpu-node01: got completion with error:\n",
    # the kernel's lines of one netdev, without their timestamps (dmesg --notime | grep ib0)
    "ib0: enabling connected mode will cause multicast packet drops\nib0: mtu > 2044 will cause multicast packet "
    "drops.\nib0: Budget exhausted after napi rescheduled\n",
    # srun labels that do not repeat: nothing shows that they are labels
    "0: Couldn't connect to 192.0.2.2:18515\n1: Unable to init the socket connection\n",
    # one quoted line among plain ones
    "> ib_write_bw 192.0.2.2\n Number of qps   : 1\n Connection type : RC\n Using SRQ      : OFF\n TX depth : 128\n",
    # perftest's rows and the kernel log as printed
    " 65536      5000           11687.06            11686.48\t\t   0.186984\n"
    " 65536      5000           11690.01            11689.92\t\t   0.187039\n",
    "[  12.345678] mlx5_core 0000:3b:00.0: firmware version: 16.35.2000\n"
    "[  12.456789] mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged\n",
    # an OSU table's sizes (1, 2, 4 ...): numbers first, but they do not count up by one
    "1                       2.91\n2                       2.93\n4                       2.95\n"
    "8                       2.97\n16                      3.02\n",
])
def test_lines_that_only_look_decorated_keep_their_start(text):
    assert decorations.detect(text.encode()) is None
    assert _lines(text.encode()) == text.split("\n")[:-1]


def test_each_decoration_comes_off_as_the_tool_wrote_it():
    printed = [" Number of qps   : 1", "", "    fabric: efa", "CA 'mlx5_0'"]
    for way, decorate in WAYS.items():
        if way == "html source":
            continue
        assert [line.rstrip() for line in _lines((decorate("\n".join(printed)) + "\n").encode())] == \
            [line.rstrip() for line in printed], way


def test_a_severity_word_behind_a_time_stays_the_programs():
    # openpmix's PMIX_ERROR_LOG line under moreutils' ts: the time is ts's, "PMIX ERROR:" is PMIx's own start
    text = ("May 01 12:00:00 PMIX ERROR: PMIX_ERR_NOT_FOUND in file dstore_base.c at line 1567\n"
            "May 01 12:00:01 PMIX ERROR: PMIX_ERROR in file dstore_base.c at line 2334\n")
    assert _lines(text.encode()) == ["PMIX ERROR: PMIX_ERR_NOT_FOUND in file dstore_base.c at line 1567",
                                     "PMIX ERROR: PMIX_ERROR in file dstore_base.c at line 2334"]
    # a real syslog head keeps coming off whole
    text = ("May 01 12:00:00 node1 kernel: mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged\n"
            "May 01 12:00:01 node1 kernel: mlx5_core 0000:3b:00.0: firmware version: 16.35.2000\n")
    assert _lines(text.encode())[0].startswith("mlx5_core 0000:3b:00.0: Port module event")


def test_a_line_continued_from_the_block_before_keeps_its_start():
    # a line longer than a block is handed out in pieces: the text at the start of a later block is the line's,
    # not a new line that the launcher labelled
    long_line = "0: " * (reader.BLOCK // 2)
    data = f"0: first\n0: second\n{long_line}\n0: last\n".encode()
    pieces = _whole_lines(data)
    assert pieces[1] == "first" and pieces[2] == "second" and pieces[4] == "last"
    assert pieces[3] == long_line[3:]


def _whole_lines(data: bytes) -> Dict[int, str]:
    """Line number -> its text, a line handed out in pieces joined again."""
    whole: Dict[int, str] = {}
    for number, text in reader.SourceReader("paste", io.BytesIO(data)).lines():
        whole[number] = whole.get(number, "") + text
    return whole


def test_html_entities_read_as_their_characters():
    escaped = b"ethernet_read_keys: Couldn&#x27;t read remote address\n &lt;1&gt; &quot;x&quot; a&amp;b&nbsp;c\n"
    assert _lines(escaped) == ["ethernet_read_keys: Couldn't read remote address", ' <1> "x" a&b c']


@pytest.mark.parametrize("line", [b"a1" * 300_000, b"1" * 600_000 + b"x", b"n0de" + b"-7" * 300_000,
                                  b"[pod/" + b"p" * 600_000, b">" * 600_000, b"0: " * 200_000])
def test_a_hostile_first_block_is_read_whole(line):
    # every line of it starts like a decoration and none ends like one: the patterns' repetitions are bounded, so
    # the reading stays linear (an unbounded label pattern backtracks over the whole line at every line's start)
    data = b"\n".join([line] * 3) + b"\n"
    pieces = _whole_lines(data)
    assert sorted(pieces) == [1, 2, 3]
    assert all(len(text) >= len(line) - 8 for text in pieces.values())
