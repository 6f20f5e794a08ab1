"""Lines that perftest and rdma-core both print, read in the context of the program that printed them.

perftest prints several strings that libibverbs, librdmacm and the rdma-core example programs print too
("No IB devices found", "Failed to modify QP to RTS", "cma event %s, error %d", the libibverbs provider
warnings, `hca_id:`). The catalogue gives such a line perftest's id (perftest's catalogue wins a tie), which is
right inside a perftest run. When another program's run is open (an `ibv_rc_pingpong`, `rping`, `ibv_devinfo`,
`fi_pingpong` or `mpirun` command line came before it), the line is that program's or its libraries' words:
`equivalent` gives that program's catalogue's reading of the same text, else rdma-core's
(knowledge/messages/verbs.toml).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from rdmadoctor.logparse import catalog

# the catalogue whose entries are rdma-core's own words (libibverbs, librdmacm, their example programs)
LIBRARY = "verbs"
# how much of perftest's match the rdma-core reading may leave out at either end (a prefix, a colon)
_SLACK = 3


@lru_cache(maxsize=16)
def _catalog_of(producer: str) -> catalog.Catalog:
    return catalog.Catalog([p for p in catalog.load().patterns if p.producer == producer])


def equivalent(match: catalog.Match, active: str, line: str) -> Optional[catalog.Match]:
    """The `active` producer's (else rdma-core's) reading of the words perftest's catalogue matched in `line`:
    a message of that catalogue that covers them (the same sentence, or a longer message that contains it)."""
    found = line.find(match.text)             # the match's place in the whole line (a flattened line is cut)
    start = found if found >= 0 else match.start
    end = start + len(match.text.rstrip())
    for producer in dict.fromkeys((active, LIBRARY)):
        if producer == "perftest":
            continue
        for m in _catalog_of(producer).find(line):
            if m.start <= start + _SLACK and m.end >= end - _SLACK:
                return m
    return None
