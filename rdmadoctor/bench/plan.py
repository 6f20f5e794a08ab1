"""A bench sweep: which perftest runs, with which options, in which order. Pure data, no I/O.

Both sides of every run are built from one `RunSpec`, so they cannot disagree: the peer's agent starts
the server from the same validated options the local client uses. Only an allowlist of perftest
binaries and options is accepted; values are checked here, before anything runs on either host.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

# The binaries bench may run (raw_ethernet and multicast tests need root and MACs: not offered).
TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat",
         "ib_send_lat", "ib_atomic_lat")

# option -> (how to validate its value, the long flag perftest takes). Everything else is refused.
_INT = r"\d{1,7}"
ALLOWED: Dict[str, Tuple[Optional[str], str]] = {
    "qp": (_INT, "--qp"),
    "size": (_INT, "--size"),
    "iters": (_INT, "--iters"),
    "duration": (r"\d{1,4}", "--duration"),
    "tx-depth": (_INT, "--tx-depth"),
    "rx-depth": (_INT, "--rx-depth"),
    "ib-dev": (r"[A-Za-z0-9_.-]{1,64}", "--ib-dev"),
    "ib-port": (r"\d{1,2}", "--ib-port"),
    "gid-index": (r"\d{1,3}", "--gid-index"),
    "connection": (r"RC|UC|UD|XRC|DC|SRD", "--connection"),
    "mtu": (r"256|512|1024|2048|4096", "--mtu"),
    "inline_size": (r"\d{1,4}", "--inline_size"),
    "cq-mod": (r"\d{1,4}", "--cq-mod"),
    "sl": (r"\d{1,2}", "--sl"),
    "atomic_type": (r"CMP_AND_SWAP|FETCH_AND_ADD", "--atomic_type"),
    "bidirectional": (None, "--bidirectional"),
    "rdma_cm": (None, "--rdma_cm"),
    "report_gbits": (None, "--report_gbits"),
    "CPU-freq": (None, "--CPU-freq"),
    "all": (None, "--all"),
}
# What perftest itself forbids, so a sweep does not start a pair that cannot run.
MAX_QPS = 16384
MAX_SIZE = 1 << 31


class PlanError(ValueError):
    """A bench request that would not run (unknown tool or option, bad value)."""


@dataclass(frozen=True)
class RunSpec:
    """One perftest pair: the tool and options both sides run (the client adds the server address)."""
    tool: str
    options: Tuple[Tuple[str, object], ...]     # sorted (name, value); True for flags

    def argv(self, server: Optional[str] = None, port: Optional[int] = None) -> List[str]:
        out = [self.tool]
        for name, value in self.options:
            flag = ALLOWED[name][1]
            out.append(flag if value is True else f"{flag}={value}")
        if port is not None:
            out.append(f"--port={port}")
        if server is not None:
            out.append(server)
        return out

    def get(self, name: str, default=None):
        return dict(self.options).get(name, default)

    @property
    def label(self) -> str:
        qp, size = self.get("qp", 1), self.get("size")
        return f"{self.tool} qp={qp}" + (f" size={size}" if size is not None else "")


def validate(tool: str, options: Dict[str, object]) -> RunSpec:
    """Check a tool and its options against the allowlist; raise PlanError naming what is refused."""
    if tool not in TOOLS:
        raise PlanError(f"tool {tool!r} is not allowed (allowed: {', '.join(TOOLS)})")
    clean: Dict[str, object] = {}
    for name, value in options.items():
        if name not in ALLOWED:
            raise PlanError(f"option {name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED))})")
        pattern = ALLOWED[name][0]
        if pattern is None:
            if value not in (True, "true", "1", 1):
                raise PlanError(f"option {name!r} is a flag and takes no value")
            clean[name] = True
            continue
        text = str(value)
        if not re.fullmatch(pattern, text):
            raise PlanError(f"option {name!r}: {text!r} is not a valid value")
        clean[name] = text
    if int(clean.get("qp", 1)) < 1 or int(clean.get("qp", 1)) > MAX_QPS:
        raise PlanError(f"--qp must be between 1 and {MAX_QPS}")
    if "size" in clean and not 1 <= int(clean["size"]) <= MAX_SIZE:
        raise PlanError(f"--size must be between 1 and {MAX_SIZE}")
    if tool.endswith("_lat") and int(clean.get("qp", 1)) > 1:
        raise PlanError("latency tests run one QP (perftest: 'Multiple QPs only available on bw tests')")
    if "duration" in clean and "iters" in clean:
        raise PlanError("--duration and --iters exclude each other")
    return RunSpec(tool, tuple(sorted(clean.items())))


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
