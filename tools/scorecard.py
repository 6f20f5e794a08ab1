"""How right `rdmadoctor explain` is on the real-world corpus (fixtures/real): per producer and per cause.

    python tools/scorecard.py [--json] [--cases]

For every case with a cause its source established (a label of high or medium confidence):
  verdict the verdict itself names that cause (for a healthy run: the verdict is ok);
  top-1   the first cause rdmadoctor names is that cause: the verdict's cause, or, when the paste cannot tell
          (a verdict without a cause: `unknown`, or a warning whose cause is unknown), the first of its ranked
          candidates;
  top-3   the cause is among the first three it names (the verdict's cause, then its candidate causes, then
          the causes of the findings nothing explains, in rank order).
Over every case, whatever its label:
  confident wrong   the verdict names another cause at high confidence;
  failure called ok the source shows a failure and the verdict is ok.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REAL = ROOT / "fixtures" / "real"
LOG_NAMES = ("server.log", "client.log", "paste.log")
HEALTHY = ("none",)


@dataclass
class Case:
    name: str
    meta: Dict[str, Any]
    status: str
    cause: Optional[str]
    confidence: Optional[str]
    ranked: List[str]
    runs: int

    @property
    def expected(self) -> str:
        return self.meta["expected_cause"]

    @property
    def established(self) -> bool:
        return self.expected != "unknown" and self.meta["confidence_of_label"] in ("high", "medium")

    @property
    def named(self) -> bool:
        """The verdict itself names the established cause."""
        if self.expected in HEALTHY:
            return self.status == "ok"
        return self.cause == self.expected and self.status == self.meta["expected_status"]

    @property
    def top1(self) -> bool:
        if self.expected in HEALTHY:
            return self.status == "ok"
        return self.named or (self.status != "ok" and self.cause in (None, "unknown")
                              and self.ranked[:1] == [self.expected])

    @property
    def top3(self) -> bool:
        return self.top1 or self.expected in self.ranked[:3]

    @property
    def confident_wrong(self) -> bool:
        return (self.confidence == "high" and self.cause not in (None, "unknown", self.expected)
                and not (self.expected in HEALTHY and self.status == "ok"))

    @property
    def failure_called_ok(self) -> bool:
        return self.meta["expected_status"] in ("failure", "unknown") and self.expected not in HEALTHY \
            and self.status == "ok"


def ranked_causes(diagnosis: Any) -> List[str]:
    out: List[str] = []
    for cause in [diagnosis.verdict.cause, *diagnosis.verdict.candidates,
                  *(f.cause for f in diagnosis.findings if f.explained_by is None and f.kind == "cause"),
                  *(c for f in diagnosis.findings if f.explained_by is None for c in f.candidates)]:
        if cause and cause != "unknown" and cause not in out:
            out.append(cause)
    return out


def cases(base: Path = REAL) -> List[Case]:
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_paths
    out = []
    for d in sorted(p for p in base.iterdir() if (p / "meta.toml").is_file()):
        meta = tomllib.loads((d / "meta.toml").read_text(encoding="utf-8"))
        logs = [str(d / n) for n in LOG_NAMES if (d / n).is_file()]
        parsed = parse_paths(logs)
        dx = diagnose.explain(parsed)
        out.append(Case(d.name, meta, dx.verdict.status, dx.verdict.cause, dx.verdict.confidence,
                        ranked_causes(dx), len(parsed.runs)))
    return out


@dataclass
class Tally:
    cases: int = 0
    established: int = 0
    named: int = 0
    top1: int = 0
    top3: int = 0
    confident_wrong: int = 0
    failure_called_ok: int = 0
    misses: List[str] = field(default_factory=list)

    def add(self, c: Case) -> None:
        self.cases += 1
        self.confident_wrong += c.confident_wrong
        self.failure_called_ok += c.failure_called_ok
        if c.established:
            self.established += 1
            self.named += c.named
            self.top1 += c.top1
            self.top3 += c.top3
            if not c.top1:
                self.misses.append(c.name)

    def row(self, name: str) -> List[str]:
        pct = (lambda n: f"{100 * n / self.established:.0f}%") if self.established else (lambda n: "-")
        return [name, str(self.cases), str(self.established), f"{self.named} ({pct(self.named)})",
                f"{self.top1} ({pct(self.top1)})",
                f"{self.top3} ({pct(self.top3)})", str(self.confident_wrong), str(self.failure_called_ok)]


def tallies(all_cases: List[Case]) -> Dict[str, Dict[str, Tally]]:
    out: Dict[str, Dict[str, Tally]] = {"all": {"all": Tally()}, "producer": {}, "cause": {}}
    for c in all_cases:
        out["all"]["all"].add(c)
        out["producer"].setdefault(c.meta.get("producer", "perftest"), Tally()).add(c)
        out["cause"].setdefault(c.expected, Tally()).add(c)
    return out


HEAD = ["", "cases", "established", "verdict", "top-1", "top-3", "confident wrong", "failure called ok"]


def render(t: Dict[str, Dict[str, Tally]]) -> str:
    lines = []
    for title in ("all", "producer", "cause"):
        rows = [HEAD] + [tally.row(name) for name, tally in sorted(t[title].items())]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
        lines.append(f"\n{'By ' + title if title != 'all' else 'Whole corpus'}")
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines).lstrip("\n")


def main(argv: List[str]) -> int:
    all_cases = cases()
    t = tallies(all_cases)
    if "--json" in argv:
        print(json.dumps({k: {n: vars(v) for n, v in d.items()} for k, d in t.items()}, indent=1))
    else:
        print(render(t))
    if "--cases" in argv:
        for c in all_cases:
            mark = "ok  " if c.top1 else ("top3" if c.top3 else "MISS") if c.established else "    "
            flags = ((" CONFIDENT-WRONG" if c.confident_wrong else "")
                     + (" FAILURE-CALLED-OK" if c.failure_called_ok else ""))
            print(f"{mark} {c.name}: {c.status}/{c.cause}/{c.confidence} expected {c.meta['expected_status']}/"
                  f"{c.expected}/{c.meta['confidence_of_label']}{flags}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:          # `| head`
        sys.exit(0)
