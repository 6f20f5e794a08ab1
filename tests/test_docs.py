"""The docs pages written from the code (tools/gendocs.py) are current, and nothing in the repository points
outside it."""
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_generated_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gendocs.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_man_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "genman.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _headings(page: Path) -> List[str]:
    return re.findall(r"^#+ (.+?)\s*$", page.read_text(encoding="utf-8"), re.M)


def _anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading: lower case, punctuation dropped, blanks as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_catalogue_message_has_its_section():
    """docs/messages/<catalogue>.md explains each message of rdmadoctor/knowledge/messages/<catalogue>.toml under a
    heading that is its id (perftest's own messages are docs/perftest-messages.md's, by step)."""
    missing = []
    for catalogue in sorted((ROOT / "rdmadoctor" / "knowledge" / "messages").glob("*.toml")):
        if catalogue.stem == "perftest":
            continue
        ids = {entry["id"] for entry in tomllib.loads(catalogue.read_text(encoding="utf-8")).get("message", [])}
        page = ROOT / "docs" / "messages" / f"{catalogue.stem}.md"
        documented = set(_headings(page)) if page.exists() else set()
        missing += [f"{catalogue.stem}: {i}" for i in sorted(ids - documented)]
    assert len(missing) == 0, missing


def test_every_docs_reference_of_a_rule_resolves():
    """A rule's reference to this repository's docs names a page that exists and, after '#', one of its headings."""
    from rdmadoctor.engine import rules
    broken = []
    anchors: Dict[Path, Set[str]] = {}
    for rule in rules.load():
        for ref in rule.refs:
            if not ref.startswith("docs/"):
                continue
            page_name, _, anchor = ref.partition("#")
            page = ROOT / page_name
            if not page.is_file():
                broken.append(f"{rule.id}: {ref} (no such page)")
                continue
            if page not in anchors:
                anchors[page] = {_anchor(h) for h in _headings(page)}
            if anchor and anchor not in anchors[page]:
                broken.append(f"{rule.id}: {ref} (no such heading)")
    assert len(broken) == 0, broken
