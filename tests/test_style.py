"""The code style pyproject.toml declares: `ruff check` (pycodestyle, pyflakes, bugbear, complexity at most
15) and `mypy` find nothing, and few functions of rdmadoctor/ are above a complexity of 10. Each check is
also shown to catch what it is for, on a planted file."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["rdmadoctor", "tests", "tools", "benchmarks"]
# functions of rdmadoctor/ allowed above a complexity of 10
ABOVE_TEN = 0


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    return str(exe) if exe.exists() else name


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("ruff"), "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def mypy(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull, *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    proc = ruff(*CHECKED)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_few_functions_above_a_complexity_of_ten():
    proc = ruff("--select", "C901", "--config", "lint.mccabe.max-complexity = 10", "--output-format", "json",
                "rdmadoctor")
    found = json.loads(proc.stdout or "[]")
    names = sorted(f"{Path(f['filename']).relative_to(ROOT)}: {f['message']}" for f in found)
    assert len(names) <= ABOVE_TEN, "\n".join(names)


def test_ruff_catches_a_long_line_and_a_complex_function(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(16))
    (tmp_path / "planted.py").write_text(f"def f(x):\n{branches}    return -1\n\n\nY = {'1' * 130}\n")
    proc = ruff("--output-format", "concise", "planted.py", cwd=tmp_path)
    assert proc.returncode != 0
    assert "C901" in proc.stdout and "E501" in proc.stdout


def test_mypy_finds_nothing():
    proc = mypy()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_catches_a_type_error(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f() -> int:\n    return 'x'\n")
    proc = mypy("--config-file", str(ROOT / "pyproject.toml"), str(planted))
    assert proc.returncode != 0 and "Incompatible return value type" in proc.stdout
