"""The layers of pyproject.toml's import-linter contract hold, and the contract does catch an import that
runs back up (a copy of the package with one planted import must fail it)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_layers_are_kept():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "rdmadoctor", tmp_path / "rdmadoctor",
                    ignore=shutil.ignore_patterns("__pycache__", "_rules"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "rdmadoctor" / "model.py"
    model.write_text(model.read_text() + "\nfrom rdmadoctor.engine import evaluate  # planted\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode != 0
    assert "rdmadoctor.model is not allowed to import rdmadoctor.engine" in proc.stdout


_LOADED = """
import runpy, sys
sys.argv = ["rdmadoctor"] + sys.argv[1:]
try:
    runpy.run_module("rdmadoctor", run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + " ".join(sorted(sys.modules)) + "\\n")
"""


def loaded_by(*args: str) -> set:
    """The modules a command run of rdmadoctor has loaded when it ends."""
    proc = subprocess.run([sys.executable, "-c", _LOADED, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")]
    assert line, proc.stderr[-2000:]
    return set(line[-1].split()[1:])


def test_check_loads_no_log_parser():
    """check reads facts, not logs: the parser (logparse.streams, runs, lines, the producers) stays unloaded;
    what the rules need of the catalogues is loaded alone. explain, the one that parses, loads them."""
    facts = ROOT / "fixtures" / "facts" / "lab" / "bookworm" / "facts-root.json"
    check = loaded_by("check", "--from", str(facts), "--json")
    assert "rdmadoctor.engine.diagnose" in check
    assert not {"rdmadoctor.logparse.streams", "rdmadoctor.logparse.runs", "rdmadoctor.logparse.lines"} & check
    log = ROOT / "fixtures" / "lab" / "bookworm" / "server-not-running" / "client.log"
    explain = loaded_by("explain", "--json", str(log))
    assert {"rdmadoctor.logparse.streams", "rdmadoctor.logparse.runs"} <= explain


def test_explain_of_a_small_log_loads_no_module_it_does_not_use():
    """explain's start-up is mostly imports: the modules only some inputs need (statistics for OSU latency tables,
    socket for an interface's address) are imported where they are used, not by every run."""
    log = ROOT / "fixtures" / "lab" / "bookworm" / "server-not-running" / "client.log"
    explain = loaded_by("explain", str(log))
    assert "rdmadoctor.views.mpibench" in explain and "rdmadoctor.runtime.net" in explain
    assert not {"statistics", "socket", "rich"} & explain, {"statistics", "socket", "rich"} & explain
