"""The monitors' formats: the Nagios/NHC line, compact JSON lines, the Prometheus textfile (parsed back with
prometheus-client's own parser), for one host and for a fleet, through the commands too."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fleet.helpers import FACTS, ROOT, result_of
from rdmadoctor.fleet import commands, formats


def run(*args):
    return subprocess.run([sys.executable, "-m", "rdmadoctor", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def _samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_check_line_per_status():
    assert formats.check_line(result_of(FACTS["memlock"])).startswith(
        "RDMA CRITICAL memlock-limit: The locked-memory limit is 64 KiB")
    assert formats.check_line(result_of(FACTS["healthy"])).startswith("RDMA OK: No problem found")
    hostile = {"verdict": {"status": "warning", "cause": "port-in-use", "summary": "held by \x1b[31mevil\nnext"}}
    line = formats.check_line(hostile)
    assert line.count("\n") == 1 and "\x1b" not in line and line.startswith("RDMA WARNING port-in-use: ")


def test_check_prom_parses_back():
    samples = _samples(formats.check_prom(result_of(FACTS["memlock"])))
    assert samples[("rdmadoctor_status", (("rdmadoctor_status", "failure"),))] == 1
    assert samples[("rdmadoctor_status", (("rdmadoctor_status", "ok"),))] == 0
    assert samples[("rdmadoctor_exit_code", ())] == 2
    info = [k for k in samples if k[0] == "rdmadoctor_verdict_info"][0]
    assert dict(info[1])["cause"] == "memlock-limit" and dict(info[1])["rule"] == "HOST-MEMLOCK"
    assert samples[("rdmadoctor_rung", (("rdmadoctor_rung", "failed"), ("rung", "limits")))] == 1
    assert ("rdmadoctor_last_check_timestamp_seconds", ()) in samples


@pytest.mark.parametrize("fmt,code", [("line", 2), ("jsonl", 2), ("prom", 2)])
def test_check_command_formats(fmt, code):
    out = run("check", "--from", str(FACTS["memlock"]), "--format", fmt)
    assert out.returncode == code, out.stderr
    if fmt == "line":
        assert out.stdout.startswith("RDMA CRITICAL memlock-limit: ") and out.stdout.count("\n") == 1
    elif fmt == "jsonl":
        assert out.stdout.count("\n") == 1 and json.loads(out.stdout)["verdict"]["cause"] == "memlock-limit"
    else:
        assert _samples(out.stdout)[("rdmadoctor_exit_code", ())] == 2


def test_format_and_json_must_agree():
    assert run("check", "--from", str(FACTS["memlock"]), "--json", "--format", "line").returncode == 64
    assert run("check", "--from", str(FACTS["memlock"]), "--format", "yaml").returncode == 64
    out = run("check", "--from", str(FACTS["memlock"]), "--json", "--format", "json")
    assert out.returncode == 2 and json.loads(out.stdout)["schema"] == "rdmadoctor/1"


def test_fleet_formats(facts_dir):
    doc = commands.check(None, facts_dir, "rdmadoctor check")
    line = formats.fleet_line(doc)
    assert line == "RDMA CRITICAL 1 of 8 nodes: memlock-limit node03\n"
    lines = formats.fleet_jsonl(doc).splitlines()
    assert len(lines) == 8 and json.loads(lines[2]) ["node"] == "node03"
    samples = _samples(formats.fleet_prom(doc))
    assert samples[("rdmadoctor_node_status", (("node", "node03"), ("rdmadoctor_node_status", "failure")))] == 1
    assert samples[("rdmadoctor_fleet_nodes", (("status", "ok"),))] == 7
    assert samples[("rdmadoctor_fleet_drift_odd_nodes", (("attribute", "netdev_mtu"),))] == 1


def test_fleet_command_line_and_html(facts_dir, tmp_path):
    html = tmp_path / "fleet.html"
    out = run("fleet", "check", "--from", str(facts_dir), "--format", "line", "--html", str(html))
    assert out.returncode == 2 and out.stdout.startswith("RDMA CRITICAL 1 of 8 nodes: memlock-limit node03")
    assert "node03" in html.read_text()
    out = run("fleet", "check", "--from", str(facts_dir), "--json")
    saved = tmp_path / "fleet.json"
    saved.write_text(out.stdout)
    again = run("fleet", "report", str(saved), "-o", str(tmp_path / "again.html"))
    assert again.returncode == 2 and (tmp_path / "again.html").stat().st_size > 10000
    text = run("fleet", "check", "--from", str(facts_dir))
    assert text.returncode == 2 and "memlock-limit" in text.stdout and "MTU (netdev)" in text.stdout


def test_fleet_command_errors(tmp_path):
    assert run("fleet", "check").returncode == 3                        # no node set, no --from
    out = run("fleet", "check", "node[1-")
    assert out.returncode == 3 and "not a node set" in out.stderr
    assert run("fleet", "check", "--from", str(tmp_path / "missing")).returncode == 3
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "rdmadoctor-fleet/1", "command": "check"}')
    out = run("fleet", "report", str(bad), "-o", str(tmp_path / "x.html"))
    assert out.returncode == 3 and "does not match rdmadoctor-fleet/1" in out.stderr
    assert run("fleet", "probe", "n1").returncode == 3                  # one node: nothing to pair
