"""perftest logs in, Runs out. Knows what perftest prints, nothing about causes."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import BinaryIO, Iterable, List, Tuple

from rdmadoctor.logparse.lines import LineClassifier
from rdmadoctor.logparse.reader import SourceReader
from rdmadoctor.logparse.runs import RunBuilder
from rdmadoctor.model import ParsedLog, Run

_NAME_SIDE = (("server", re.compile(r"(?<![a-z])(server|srv)(?![a-z])", re.I)),
              ("client", re.compile(r"(?<![a-z])(client|cli)(?![a-z])", re.I)))


class InputError(Exception):
    """An input that cannot be read at all (missing file, a directory, permission denied)."""


def parse_streams(inputs: Iterable[Tuple[str, BinaryIO]]) -> ParsedLog:
    classifier = LineClassifier()
    runs: List[Run] = []
    sources = []
    for name, stream in inputs:
        reader = SourceReader(name, stream)
        builder = RunBuilder(name)
        flattened_before = classifier.flattened
        for number, line in reader.lines():
            items = classifier.classify(line)
            if items:
                builder.feed(number, items)
        source_runs = builder.finish()
        reader.text.flattened = classifier.flattened - flattened_before
        _side_from_name(name, source_runs)
        runs.extend(source_runs)
        sources.append(reader.text)
    _complete_sides(runs)
    return ParsedLog(runs=runs, sources=sources)


def parse_paths(paths: Iterable[str]) -> ParsedLog:
    """Files by path; '-' is standard input. Unreadable paths raise InputError before any parsing."""
    opened = []
    try:
        for path in paths:
            if path == "-":
                opened.append(("<stdin>", sys.stdin.buffer))
                continue
            p = Path(path)
            if p.is_dir():
                raise InputError(f"{path}: is a directory, not a log file")
            try:
                opened.append((path, open(p, "rb")))
            except OSError as exc:
                raise InputError(f"{path}: {exc.strerror or exc}") from None
        return parse_streams(opened)
    finally:
        for name, stream in opened:
            if name != "<stdin>":
                stream.close()


def parse_text(text: str, name: str = "<text>") -> ParsedLog:
    return parse_streams([(name, io.BytesIO(text.encode("utf-8", "surrogateescape")))])


def _side_from_name(name: str, runs: List[Run]) -> None:
    """A file called server.log holds the server's side, when nothing inside says otherwise."""
    base = Path(name).name
    hits = [side for side, rx in _NAME_SIDE if rx.search(base)]
    if len(hits) != 1:
        return
    for run in runs:
        if run.side == "unknown":
            run.side, run.side_reason = hits[0], f"file name '{base}'"


def _complete_sides(runs: List[Run]) -> None:
    """Two runs, one side known: the other is the other side (the usual two-log paste)."""
    if len(runs) != 2:
        return
    known = [r for r in runs if r.side != "unknown"]
    if len(known) == 1:
        other = runs[0] if runs[1] is known[0] else runs[1]
        other.side = "client" if known[0].side == "server" else "server"
        other.side_reason = f"the other run in this input is the {known[0].side}"
