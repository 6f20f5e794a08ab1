"""Classified lines in, Runs out: where one perftest side's output ends and the next begins, and which
side each one is.

A run grows in the order perftest prints: command, server banner, header box, address lines, result
table, with messages anywhere. Something that can only start a new run (a second command line, a
second header box, a separator that names a side, a message only the other side can print) closes
the current one.
"""
from __future__ import annotations

from typing import List, Optional

from rdmadoctor.logparse.lines import Item
from rdmadoctor.model import Address, Command, HeaderField, Message, ResultRow, Run

MAX_RUNS = 256          # per source; a log with more runs keeps the first ones (and says so)
MAX_ROWS = 2000         # result rows kept per run
MAX_MESSAGES = 400      # messages kept per run

_ROW_COLUMNS = {
    "bw": ("bw_peak", "bw_avg", "msg_rate", "cpu_util"),
    "lat": ("t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9"),
    "lat_dur": ("t_avg", "tps_avg"),
}


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


class RunBuilder:
    def __init__(self, source: str):
        self.source = source
        self.runs: List[Run] = []
        self.dropped_runs = 0
        self.current: Optional[Run] = None
        self.result_kind: Optional[str] = None
        self.result_unit: Optional[str] = None
        self.pending_label: Optional[dict] = None
        self._strength: dict = {}          # id(run) -> strength of the evidence for its side
        # A command started in the background ("ib_write_bw &") keeps printing while the next command
        # runs in the same terminal (a loopback test): their lines interleave. `partner` is that
        # background run while it has not finished; lines the current run already has go to it.
        self.background: Optional[Run] = None
        self.partner: Optional[Run] = None
        self._handlers = {kind: getattr(self, "_on_" + kind) for kind in
                          ("side_label", "command", "banner", "test_name", "header", "address", "gid",
                           "result_header", "numbers", "message")}

    # -- run lifecycle ---------------------------------------------------------------------------
    def _has_content(self, run: Run) -> bool:
        return bool(run.command or run.banner_line or run.test_name or run.header or run.messages
                    or run.results or run.addresses)

    def _start(self, line: int) -> Run:
        if self.current is not None and self._has_content(self.current):
            self._close()
        if self.current is None or self._has_content(self.current):
            self.current = Run(source=self.source, index=len(self.runs) + self.dropped_runs,
                               first_line=line, last_line=line)
            self.result_kind = self.result_unit = None
        if self.pending_label:
            self.current.label = self.pending_label["label"]
            self._set_side(self.current, self.pending_label["side"], f"separator '{self.pending_label['label']}'", 3)
            self.pending_label = None
        return self.current

    def _close(self) -> None:
        run = self.current
        self.current = None
        if run is None or not self._has_content(run):
            return
        if len(self.runs) < MAX_RUNS:
            self.runs.append(run)
            return
        self.dropped_runs += 1
        if any(m.kind == "error" for m in run.messages):
            # a failure anywhere counts: it takes the place of the last kept run that only printed results
            healthy = next((i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i].results
                            and not any(m.kind == "error" for m in self.runs[i].messages)), None)
            if healthy is not None:
                del self.runs[healthy]
                self.runs.append(run)

    def _run(self, line: int) -> Run:
        run = self.current if self.current is not None else self._start(line)
        run.last_line = line
        return run

    # side evidence strength: 4 command line, 3 separator/prompt label, 3 banner, 2 side-only message
    def _set_side(self, run: Run, side: str, reason: str, strength: int) -> None:
        if strength > self._strength.get(id(run), 0):
            run.side, run.side_reason = side, reason
            self._strength[id(run)] = strength

    # -- items ----------------------------------------------------------------------------------------
    def feed(self, number: int, items) -> None:
        inline_side = None
        if items and items[0].kind == "side_label" and len(items) > 1:
            inline_side = items[0].data["side"]
            items = items[1:]
        handlers = self._handlers
        for item in items:
            handler = handlers.get(item.kind)
            if handler is not None:
                handler(number, item, inline_side)

    def _on_side_label(self, number: int, item: Item, inline_side) -> None:
        if self.current is not None and self._has_content(self.current):
            self._close()
        self.pending_label = item.data

    def _on_command(self, number: int, item: Item, inline_side) -> None:
        d = item.data
        waiting = self.background if self.background is not None and not self.background.results else None
        run = self._start(number)
        self.partner = waiting
        self.background = run if d.get("background") else None
        run.command = Command(tool=d["tool"], argv=list(d["argv"]), options=dict(d["options"]), host=d["host"],
                              line=number, text=d["text"])
        run.tool = d["tool"]
        run.last_line = number
        if d["options"].get("server") or d["options"].get("client"):
            side = "server" if d["options"].get("server") else "client"
        else:
            side = "client" if d["host"] else "server"
        self._set_side(run, side, f"command line ({'names server ' + d['host'] if d['host'] else 'no server address'})", 4)
        if d.get("prompt_side"):
            run.label = run.label or d["prompt_side"]

    def _on_banner(self, number: int, item: Item, inline_side) -> None:
        run = self.current
        if item.data == "rdma_cm" and run is not None and run.test_name and not run.results:
            # the -R server prints "Waiting for client rdma_cm QP to connect" inside its header box
            self._set_side(run, "server", "prints 'Waiting for client rdma_cm QP to connect'", 3)
            run.last_line = number
            return
        if run is None or run.banner_line or run.test_name or run.results or run.addresses:
            run = self._start(number)
        run = self._run(number)
        run.banner_line = number
        self._set_side(run, "server", "prints 'Waiting for client to connect'", 3)

    def _interleaved(self, has) -> Optional[Run]:
        """The background partner, when the current run already has what this line brings.
        (Callers test `self.partner` first: most logs have none, and this runs for every line.)"""
        partner = self.partner
        if self.current is not None and has(self.current) and not has(partner):
            return partner
        return None

    def _on_test_name(self, number: int, item: Item, inline_side) -> None:
        run = self._interleaved(lambda r: r.test_name is not None) if self.partner else None
        if run is None:
            run = self.current
            if run is None or run.test_name or run.results or run.addresses:
                run = self._start(number)
            run = self._run(number)
        run.last_line = number
        run.test_name = HeaderField(item.data["text"], number)
        verb = item.data["verb"].lower()
        tst = item.data["tst"].upper()
        kind = {"rdma_write": "write", "rdma_write_imm": "write", "rdma_read": "read", "send": "send",
                "send_imm": "send", "atomic": "atomic"}[verb]
        inferred = f"ib_{kind}_{'bw' if tst == 'BW' else 'lat'}"
        if run.tool is None:
            run.tool = inferred
        run.test = {"verb": item.data["verb"], "tst": tst, "atomic": item.data["atomic"],
                    "bidirectional": item.data["bidirectional"]}

    def _on_header(self, number: int, item: Item, inline_side) -> None:
        run = None
        if self.partner is not None:
            keys = [k for k, _ in item.data]
            run = self._interleaved(lambda r: any(k in r.header for k in keys))
        if run is not None:
            for key, value in item.data:
                run.header.setdefault(key, HeaderField(value, number))
            return
        run = self.current
        if run is None or run.results or (run.addresses and not run.test_name):
            run = self._start(number)
        run = self._run(number)
        for key, value in item.data:
            if key in run.header and run.header[key].line != number and (run.addresses or run.results):
                run = self._start(number)
                run = self._run(number)
            run.header[key] = HeaderField(value, number)

    def _on_address(self, number: int, item: Item, inline_side) -> None:
        role = item.data["role"]
        partner = self._interleaved(lambda r: any(a.role == role for a in r.addresses)) if self.partner else None
        if partner is not None:
            partner.addresses.append(Address(line=number, **item.data))
            return
        run = self._run(number)
        if run.results:
            run = self._start(number)
            run = self._run(number)
        run.addresses.append(Address(line=number, **item.data))

    def _on_gid(self, number: int, item: Item, inline_side) -> None:
        run = self._run(number)
        if run.addresses and run.addresses[-1].gid is None:
            run.addresses[-1].gid = item.data
            run.addresses[-1].gid_line = number

    def _on_result_header(self, number: int, item: Item, inline_side) -> None:
        # a second table in one run is --report-both's "Remote results": the same run
        partner = self._interleaved(lambda r: r.result_header_line is not None) if self.partner else None
        if partner is not None:
            partner.result_header_line = number
            self.partner_unit = item.data["unit"]
            return
        run = self._run(number)
        run.result_header_line = run.result_header_line or number
        self.result_kind, self.result_unit = item.data["kind"], item.data["unit"]

    def _on_numbers(self, number: int, item: Item, inline_side) -> None:
        run = self.current
        if run is None or self.result_kind is None:
            return  # numbers outside a result table (a timestamp, a counter dump): not a result row
        partner = self._interleaved(lambda r: bool(r.results)) if self.partner else None
        if partner is not None and partner.result_header_line is not None:
            run, unit = partner, getattr(self, "partner_unit", self.result_unit)
            self._add_rows(partner, number, item.data, unit)
            return
        self._add_rows(run, number, item.data, self.result_unit)

    def _add_rows(self, run: Run, number: int, values, unit) -> None:
        width = {"bw": 5, "lat": 9, "lat_dur": 4}[self.result_kind]
        rows = [values[i:i + width] for i in range(0, len(values), width)] if len(values) >= 2 * width and \
            len(values) % width == 0 else [values]
        for row in rows:
            if len(row) < 3:
                continue
            try:
                size, iterations = int(row[0]), int(row[1])
            except ValueError:
                continue
            if len(run.results) >= MAX_ROWS:
                run.results_dropped += 1
                continue
            names = _ROW_COLUMNS[self.result_kind]
            run.results.append(ResultRow(line=number, kind=self.result_kind, size=size, iterations=iterations,
                                         values={n: _number(v) for n, v in zip(names, row[2:])}, unit=unit))
        run.last_line = number

    def _on_message(self, number: int, item: Item, inline_side) -> None:
        m = item.data
        side = m.pattern.side or inline_side
        run = self.current
        if run is not None and side and self._strength.get(id(run), 0) >= 2 and run.side != side \
                and self._has_content(run):
            run = self._start(number)           # a message only the other side prints: the other side's log
        run = self._run(number)
        if side:
            strength = 3 if inline_side else 2
            self._set_side(run, side, f"prints '{m.text.strip()}'", strength)
        if len(run.messages) >= MAX_MESSAGES:
            run.messages_dropped += 1
            return
        run.messages.append(Message(id=m.pattern.id, kind=m.pattern.kind, text=m.text.strip(), line=number,
                                    source=self.source, fields=dict(m.fields)))
        if m.pattern.origin:
            run.messages[-1].fields.setdefault("origin", m.pattern.origin)
        run.messages[-1].fields.setdefault("phase", m.pattern.phase)
        if m.pattern.gen:
            run.messages[-1].fields.setdefault("gen", m.pattern.gen)

    def finish(self) -> List[Run]:
        self._close()
        return self.runs
