"""The commands under hostile input and faults: files written safely, terminals that cannot be driven by what
they show, fix commands that run what they say, and bad input that ends in one line and exit 3."""
from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rdmadoctor.runtime import jsonio
from tests.probe.helpers import running_agent

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "handwritten" / "seed-qp-mismatch"
FACTS = ROOT / "fixtures" / "facts" / "lab" / "bookworm" / "facts-root.json"
ESCAPES = ("\x1b", "\x9b", "\x9d", "\u202e", "\x07", "\x00")


def run(*args, stdin=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], input=stdin, capture_output=True, cwd=ROOT,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def one_line_error(result, progress: str = "") -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not (progress and ln.startswith(progress))]
    assert len(lines) == 1 and lines[0].startswith("rdmadoctor: "), err
    return lines[0]


# -- 8. files -------------------------------------------------------------------------------------------

def test_a_named_pipe_is_read_once_from_its_writer(tmp_path):
    """`perftest ... > pipe & rdmadoctor explain pipe`: the pipe is opened once, to be read. Opened to be checked
    and closed again, it took the writer, whose write then failed, and the second open waited for ever."""
    pipe = tmp_path / "client.pipe"
    os.mkfifo(pipe)
    log = (SEED / "client.log").read_bytes()

    def write():
        try:
            with open(pipe, "wb") as f:
                f.write(log)
        except OSError:
            pass                            # the reader went away: the test fails on its own output

    threading.Thread(target=write, daemon=True).start()
    try:
        through_pipe = run("explain", "--json", str(pipe), timeout=60)
    finally:
        try:                                # a writer still waiting for a reader is let go
            os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
    from_file = run("explain", "--json", str(SEED / "client.log"))
    assert through_pipe.returncode == from_file.returncode, through_pipe.stderr
    verdict = json.loads(through_pipe.stdout)["verdict"]
    assert verdict == json.loads(from_file.stdout)["verdict"] and verdict["rule"] == "PT-SIDE-CHANNEL"


def test_compressed_logs_are_explained_as_the_logs_and_an_unreadable_format_in_one_line(tmp_path):
    """A rotated log (server.log.1.gz) or a log piped through xz says what the log says; a zstd file, which the
    standard library cannot read, is refused in one line with the command that reads it."""
    import gzip
    import lzma
    server, client = tmp_path / "server.log.1.gz", tmp_path / "client.log.xz"
    server.write_bytes(gzip.compress((SEED / "server.log").read_bytes()))
    client.write_bytes(lzma.compress((SEED / "client.log").read_bytes()))
    plain = run("explain", "--json", str(SEED / "server.log"), str(SEED / "client.log"))
    packed = run("explain", "--json", str(server), str(client))
    piped = run("explain", "--json", "-", stdin=lzma.compress((SEED / "client.log").read_bytes()))
    alone = run("explain", "--json", str(SEED / "client.log"))
    assert packed.returncode == plain.returncode == 2 and piped.returncode == alone.returncode
    assert json.loads(packed.stdout)["verdict"] == json.loads(plain.stdout)["verdict"]
    assert json.loads(piped.stdout)["verdict"] == json.loads(alone.stdout)["verdict"]
    assert [i["compression"] for i in json.loads(packed.stdout)["inputs"]] == ["gzip", "xz"]
    zstd = tmp_path / "client.log.zst"
    zstd.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(60))
    result = run("explain", str(zstd))
    assert result.returncode == 3 and not result.stdout
    assert one_line_error(result) == (f"rdmadoctor: {zstd}: is zstd-compressed, which rdmadoctor cannot read: "
                                      f"`zstdcat {zstd} | rdmadoctor explain -`")
    # standard input is read to be known: the verdict says nothing was recognised, and the note why
    result = run("explain", "--json", "-", stdin=zstd.read_bytes())
    assert result.returncode == 3
    assert json.loads(result.stdout)["notes"] == ["<stdin>: is zstd-compressed, which rdmadoctor cannot read: "
                                                  "`zstdcat FILE | rdmadoctor explain -`; nothing of it was read"]


def test_a_device_or_socket_is_refused_in_one_line(tmp_path):
    """/dev/zero never ends and a socket holds no log: one line and exit 3, before anything is read."""
    sock_path = tmp_path / "agent.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        for path, kind in (("/dev/zero", "a character device"), (str(sock_path), "a socket")):
            result = run("explain", str(SEED / "client.log"), path, timeout=60)
            assert result.returncode == 3
            assert one_line_error(result) == (f"rdmadoctor: {path}: is {kind}, not a log file (a log is read from "
                                              "a file, a pipe or standard input)")
            assert not result.stdout
    finally:
        sock.close()


def test_save_never_writes_through_a_planted_link_and_is_private(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    save = tmp_path / "facts.json"
    os.symlink(victim, str(save) + ".tmp")                    # the attacker's guess at the temporary name
    result = run("check", "--sample", "0", "--save", str(save), "--json", timeout=180)
    assert result.returncode in (0, 1, 2, 3), result.stderr
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(save.stat().st_mode) == 0o600
    jsonio.validate(json.loads(save.read_text()), "facts", "saved facts")
    # a link planted at the name itself is refused, not followed
    html = tmp_path / "report.html"
    os.symlink(victim, html)
    result = run("explain", "--html", str(html), str(SEED / "server.log"), str(SEED / "client.log"))
    assert result.returncode == 3 and "symbolic link" in one_line_error(result)
    assert victim.read_text() == "precious\n"


def test_every_file_written_is_for_its_owner_only(tmp_path):
    html, out = tmp_path / "r.html", tmp_path / "r.json"
    result = run("explain", "--json", "--html", str(html), str(SEED / "server.log"), str(SEED / "client.log"))
    assert result.returncode == 2
    assert stat.S_IMODE(html.stat().st_mode) == 0o600
    out.write_bytes(result.stdout)
    report = tmp_path / "again.html"
    assert run("report", str(out), "-o", str(report)).returncode == 2
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    from rdmadoctor.bench import results
    from rdmadoctor.views.bench import BenchResult
    sweep = BenchResult(peer="192.0.2.2", started="2026-01-01T00:00:00+00:00", link_rate_gbps=None)
    results.save_json(sweep, tmp_path / "b.json")
    results.save_csv(sweep, tmp_path / "b.csv")
    for name in ("b.json", "b.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_redact_applies_to_json_and_save(tmp_path):
    doc = json.loads(FACTS.read_text())
    hostname = doc["host"]["hostname"]
    result = run("check", "--from", str(FACTS), "--json", "--redact")
    text = result.stdout.decode()
    assert result.returncode in (0, 1, 2, 3) and text
    assert hostname not in text and not re.search(r"\b192\.0\.2\.\d+\b", text)
    result = run("check", "--sample", "0", "--save", str(tmp_path / "f.json"), "--redact", timeout=180)
    saved = json.loads((tmp_path / "f.json").read_text())
    assert saved["host"]["hostname"] in (None, "") or saved["host"]["hostname"].startswith("host-")
    assert socket.gethostname() not in (tmp_path / "f.json").read_text()


# -- 9. terminals ----------------------------------------------------------------------------------------

def test_control_characters_from_input_never_reach_the_terminal(tmp_path):
    evil = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31m\u202etxt.exe"
    log = tmp_path / "client.log"
    log.write_text((SEED / "client.log").read_text().replace("Couldn't", evil + " Couldn't"))
    for args in (("explain", str(SEED / "server.log"), str(log)), ("explain", "-v", str(log)),
                 ("explain", str(tmp_path / ("missing" + evil)))):
        result = run(*args)
        out = result.stdout.decode() + result.stderr.decode()
        assert not any(c in out for c in ESCAPES), (args, out[:500])
    facts = json.loads(FACTS.read_text())
    facts["sections"]["kernel"]["reason"] = evil
    facts["sections"]["devices"] = {"status": "unavailable", "reason": evil, "unreadable": []}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    result = run("check", "--from", str(path))
    out = result.stdout.decode() + result.stderr.decode()
    assert "\\x1b" in out and not any(c in out for c in ESCAPES), out[:2000]


# -- 10. fix commands ------------------------------------------------------------------------------------

def test_a_fix_command_runs_exactly_the_words_it_shows(tmp_path):
    server = (SEED / "server.log").read_text().replace(
        "ib_write_bw --ib-dev=mlx5_1", "ib_write_bw '--ib-dev=mlx5_1;id' '-p' '18515`touch " +
        str(tmp_path / "pwned") + "`'", 1)
    (tmp_path / "server.log").write_text(server)
    result = run("explain", "--json", str(tmp_path / "server.log"), str(SEED / "client.log"))
    doc = json.loads(result.stdout)
    fix = doc["verdict"]["fix"]
    command = fix.split("On the server: ", 1)[1]
    argv = next(r for r in doc["runs"] if r["side"] == "server")["command"]["argv"]
    echoed = subprocess.run(["sh", "-c", 'printf "%s\\n" ' + command], capture_output=True, text=True, timeout=10)
    assert echoed.returncode == 0
    words = echoed.stdout.splitlines()
    assert words[:len(argv)] == argv, (command, words)
    assert words[len(argv):] == ["--qp=10"]
    assert not (tmp_path / "pwned").exists()
    for finding in doc["findings"]:                 # every command between backticks stays one command too
        for line in finding["fix"]:
            for code in line.split("`")[1::2]:
                assert ";id" not in code.replace("';id'", "").replace("mlx5_1;id'", ""), code


# -- 11. bad input: one line, exit 3 ---------------------------------------------------------------------

def _write(tmp_path, name, doc) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_a_mutated_facts_file_is_refused_in_one_line(tmp_path):
    facts = json.loads(FACTS.read_text())
    for mutate in (lambda d: d["sections"].__setitem__("devices", True),
                   lambda d: d["sections"]["devices"]["data"].__setitem__("devices", True),
                   lambda d: d["sections"]["netlink"]["data"].__setitem__("links", {"eth0": 1}),
                   lambda d: d["sections"]["ports"]["data"].__setitem__("tcp_listeners", ["x"]),
                   lambda d: d.__setitem__("host", [])):
        doc = json.loads(json.dumps(facts))
        mutate(doc)
        result = run("check", "--from", _write(tmp_path, "f.json", doc))
        assert result.returncode == 3, result.stderr
        assert "does not match" in one_line_error(result) or "facts" in one_line_error(result)


def test_deep_json_eio_and_bad_reports_are_refused_in_one_line(tmp_path):
    deep = "[" * 100000 + "]" * 100000
    nested = {"schema": "rdmadoctor/1", "command": "explain", "verdict": {"status": "ok", "summary": "x"},
              "notes": []}
    inner = nested
    for _ in range(200):
        inner["x"] = {}
        inner = inner["x"]
    result_doc = json.loads(run("explain", "--json", str(SEED / "server.log"), str(SEED / "client.log")).stdout)
    result_doc["verdict"] = "ok"
    cases = [("check", "--from", _write(tmp_path, "deep.json", deep)),
             ("report", _write(tmp_path, "deep-report.json", deep), "-o", str(tmp_path / "r.html")),
             ("report", _write(tmp_path, "nested.json", nested), "-o", str(tmp_path / "r.html")),
             ("report", _write(tmp_path, "verdict.json", result_doc), "-o", str(tmp_path / "r.html")),
             ("check", "--from", "/proc/self/mem"),
             ("explain", "/proc/self/mem"),
             ("report", "/proc/self/mem", "-o", str(tmp_path / "r.html"))]
    for args in cases:
        result = run(*args)
        assert result.returncode == 3, (args, result.stderr)
        one_line_error(result)


def test_no_space_on_stdout_and_a_closed_pipe(tmp_path):
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-m", "rdmadoctor", "explain", "--json", str(SEED / "server.log"),
                                 str(SEED / "client.log")], stdout=full, stderr=subprocess.PIPE, cwd=ROOT,
                                timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 3 and "No space left" in one_line_error(result)
    for args in (("explain", "--json"), ("explain",)):
        proc = subprocess.Popen([sys.executable, "-m", "rdmadoctor", *args, str(SEED / "server.log"),
                                 str(SEED / "client.log")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        proc.stdout.close()                                   # `| head -0`: the reader is gone
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err                      # the diagnosis's code, not 1 or 120
        assert b"Traceback" not in err and b"Exception ignored" not in err, err


def test_no_space_on_a_file_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    from rdmadoctor import cli
    real_write = os.write

    def full(fd, data):
        if fd > 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    monkeypatch.setattr(sys, "argv", ["rdmadoctor", "explain", "--html", str(tmp_path / "r.html"),
                                      str(SEED / "server.log"), str(SEED / "client.log")])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 3
    assert "No space left" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _hostile(client, port):
    return {"schema": "rdmadoctor-facts/1", "host": {"hostname": "evil"}, "sections": {"devices": True}}


def test_a_hostile_peer_agent_gives_one_line_and_exit_3():
    with running_agent(facts=_hostile) as (_, port):
        result = run("check", "--peer", "127.0.0.1", "--agent-port", str(port), "--sample", "0", timeout=180)
    assert result.returncode == 3, result.stderr
    assert "not valid" in one_line_error(result)


class FakeBenchAgent:
    """Answers hello as a perftest agent and then perftest with the wrong types."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn):
        f = conn.makefile("rwb")
        try:
            for line in f:
                req = json.loads(line)
                op = req["op"]
                if op == "hello":
                    out = {"v": 2, "id": req["id"], "ok": True, "agent": "rdmadoctor", "protocol": 2, "auth": "none",
                           "perftest": True, "ops": ["hello", "perftest"]}
                elif op == "perftest":
                    out = {"v": 2, "id": req["id"], "ok": True, "handle": "one", "port": "18520", "argv": 7}
                else:
                    out = {"v": 2, "id": req.get("id"), "ok": True}
                f.write((json.dumps(out) + "\n").encode())
                f.flush()
        except (OSError, ValueError):
            pass
        finally:
            conn.close()


def test_bench_answers_of_the_wrong_types_give_one_line_and_exit_3():
    agent = FakeBenchAgent()
    result = run("bench", "--peer", "127.0.0.1", "--agent-port", str(agent.port), "--qp", "1", timeout=180)
    assert result.returncode == 3, result.stderr
    assert "answer to perftest" in one_line_error(result, progress="bench: ")
    agent.sock.close()


# -- the JSON rdmadoctor writes matches its schemas ------------------------------------------------------

def test_every_json_output_matches_its_schema(tmp_path):
    import tools.snapshot as snapshot
    from rdmadoctor.collectors import load_facts
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_paths
    from rdmadoctor.render import json_out
    count = 0
    for name, logs in snapshot.log_sets().items():
        doc = json_out.to_dict(diagnose.explain(parse_paths([str(p) for p in logs])))
        assert not jsonio.errors(json.loads(json.dumps(doc, default=str)), "result"), name
        count += 1
    for path in sorted((ROOT / "fixtures").rglob("*.json")):
        try:
            raw = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(raw, dict) and raw.get("schema") == "rdmadoctor-facts/1":
            facts = load_facts(path)
            doc = json_out.to_dict(diagnose.check(facts, None, facts["host"].get("peer")))
            assert not jsonio.errors(json.loads(json.dumps(doc, default=str)), "result"), path
            count += 1
        elif isinstance(raw, dict) and raw.get("schema") in ("rdmadoctor-bench/1", "rdmadoctor/1"):
            assert not jsonio.errors(raw, "bench" if raw["schema"].startswith("rdmadoctor-bench") else "result"), path
    assert count > 100
    live = run("check", "--sample", "0", "--json", timeout=180)
    assert not jsonio.errors(json.loads(live.stdout), "result")


@pytest.mark.parametrize("tail,quoted", [
    # librdmacm's example client (rdma_client.c) stops on a send its provider refused: no rule names a cause
    ("rdma_post_send: Unknown error -22\n", "rdma_post_send: Unknown error -22"),
    ("", None),
])
def test_a_run_that_stops_without_results_quotes_the_error_no_rule_explains(tmp_path, tail, quoted):
    log = tmp_path / "client.log"
    log.write_text("$ rdma_client -s 192.0.2.1\n" + tail)
    result = run("explain", "--json", str(log))
    verdict = json.loads(result.stdout)["verdict"]
    assert verdict["status"] == "unknown" and result.returncode == 3
    assert ("no error says why" in verdict["summary"]) is (quoted is None)
    assert quoted is None or verdict["summary"].endswith(quoted)


@pytest.mark.parametrize("failed,status", [(True, "unknown"), (False, "warning")])
def test_a_harmless_warning_is_not_the_verdict_of_runs_that_stopped_on_an_unexplained_error(tmp_path, failed, status):
    # UCX's unused-variable warning (src/ucs/config/parser.c) is harmless; beside a run that stopped on an error no
    # rule names, "harmless" would hide the failure
    log = tmp_path / "job.log"
    log.write_text("[1700000000.100000] [node1:1234:0]  parser.c:1885 UCX  WARN  unused env variable: UCX_DIR "
                   "(set UCX_WARN_UNUSED_ENV_VARS=n to suppress this warning)\n"
                   + ("$ rdma_client -s 192.0.2.1\nrdma_post_send: Unknown error -22\n" if failed else ""))
    verdict = json.loads(run("explain", "--json", str(log)).stdout)["verdict"]
    assert verdict["status"] == status
    assert (verdict["cause"] == "benign-warning") is (not failed)
    assert not failed or verdict["summary"].endswith("rdma_post_send: Unknown error -22")
    assert not failed or verdict["candidates"] == []         # a harmless warning's cause is no candidate


@pytest.mark.parametrize("second,status", [("$ ./rcopy /etc/hosts 192.0.2.1:/tmp/hosts\nrconnect failed\n"
                                            ": Invalid argument\n", "unknown"),
                                           ("$ ./rcopy\nwaiting for connection...\n", "ok")])
def test_one_program_that_printed_results_does_not_make_another_programs_error_healthy(tmp_path, second, status):
    """A pasted session of several librdmacm examples (SoftRoCE/librxe-dev#18's shape): rdma_server and rdma_client
    passed, rcopy failed. OK would hide rcopy's failure; a run that only waited shows none."""
    log = tmp_path / "session.log"
    log.write_text("$ ./rdma_server\nrdma_server: start\nrdma_server: end 0\n" + second)
    result = run("explain", "--json", str(log))
    verdict = json.loads(result.stdout)["verdict"]
    assert verdict["status"] == status, verdict
    assert status == "ok" or (result.returncode == 3 and verdict["summary"].endswith("rconnect failed")
                              and "printed results" in verdict["summary"])


def test_an_error_no_rule_explains_keeps_the_causes_the_warnings_beside_it_name():
    """Oneflow-Inc/oneflow#3586 (cut by the store mid-line: "NCCL WARN Connect to f"): NCCL's sockets include a veth
    with only a link-local address (NCCL-OOB-LINK-LOCAL, a warning). The cut error stays the verdict, unknown, and
    the warning's cause is its candidate; the harmless-warning cause never is."""
    fixture = Path(__file__).resolve().parent.parent / "fixtures/real/nccl-oneflow-3586-veth-link-local-cut-warn"
    result = run("explain", "--json", str(fixture / "paste.log"))
    verdict = json.loads(result.stdout)["verdict"]
    assert verdict["status"] == "unknown" and verdict["summary"].endswith("NCCL WARN Connect to f"), verdict
    assert verdict["candidates"] == ["wrong-transport-selection"]


OPENIB_NO_PARAMS = """--------------------------------------------------------------------------
WARNING: No preset parameters were found for the device that Open MPI
detected:

  Local host:            node2
  Device name:           mlx5_1
  Device vendor ID:      0x02c9
  Device vendor part ID: 4123

Default device parameters will be used, which may result in lower
performance.  You can edit any of the files specified by the
btl_openib_device_param_files MCA parameter to set values for your
device.

NOTE: You can turn off this warning by setting the MCA parameter
      btl_openib_warn_no_device_params_found to 0.
--------------------------------------------------------------------------
"""


@pytest.mark.parametrize("program,status", [("/workspace/nccl-tests/build/all_reduce_perf -b 8 -e 128M -g 8",
                                             "unknown"), ("./hello", "warning")])
def test_a_harmless_warning_is_not_the_verdict_of_a_test_program_that_printed_nothing(tmp_path, program, status):
    """NVIDIA/nccl#304's paste as stored: mpirun starts all_reduce_perf, Open MPI warns harmlessly, and no result
    follows. "Nothing to fix" would hide that the test never finished; an MPI program that measures nothing keeps
    the warning as its verdict."""
    log = tmp_path / "job.log"
    log.write_text(f"root@node1:/workspace# mpirun --allow-run-as-root -H 10.0.0.1,10.0.0.2 -np 2 {program}\n"
                   + OPENIB_NO_PARAMS)
    verdict = json.loads(run("explain", "--json", str(log)).stdout)["verdict"]
    assert verdict["status"] == status, verdict
    assert (verdict["cause"] == "benign-warning") is (status == "warning")
