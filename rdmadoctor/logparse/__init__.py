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
        classify, feed = classifier.classify, builder.feed
        for first, lines in reader.blocks():
            number = first
            for line in lines:
                if line:
                    items = classify(line)
                    if items:
                        feed(number, items)
                number += 1
        source_runs = _fold_version_queries(builder.finish())
        reader.text.flattened = classifier.flattened - flattened_before
        _side_from_name(name, source_runs)
        runs.extend(source_runs)
        sources.append(reader.text)
    runs = _attach_commands(runs)
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


def _fold_version_queries(runs: List[Run]) -> List[Run]:
    """`ib_write_bw -V` prints only "Version: 6.24": not a run of its own, but the version of the
    perftest the other runs of this paste used."""
    queries = [r for r in runs if r.command is not None and r.command.options.get("version")]
    if not queries or len(queries) == len(runs):
        return runs
    versions = [m for q in queries for m in q.messages if m.id == "N02"]
    rest = [r for r in runs if r not in queries]
    for run in rest:
        run.messages = versions + run.messages
    return rest


def _command_only(run: Run) -> bool:
    return run.command is not None and not (run.messages or run.header or run.test_name or run.results
                                            or run.addresses or run.banner_line)


def _attach_commands(runs: List[Run]) -> List[Run]:
    """A paste of the two command lines plus a side's output without its command line: one run.

    Only when it is unambiguous: exactly one command-only run and one command-less run of that side.
    """
    for side in ("server", "client"):
        lonely = [r for r in runs if r.side == side and _command_only(r)]
        bare = [r for r in runs if r.side == side and r.command is None]
        if len(lonely) == 1 and len(bare) == 1:
            bare[0].command = lonely[0].command
            bare[0].tool = bare[0].tool or lonely[0].tool
            bare[0].side_reason = f"{bare[0].side_reason}; command line from {lonely[0].source}"
            runs = [r for r in runs if r is not lonely[0]]
    return runs


def _complete_sides(runs: List[Run]) -> None:
    """Two runs, one side known: the other is the other side (the usual two-log paste)."""
    if len(runs) != 2:
        return
    known = [r for r in runs if r.side != "unknown"]
    if len(known) == 1:
        other = runs[0] if runs[1] is known[0] else runs[1]
        other.side = "client" if known[0].side == "server" else "server"
        other.side_reason = f"the other run in this input is the {known[0].side}"
