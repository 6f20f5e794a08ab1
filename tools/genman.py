"""Generate the man pages (docs/man/rdmadoctor*.1) from the CLI itself, with click-man.

    python tools/genman.py          write them
    python tools/genman.py --check  exit 1 when a page is not what the CLI would write (the tests run this)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MAN = ROOT / "docs" / "man"
DATE = "2026-11-30"          # fixed, so that a page changes only when the CLI does


def pages() -> dict:
    import typer
    from click_man.core import write_man_pages

    from rdmadoctor import __version__
    from rdmadoctor.cli import app
    command = typer.main.get_command(app)
    with tempfile.TemporaryDirectory() as tmp:
        write_man_pages("rdmadoctor", command, version=__version__, target_dir=tmp, date=DATE)
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(tmp).glob("*.1"))}


def main(argv: list) -> int:
    made = pages()
    if "--check" in argv:
        current = {p.name: p.read_text(encoding="utf-8") for p in MAN.glob("*.1")} if MAN.is_dir() else {}
        if current != made:
            print("docs/man is out of date: run python tools/genman.py", file=sys.stderr)
            return 1
        return 0
    MAN.mkdir(parents=True, exist_ok=True)
    for old in MAN.glob("*.1"):
        old.unlink()
    for name, text in made.items():
        (MAN / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
