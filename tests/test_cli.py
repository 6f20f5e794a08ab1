"""The command line's contract: exit codes, stdin, JSON schema, errors that lose nothing."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "handwritten" / "seed-qp-mismatch"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=120)


def test_version_and_help_on_every_command():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.decode().startswith("rdmadoctor ")
    for cmd in ([], ["explain"], ["rules"], ["rules", "list"], ["rules", "show"]):
        result = run(*cmd, "--help")
        assert result.returncode == 0, cmd
        assert b"Usage:" in result.stdout


def test_explain_failure_exit_code_and_json_schema():
    out = run("explain", "--json", str(SEED / "server.log"), str(SEED / "client.log"))
    assert out.returncode == 2
    doc = json.loads(out.stdout)
    assert doc["schema"] == "rdmadoctor/1"
    assert doc["verdict"]["status"] == "failure" and doc["verdict"]["cause"] == "qp-count-mismatch"
    finding = doc["findings"][0]
    for key in ("rule", "cause", "severity", "title", "evidence", "fix"):
        assert key in finding
    assert "--qp=10" in doc["verdict"]["fix"]


def test_explain_reads_stdin():
    out = run("explain", "--json", "-", stdin=(SEED / "client-only-error.log").read_bytes())
    assert out.returncode == 3
    doc = json.loads(out.stdout)
    assert doc["verdict"]["status"] == "unknown"
    assert "qp-count-mismatch" in doc["verdict"]["candidates"]
    assert any("other side" in step for step in doc["verdict"]["next_steps"])


def test_healthy_run_exits_zero(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text((ROOT / "tests" / "data" / "healthy-write-bw.log").read_text())
    out = run("explain", str(log))
    assert out.returncode == 0, out.stdout.decode()
    assert b"OK" in out.stdout


@pytest.mark.parametrize("args,code,message", [
    (["explain", "/nonexistent/x.log"], 3, b"No such file"),
    (["explain", "."], 3, b"is a directory"),
    (["explain", "--bogus", "x"], 64, b"No such option"),
    (["explain"], 64, b"Missing argument"),
    (["explain", "--link-rate", "fast", "x.log"], 64, b"not a link rate"),
    (["rules", "show", "PT-NOPE"], 64, b"no rule"),
])
def test_bad_invocations_and_unreadable_inputs(args, code, message):
    out = run(*args)
    assert out.returncode == code, out.stderr
    assert message in out.stderr


def test_link_rate_judges_a_successful_run(tmp_path):
    out = run("explain", "--json", "--link-rate", "100G", str(ROOT / "tests" / "data" / "healthy-write-bw.log"))
    doc = json.loads(out.stdout)
    rules = {f["rule"]: f for f in doc["findings"]}
    assert "PT-LINE-RATE-SMALL-MTU" in rules or "PT-LINE-RATE" in rules
    assert out.returncode == 1
    assert "of line rate" in json.dumps(doc["findings"])


def _verdict_of(out) -> tuple:
    doc = json.loads(out.stdout)
    return out.returncode, doc["verdict"]["status"], doc["verdict"]["cause"], [i["name"] for i in doc["inputs"]]


def test_files_from_names_the_logs_one_a_line_from_a_file_a_pipe_or_stdin(tmp_path):
    server, client = str(SEED / "server.log"), str(SEED / "client.log")
    listing = tmp_path / "logs.txt"
    listing.write_bytes(f"{server}\r\n\n{client}\n".encode())       # a CR and a blank line: read past
    expected = _verdict_of(run("explain", "--json", server, client))
    assert expected[:3] == (2, "failure", "qp-count-mismatch")
    assert _verdict_of(run("explain", "--json", "--files-from", str(listing))) == expected
    assert _verdict_of(run("explain", "--json", "--files-from", "-", stdin=listing.read_bytes())) == expected
    # the arguments first, then the list
    listing.write_text(client + "\n")
    assert _verdict_of(run("explain", "--json", server, "--files-from", str(listing))) == expected
    piped = subprocess.run(f"{sys.executable} -m rdmadoctor explain --json --files-from <(printf '%s\\n' {server} "
                           f"{client})", shell=True, executable="/bin/bash", capture_output=True, cwd=ROOT, timeout=120)
    assert _verdict_of(piped) == expected


def test_files_from_a_name_that_is_not_utf8(tmp_path):
    odd = tmp_path / b"client-\xff.log".decode("utf-8", "surrogateescape")
    odd.write_bytes((SEED / "client.log").read_bytes())
    listing = tmp_path / "logs.txt"
    listing.write_bytes(str(SEED / "server.log").encode() + b"\n" + str(tmp_path).encode() + b"/client-\xff.log\n")
    out = run("explain", "--json", "--files-from", str(listing))
    assert out.returncode == 2 and json.loads(out.stdout)["verdict"]["cause"] == "qp-count-mismatch"


@pytest.mark.parametrize("content, said", [
    (b"/nonexistent/one.log\n", b"/nonexistent/one.log: No such file or directory"),
    (b"-\n", b"names '-'"),
    (b"a.log\0b.log\0", b"NUL byte"),
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", b"PNG: No such file or directory"),     # an image, not a list
    (b"x" * 3_000_000, b"longer than a path can be (4096 bytes)"),        # one line of megabytes, never read whole
])
def test_files_from_a_bad_list_is_an_input_error_before_anything_is_read(tmp_path, content, said):
    listing = tmp_path / "logs.txt"
    listing.write_bytes(str(SEED / "server.log").encode() + b"\n" + content)
    out = run("explain", "--files-from", str(listing))
    assert out.returncode == 3 and said in out.stderr and out.stdout == b""


def test_files_from_that_cannot_be_read_or_shares_stdin(tmp_path):
    out = run("explain", "--files-from", str(tmp_path / "missing.txt"))
    assert out.returncode == 3 and b"missing.txt: No such file or directory" in out.stderr
    out = run("explain", "--files-from", str(tmp_path))
    assert out.returncode == 3 and b"Is a directory" in out.stderr
    out = run("explain", "--files-from", "-", "-", stdin=b"")
    assert out.returncode != 0 and b"either the list of files or a log" in out.stderr
    out = run("explain")
    assert out.returncode != 0 and b"LOG..." in out.stderr


def test_a_site_rule_table_that_does_not_load_lists_each_problem_on_its_own_line(tmp_path):
    # two problems in one site rule: each is a line of its own on stderr, and the exit is an input error (3)
    (tmp_path / "site.toml").write_text('[[rule]]\nid = "SITE-X"\ncause = "no-such-cause"\nrung = "nowhere"\n'
                                        'scope = "run"\ntitle = "x"\nwhen = { message = "X06" }\n')
    out = run("explain", "--rules-dir", str(tmp_path), str(SEED / "server.log"))
    assert out.returncode == 3
    lines = out.stderr.decode().splitlines()
    assert lines[0] == "rdmadoctor: the rule table does not load:", lines
    assert len([line for line in lines if "SITE-X" in line]) >= 2, lines
    assert "\\n" not in out.stderr.decode()


def test_the_console_script_exits_as_main_does_with_its_objects_frozen(monkeypatch, capsys):
    """run() (the console script, `python -m rdmadoctor`) is main() with the objects frozen before the teardown: the
    same exit code and output, and gc.freeze() done even as SystemExit leaves."""
    import gc

    from rdmadoctor import cli
    monkeypatch.setattr(sys, "argv", ["rdmadoctor", "explain", "--json", str(SEED / "server.log"),
                                      str(SEED / "client.log")])
    with pytest.raises(SystemExit) as by_main:
        cli.main()
    said = json.loads(capsys.readouterr().out)["verdict"]
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as by_run:
            cli.run()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert by_run.value.code == by_main.value.code == 2
    assert json.loads(capsys.readouterr().out)["verdict"] == said
    assert "from rdmadoctor.cli import run" in (ROOT / "rdmadoctor" / "__main__.py").read_text()
    assert 'rdmadoctor = "rdmadoctor.cli:run"' in (ROOT / "pyproject.toml").read_text()
