"""render/terminal.py: colour only on a terminal that takes it (NO_COLOR, TERM=dumb and a pipe get none,
FORCE_COLOR gets it anywhere), the pieces printed in order, and display widths counted as a terminal counts them."""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rdmadoctor.render.terminal import Terminal, cell_len

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = ROOT / "fixtures/handwritten/seed-qp-mismatch"


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("env, tty, coloured", [
    ({}, True, True),
    ({}, False, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": ""}, True, True),           # (set but empty: no-color.org says it does not count)
    ({"TERM": "dumb"}, True, False),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, False),
])
def test_colour_only_where_it_is_wanted(monkeypatch, env, tty, coloured):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = _Tty() if tty else io.StringIO()
    Terminal(out).print([("FAILURE", "bold red"), (" plain", "")])
    expected = "\x1b[1;31mFAILURE\x1b[0m plain\n" if coloured else "FAILURE plain\n"
    assert out.getvalue() == expected


def test_a_pipe_gets_the_same_plain_bytes_every_time():
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    outs = {subprocess.run([sys.executable, "-m", "rdmadoctor", "explain", str(SEED / "server.log"),
                            str(SEED / "client.log")], capture_output=True, env=env, timeout=120).stdout
            for _ in range(2)}
    assert len(outs) == 1
    out = outs.pop()
    assert b"qp-count-mismatch" in out and b"\x1b" not in out


def test_forced_colour_styles_the_verdict():
    env = dict(os.environ, FORCE_COLOR="1", TERM="xterm", COLUMNS="100")
    env.pop("NO_COLOR", None)
    out = subprocess.run([sys.executable, "-m", "rdmadoctor", "explain", str(SEED / "server.log"),
                          str(SEED / "client.log")], capture_output=True, env=env, timeout=120).stdout
    assert out.startswith(b"\x1b[1;31mFAILURE qp-count-mismatch"), out[:80]


def test_display_width_counts_wide_characters_twice_and_marks_not_at_all():
    assert cell_len("port 1") == 6
    assert cell_len("端口状态") == 8
    assert cell_len("ｆ") == 2
    assert cell_len("e\u0301") == 1
    assert cell_len("[✓] — …") == 7
