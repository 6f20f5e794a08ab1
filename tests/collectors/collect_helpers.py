"""Shared helpers for the collector tests: fixture trees (fixtures/sysfs), recorded facts (fixtures/facts).
(Not named conftest.py: other test folders have their own, and `from conftest import` would be ambiguous.)"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYSFS = REPO / "fixtures" / "sysfs"
FACTS = REPO / "fixtures" / "facts"

sys.path.insert(0, str(REPO))

from rdmadoctor.collectors.base import CollectContext  # noqa: E402


def tree(name: str, **kw) -> CollectContext:
    """A context reading one fixture tree (as the root user it was recorded as)."""
    kw.setdefault("is_root", True)
    return CollectContext(root=SYSFS / name, live=False, **kw)


def section(facts, name):
    return facts["sections"][name]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def unprivileged_python():
    """(argv prefix, reason) to run Python as uid/gid 65534, or (None, why not)."""
    if os.geteuid() != 0:
        return None, "not root: cannot switch to an unprivileged user"
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None, "setpriv is not installed"
    # the interpreter must be reachable by that user (pyenv's lives under /root)
    for exe in ("/usr/bin/python3", sys.executable):
        probe = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe, "-c", "pass"],
                               capture_output=True)
        if probe.returncode == 0:
            return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe], None
    return None, "no Python interpreter is executable by uid 65534"
