"""Logs in, Runs out: perftest's (lines.py, runs.py) and every other producer's (producers.py), from one pass
over each input. Knows what the tools print, nothing about causes.

Each line is classified once (lines.py: perftest's structure, and every catalogue's messages); a message goes
to the run of the producer whose catalogue it is in; a library's or the kernel's message joins the run that is
open; the settings a paste shows apply to the runs of its input.
"""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import BinaryIO, Dict, Iterable, List, Tuple

from rdmadoctor.logparse import catalog, pasted, producers, rows
from rdmadoctor.logparse import library as shared_words
from rdmadoctor.logparse.lines import LineClassifier
from rdmadoctor.logparse.producers import ProducerRuns
from rdmadoctor.logparse.reader import SourceReader
from rdmadoctor.logparse.runs import RunBuilder
from rdmadoctor.model import HeaderField, Message, ParsedLog, Run

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
        source = _Source(name, classifier)
        flattened_before = classifier.flattened
        for first, lines in reader.blocks():
            number = first
            for line in lines:
                if line:
                    source.line(number, line)
                number += 1
        source_runs = _fold_version_queries(source.builder.finish())
        source_runs += source.others.finish(source.settings, source_runs)
        source_runs.sort(key=lambda r: r.first_line)
        reader.text.flattened = classifier.flattened - flattened_before
        reader.text.runs_dropped = source.builder.dropped_runs + source.others.dropped
        _side_from_name(name, source_runs)
        runs.extend(source_runs)
        sources.append(reader.text)
    runs = _attach_commands(runs)
    _complete_sides(runs)
    # the device listings a paste shows (ibv_devinfo, ibstat, show_gids ...) are facts about its host
    return ParsedLog(runs=runs, sources=sources, facts=pasted.facts_of(runs, [s.name for s in sources]))


# Catalogues whose messages belong to a producer's own run; the others (libibverbs and librdmacm as the
# "verbs" catalogue, the kernel) are libraries: their lines join whatever run is open.
_LIBRARIES = ("verbs", "kernel")


class _Source:
    """One input being read: perftest's run builder, the other producers' runs, and the settings seen."""

    def __init__(self, name: str, classifier: LineClassifier):
        self.classify = classifier.classify
        self.builder = RunBuilder(name)
        self.others = ProducerRuns(name)
        self.settings: Dict[str, HeaderField] = {}
        self.active = "perftest"          # whose run a library's message joins
        self.name = name
        self.text = ""                    # the line being read

    def line(self, number: int, line: str) -> None:
        items = self.classify(line)
        self.text = line
        for setting, value, _ in producers.settings_in(line):
            self.settings[setting] = HeaderField(value, number)
        if not items:
            row = rows.result_row(line)
            if row is not None:                # a fabtests result row: it has no word the catalogue keys on
                self._route(number, row)
                return
        # two bare integers (a cut result row) do not show that perftest is the program talking
        structural = [i for i in items if i.kind not in ("text", "message", "cut_row")]
        if structural:
            self.active = "perftest"       # perftest's header, table, command ... : perftest is talking
        elif _may_name_a_tool(line):
            command = producers.parse_command(line)
            if command is not None:
                self.others.command(number, command)
                self.active = command[1].producer
        perftest_items = [i for i in items if i.kind != "message" or not self._route(number, i.data)]
        if perftest_items:
            self.builder.feed(number, perftest_items)

    def _route(self, number: int, match) -> bool:
        """Hand a message to another producer's run; False when it stays with perftest's.

        A producer's own message goes to its run. perftest's catalogue (which also holds the lines of
        libibverbs, librdmacm and the tools that print perftest's sentences) belongs to perftest while perftest
        is talking, else it joins the open run; a library's or the kernel's message joins the open run."""
        producer = match.pattern.producer
        if producer == "perftest" and self.active != "perftest" and match.pattern.kind != "notice":
            # an error or warning perftest shares with rdma-core (or the open program's catalogue), printed inside
            # another program's run, is that program's or its libraries' message; a device listing's lines keep
            # perftest's id (V10)
            shared = shared_words.equivalent(match, self.active, self.text)
            if shared is not None:
                match, producer = shared, shared.pattern.producer
        env, value = match.fields.get("env"), match.fields.get("value")
        if env and value is not None:
            self.settings.setdefault(env, HeaderField(value, number))
        library = producer in _LIBRARIES or producer == "perftest"
        if library and self.active == "perftest" and (producer == "perftest" or self.builder.current is not None):
            return False
        message = Message(id=match.pattern.id, kind=match.pattern.kind, text=match.text.strip(), line=number,
                          source=self.name, fields=dict(match.fields))
        message.fields.setdefault("phase", match.pattern.phase)
        if match.pattern.origin:
            message.fields.setdefault("origin", match.pattern.origin)
        if library:
            self.others.message(number, producer if producer != "perftest" else "verbs", message, joins=True)
        else:
            self.others.message(number, producer, message)
            self.active = producer
        return True


def _may_name_a_tool(line: str) -> bool:
    return not producers.TOOL_WORDS.isdisjoint(catalog.line_words(line))


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
