"""rdmadoctor.runtime.dists and the pyverbs child's own check: a distribution's version is read from its
metadata when it has some, and importlib.metadata is not imported when it has none."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from rdmadoctor.runtime.dists import has_metadata, installed_version

ROOT = Path(__file__).resolve().parents[1]


def _dist(site: Path, folder: str, version: str) -> None:
    meta = site / folder
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: Fake.Project\nVersion: %s\n" % version)


def test_version_of_a_distribution_with_metadata(tmp_path, monkeypatch):
    _dist(tmp_path, "fake_project-1.2.3.dist-info", "1.2.3")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert has_metadata("Fake.Project") and has_metadata("fake-project")
    assert installed_version("fake-project") == "1.2.3"


def test_egg_info_counts_as_metadata(tmp_path, monkeypatch):
    _dist(tmp_path, "Fake_Project.egg-info", "0.9")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("fake_project") == "0.9"


def test_a_name_that_only_starts_alike_is_not_the_distribution(tmp_path, monkeypatch):
    _dist(tmp_path, "fake_project_tools-2.0.dist-info", "2.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not has_metadata("fake-project")
    assert installed_version("fake-project") is None


def test_no_metadata_means_no_importlib_metadata():
    code = ("import sys; from rdmadoctor.runtime.dists import installed_version; "
            "v = installed_version('no-such-distribution-here'); "
            "print(v, 'importlib.metadata' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["None", "False"], proc.stderr


def _verbs_probe():
    spec = importlib.util.spec_from_file_location("verbs_probe_under_test",
                                                  ROOT / "rdmadoctor" / "collectors" / "verbs_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Package:
    def __init__(self, path: Path):
        self.__path__ = [str(path)]


def test_the_pyverbs_child_reads_metadata_only_beside_the_package(tmp_path):
    probe = _verbs_probe()
    (tmp_path / "pyverbs").mkdir()
    assert not probe._metadata_beside(_Package(tmp_path / "pyverbs"))       # Debian's python3-pyverbs
    _dist(tmp_path, "pyverbs-50.0.dist-info", "50.0")
    assert probe._metadata_beside(_Package(tmp_path / "pyverbs"))           # a pip install
    assert not probe._metadata_beside(object())


def test_the_pyverbs_child_still_prints_json_here():
    """Run as check runs it (isolated, on this Python): one JSON document, pyverbs there or not."""
    proc = subprocess.run([sys.executable, "-I", str(ROOT / "rdmadoctor" / "collectors" / "verbs_probe.py")],
                          capture_output=True, text=True, timeout=60)
    doc = json.loads(proc.stdout)
    assert "available" in doc
