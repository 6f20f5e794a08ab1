"""Which perftest generation printed a run, from what its output looks like.

perftest's internal VERSION (what `-V` prints and what the two sides exchange) changed its output in
known places (header lines, the units of the result table, how messages are worded); each clue narrows
the range. The range is
what a rule may compare: two sides whose ranges cannot overlap ran different generations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from rdmadoctor.model import HeaderField, Message, Run

# VERSION values and the release tags of linux-rdma/perftest that carry them
TAGS = [(5.60, "4.4-0.23 or older"), (5.92, "4.4-0.29"), (5.94, "4.4-0.32"), (5.96, "4.4-0.37"),
        (6.10, "4.5"), (6.17, "23.10"), (6.20, "24.01"), (6.22, "24.07"), (6.23, "24.10"), (6.24, "25.01"),
        (6.25, "25.04"), (6.27, "25.10"), (6.28, "26.01"), (6.29, "26.04")]


@dataclass
class Generation:
    low: float = 0.0
    high: float = 99.0
    clues: List[Tuple[str, int]] = field(default_factory=list)   # (what shows it, line)

    def narrow(self, low: Optional[float], high: Optional[float], clue: str, line: int) -> None:
        if low is not None and low > self.low:
            self.low = low
        if high is not None and high < self.high:
            self.high = high
        self.clues.append((clue, line))

    @property
    def known(self) -> bool:
        return bool(self.clues)

    @property
    def consistent(self) -> bool:
        return self.low <= self.high

    def overlaps(self, other: "Generation") -> bool:
        return self.low <= other.high and other.low <= self.high

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        if not self.known:
            return "unknown"
        if self.low == self.high:
            return f"VERSION {self.low:.2f} (perftest {_tag(self.low)})"
        lo = f"{self.low:.2f}" if self.low > 0 else "?"
        hi = f"{self.high:.2f}" if self.high < 99 else "?"
        return f"VERSION {lo}–{hi}" + (f" (perftest {_tag(self.low)} … {_tag(self.high)})"
                                        if self.low > 0 and self.high < 99 else "")


def _tag(version: float) -> str:
    best = TAGS[0][1]
    for v, tag in TAGS:
        if v <= version + 1e-9:
            best = tag
    return best


_GEN = re.compile(r"([<>]=)\s*(\d+\.\d+)")


# header lines that appeared in a release and stayed: (field, VERSION range, clue)
_HEADER_CLUES = (
    ("ddp", 6.24, 6.26, "header has 'Using DDP'"),
    ("cqe_poll_batch", 6.25, None, "header has 'CQE Poll Batch'"),
    ("enhanced_reorder", 6.27, None, "header has 'Using Enhanced Reorder'"),
    ("numa_node", 6.29, None, "header has 'NUMA node'"),
)


def infer(run: Run) -> Generation:
    g = Generation()
    _header(g, run.header)
    _units(g, run)
    for m in run.messages:
        _message(g, m)
    return g


def _header(g: Generation, h: Dict[str, HeaderField]) -> None:
    if "pcie_relax_order" in h or "wr_api" in h:
        g.narrow(5.92, None, "header has 'PCIe relax order' / 'ibv_wr* API'",
                 (h.get("pcie_relax_order") or h["wr_api"]).line)
    elif "data_ex_method" in h and "num_qps" in h:
        g.narrow(None, 5.91, "complete header without 'PCIe relax order'", h["data_ex_method"].line)
    if "lock_free" in h:
        g.narrow(6.23, None, "header has 'Lock-free'", h["lock_free"].line)
    elif "pcie_relax_order" in h and "data_ex_method" in h:
        g.narrow(None, 6.22, "header without 'Lock-free'", h["pcie_relax_order"].line)
    for key, low, high, clue in _HEADER_CLUES:
        if key in h:
            g.narrow(low, high, clue, h[key].line)


def _units(g: Generation, run: Run) -> None:
    """24.07 (VERSION 6.22) renamed the MB/sec column MiB/sec."""
    units = {r.unit for r in run.results if r.unit in ("MB/sec", "MiB/sec")}
    if not units or not run.result_header_line:
        return
    if "MiB/sec" in units:
        g.narrow(6.22, None, "results in MiB/sec", run.result_header_line)
    else:
        g.narrow(None, 6.21, "results in MB/sec", run.result_header_line)


def _message(g: Generation, m: Message) -> None:
    for op, number in _GEN.findall(m.fields.get("gen") or ""):
        v = float(number)
        g.narrow(v if op == ">=" else None, v if op == "<=" else None, f"prints '{m.text}'", m.line)
    if m.id == "T01S":
        if m.fields.get("status_name"):
            g.narrow(6.28, None, "completion error printed as 'Failed status-<name> (<n>)'", m.line)
        else:
            g.narrow(None, 6.27, "completion error printed as 'Failed status <n>'", m.line)
    if m.id == "N01" and "dynamic polling" in m.text.lower():
        g.narrow(6.27, None, "prints 'Disabling dynamic polling'", m.line)
    if m.id == "N02":
        try:
            v = float(m.fields["version"])
        except (KeyError, ValueError):
            return
        g.narrow(v, v, f"prints '{m.text}'", m.line)
