"""render/text.py: every line fits the width with hanging indents, words are never split, marks fall back to
ASCII when the output's encoding cannot carry them, and the result speaks Chinese when asked."""
import os
import subprocess
import sys
import io
import unicodedata
from pathlib import Path

import pytest
from rdmadoctor.engine import diagnose
from rdmadoctor.logparse.streams import parse_paths
from rdmadoctor.render import text
from rdmadoctor.render.terminal import Terminal

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = ROOT / "fixtures/handwritten/seed-qp-mismatch"
FACTS = ROOT / "fixtures/facts/lab/bookworm/facts-root.json"


def cells(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def run(*args, encoding="utf-8", lang_env=None):
    env = dict(os.environ, PYTHONIOENCODING=encoding, COLUMNS="200")
    env.pop("LANG", None), env.pop("LC_ALL", None)
    if lang_env:
        env["LANG"] = lang_env
    proc = subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, env=env, timeout=120)
    return proc.stdout.decode(encoding)


@pytest.mark.parametrize("args", [
    ("explain", str(SEED / "server.log"), str(SEED / "client.log")),
    ("explain", "-v", str(SEED / "server.log"), str(SEED / "client.log")),
    ("check", "--from", str(FACTS)),
    ("check", "--from", str(FACTS), "--lang", "zh"),
    ("rules", "list"),
])
def test_every_line_fits_80_columns_in_a_pipe(args):
    out = run(*args)
    assert out.strip()
    too_long = [ln for ln in out.splitlines() if cells(ln) > 80 and len(ln.split()) > 1]
    assert not too_long, too_long[:5]


def test_a_word_is_never_split_and_indents_hang():
    lines = text.wrap("Build the kernel with CONFIG_INFINIBAND=m and reboot; then load ib_uverbs.", 30, "  Fix: ")
    assert lines[0].startswith("  Fix: ") and all(ln.startswith("       ") for ln in lines[1:])
    assert any("CONFIG_INFINIBAND=m" in ln for ln in lines)
    long_token = text.wrap("see /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3 now", 20, "")
    assert "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3" in long_token


def test_the_same_text_in_a_pipe_every_time():
    assert run("check", "--from", str(FACTS)) == run("check", "--from", str(FACTS))


def test_marks_fall_back_to_ascii_when_the_terminal_cannot_show_them():
    out = run("check", "--from", str(FACTS), encoding="gbk")
    assert "[ok]" in out and "✓" not in out
    assert text.marks_for("utf-8")["pass"] == "[✓]" and text.marks_for("ascii")["arrow"] == "->"


def test_chinese_when_asked_or_from_the_locale():
    assert "端口状态" in run("check", "--from", str(FACTS), "--lang", "zh")
    assert "端口状态" in run("check", "--from", str(FACTS), lang_env="zh_CN.UTF-8")
    assert "Port state" in run("check", "--from", str(FACTS))


def test_rendering_in_process_respects_the_console_width():
    d = diagnose.explain(parse_paths([str(SEED / "server.log"), str(SEED / "client.log")]))
    out = io.StringIO()
    text.render(d, Terminal(out, width=60, color=False, terminal=True))
    lines = out.getvalue().splitlines()
    assert all(cells(ln) <= 60 or len(ln.split()) == 1 for ln in lines), [ln for ln in lines if cells(ln) > 60]


def _rendered(d, verbose=False):
    out = io.StringIO()
    text.render(d, Terminal(out, width=80, color=False, terminal=True), verbose=verbose)
    return out.getvalue()


@pytest.mark.parametrize("verbose", [False, True])
def test_the_text_grows_with_the_rules_that_fired_not_with_the_runs(tmp_path, verbose):
    """A job log repeating one failed run: each rule's first findings in full, the rest counted on one line."""
    lengths = {}
    for times in (10, 40):
        log = tmp_path / f"client-{times}.log"
        log.write_text((SEED / "client.log").read_text() * times)
        d = diagnose.explain(parse_paths([str(log)]))
        out = _rendered(d, verbose)
        lengths[times] = len(out.splitlines())
        live = [f for f in d.findings if f.explained_by is None]
        rule = live[0].rule
        fired = sum(f.rule == rule for f in live)
        assert fired >= times, fired
        assert f"{fired - text.PER_RULE:,} more finding(s) of {rule}," in out
        assert out.count(f"] {rule} ") == text.PER_RULE or out.count(f"] {rule}  ") == text.PER_RULE, out
    assert lengths[10] == lengths[40]


def test_explained_findings_repeated_by_many_runs_take_one_line_each(tmp_path):
    paste = ROOT / "fixtures/real/crater-a100-mlx5_0-port-down/paste.log"
    log = tmp_path / "job.log"
    log.write_text(paste.read_text() * 30)
    d = diagnose.explain(parse_paths([str(log)]))
    explained = [f for f in d.findings if f.explained_by]
    out = _rendered(d)
    first = explained[0]
    times = sum(f.rule == first.rule and f.explained_by == first.explained_by for f in explained)
    assert times >= 30 and f"(×{times})" in out, out
    assert out.count(f"{first.rule}: ") == 1, out


def test_the_bench_table_aligns_its_columns_and_names_each_failure_cause():
    d = diagnose.explain(parse_paths([str(SEED / "server.log"), str(SEED / "client.log")]))
    d.bench = {"peer": "192.0.2.2", "best": "ib_write_bw qp=4 size=65536", "results": [
        {"tool": "ib_write_bw", "qp": 1, "size": 65536, "status": "ok", "bw_avg_gbps": 91.25,
         "msg_rate_mpps": 0.174, "lat_typical_us": None},
        {"tool": "ib_write_bw", "qp": 4, "size": 65536, "status": "ok", "bw_avg_gbps": 97.5,
         "msg_rate_mpps": 0.186, "lat_typical_us": None},
        {"tool": "ib_read_lat", "qp": 1, "size": 2, "status": "failure", "bw_avg_gbps": None,
         "msg_rate_mpps": None, "lat_typical_us": None, "verdict": {"cause": "qp-count-mismatch"}},
    ]}
    lines = _rendered(d).splitlines()
    start = lines.index("Sweep with 192.0.2.2")
    header, *rows = lines[start + 1:start + 6]
    # no row has a latency: that column is left out, and the rest fits 80 columns
    assert header.split() == ["combination", "status", "BW", "avg", "Gb/s", "MsgRate", "Mpps", "cause"]
    assert rows[1].startswith("ib_write_bw qp=4 size=65536 (best)") and "97.5" in rows[1]
    assert rows[0].index("91.25") + len("91.25") == rows[1].index("97.5") + len("97.5") == header.index("Gb/s") + 4
    # a cause too long for its row's line stands under it
    assert rows[2].split() == ["ib_read_lat", "qp=1", "size=2", "failure"] and rows[3] == "    qp-count-mismatch"
    assert all(cells(ln) <= 80 for ln in lines[start:start + 6])


def test_the_runs_line_names_a_side_only_where_one_is_known():
    # perftest's two sides, then an NCCL job (no server or client): named by its tool, never "unknown"
    d = diagnose.explain(parse_paths([str(SEED / "server.log"), str(SEED / "client.log"),
                                      str(ROOT / "fixtures/real/nccl-nccltests-287-rtx5090-maxsharedmem/paste.log")]))
    runs = " ".join(_rendered(d).split("\n\n")[0].split())
    assert "server.log: server (ib_" in runs and "client.log: client (ib_" in runs
    assert "paste.log: all_reduce_perf" in runs and "unknown" not in runs
