"""A bench sweep: which perftest runs, with which options, in which order. Pure data, no I/O.

Both sides of every run are built from one `RunSpec` (knowledge.perftest), so they cannot disagree: the
peer's agent starts the server from the same validated options the local client uses. Every combination
is validated against perftest's allowlist before anything runs on either host.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

from rdmadoctor.knowledge.perftest import PlanError, RunSpec, validate

__all__ = ["PlanError", "RunSpec", "Sweep", "estimate_seconds", "parse_counts", "parse_sizes", "validate"]

_SIZE = re.compile(r"^\s*(\d+)\s*([KkMmGg]?)(?:i?[Bb])?\s*$")


def parse_sizes(text: str) -> List[int]:
    """'4K,16K,64K,1M' -> [4096, 16384, 65536, 1048576]."""
    out = []
    for part in text.split(","):
        m = _SIZE.match(part)
        if not m:
            raise PlanError(f"not a message size: {part!r} (examples: 64, 4K, 1M)")
        out.append(int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()])
    return out


def parse_counts(text: str) -> List[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise PlanError(f"not a list of QP counts: {text!r} (example: 1,2,4,8)") from None
    if any(v < 1 for v in values):
        raise PlanError("QP counts must be at least 1")
    return values


@dataclass
class Sweep:
    tool: str
    qps: List[int]
    sizes: List[Optional[int]]
    common: Dict[str, object] = field(default_factory=dict)

    def specs(self) -> List[RunSpec]:
        """Every combination, QP count major, validated before the first one runs."""
        return [validate(self.tool, {**self.common, "qp": qp, **({"size": size} if size is not None else {})})
                for qp, size in itertools.product(self.qps, self.sizes)]


def estimate_seconds(specs: Iterable[RunSpec], per_pair_overhead: float = 3.0) -> float:
    """A rough total: -D seconds (or iterations at an assumed rate) plus start-up and teardown per pair."""
    total = 0.0
    for spec in specs:
        duration = spec.get("duration")
        if duration is not None:
            total += float(duration) + 2.0          # perftest adds its warm-up margin
        else:
            iters = float(spec.get("iters", 5000 if spec.tool == "ib_write_bw" else 1000))
            size = float(spec.get("size", 65536))
            total += iters * size / 1e9 * 8 / 10 + 0.5   # ~10 Gb/s until the first measurement corrects it
        total += per_pair_overhead
    return total
