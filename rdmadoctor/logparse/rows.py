"""Result rows that carry no word: fabtests' and fi_pingpong's table ("64  10  =10  1.2k  0.00s  19.69  3.25  0.31").

The catalogue's prefilter only tries a pattern on lines that hold its keyword; a row of numbers holds none. The
entries listed here (knowledge/messages/<producer>.toml, `result = true`) are tried on every line shaped like a row
instead, so that a completed run's table is its evidence of health.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import List, Optional

from rdmadoctor.logparse import catalog

ROW_IDS = ("LIBFABRIC.FT_RESULT", "OMPI.BENCH_ROW")
# fabtests: the time column ("0.00s") followed by three numbers ends every such row; an MPI benchmark (IMB, OSU):
# a size, maybe a repetition count, then one to four decimal numbers
SHAPE = re.compile(r"\d\.\d\ds\s+\S+\s+\S+\s+\S+\s*$|^\s*\d+\s+(?:\d+\s+)?\d+\.\d+(?:\s+\d+\.\d+){0,3}\s*$")
# rows printed by the program a producer started (an MPI benchmark under mpirun), not in the producer's own words:
# they count only inside a run of that producer the paste already opened
INSIDE_A_RUN = frozenset({"OMPI.BENCH_ROW"})


@lru_cache(maxsize=1)
def _patterns() -> List[catalog.Pattern]:
    return [p for p in catalog.load().patterns if p.id in ROW_IDS]


def result_row(line: str) -> Optional[catalog.Match]:
    if not SHAPE.search(line):
        return None
    for pattern in _patterns():
        m = pattern.regex.search(line)
        if m:
            return catalog.Match(pattern, m.start(), m.end(), m.group(0),
                                 {k: v for k, v in m.groupdict().items() if v is not None})
    return None
