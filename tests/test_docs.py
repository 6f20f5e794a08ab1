"""The docs pages written from the code (tools/gendocs.py) are current, and nothing in the repository points
outside it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gendocs.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_man_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "genman.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
