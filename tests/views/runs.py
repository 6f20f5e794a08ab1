"""Runs built field by field, for tests that need one exact combination of header, command line and results."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from rdmadoctor.logparse.command import parse_command
from rdmadoctor.model import Command, HeaderField, Message, ResultRow, Run


def run(command: Optional[str] = None, header: Optional[Dict[str, str]] = None, test: Optional[Dict[str, Any]] = None,
        results: Iterable[ResultRow] = (), messages: Iterable[Message] = (), side: str = "client") -> Run:
    cmd = None
    if command is not None:
        parsed = parse_command(command)
        assert parsed is not None, command
        tool, argv, options, host, _ = parsed
        cmd = Command(tool, argv, options, host, 1, command)
    r = Run(source="t.log", index=0, first_line=1, last_line=40, side=side, command=cmd,
            tool=cmd.tool if cmd else None)
    for i, (key, value) in enumerate((header or {}).items()):
        r.header[key] = HeaderField(value, 10 + i)
    if test is not None:
        r.test = test
        r.test_name = HeaderField("RDMA_Write BW Test", 3)
    r.results = list(results)
    if r.results:
        r.result_header_line = 30
    r.messages = list(messages)
    return r


def bw_row(size: int = 65536, iterations: int = 5000, line: int = 31, unit: str = "MB/sec",
           avg: float = 11000.0) -> ResultRow:
    return ResultRow(line, "bw", size, iterations, {"bw_peak": avg, "bw_avg": avg, "msg_rate": 0.17}, unit)
