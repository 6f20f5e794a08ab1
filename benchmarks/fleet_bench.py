#!/usr/bin/env python3
"""How long `rdmadoctor fleet check --from DIR --html FILE` takes for a fleet of N nodes (default 1,000).

The fleet is made from the lab's `check --save` recordings (fixtures/lab/*/*/check-*.json: three Debian pairs,
twenty faults): node0001..nodeN, most of them copies of the recordings whose check is clean, about one in ten
a recording of a fault (memlock, firewall, port down, missing module, device permissions...), named by node and
spread in runs (as a bad rack would be). Every copy keeps its recorded facts, so kernels, rdma-core and perftest
versions differ as the three pairs do, and the drift has something to find; each node's hostname is its name.

Prints the end-to-end time of the command (a new Python process: start-up, reading and checking every file
against the facts schema, diagnosing, grouping, drift, the text summary and the HTML), the HTML's size, and the
fleet's one-line verdict. Aim: under 10 s for 1,000 nodes.

    python3 benchmarks/fleet_bench.py [--nodes 1000] [--repeat 3] [--keep DIR] [--html FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "fixtures" / "lab"


def recordings():
    """(clean, faulty) recordings: a recording is clean when the host it was saved on had no fault of its own
    (the fault of its scenario was on the other host or in a command line)."""
    sys.path.insert(0, str(ROOT))
    from rdmadoctor.collectors import load_facts
    from rdmadoctor.engine import diagnose
    clean, faulty = [], []
    for path in sorted(LAB.glob("*/*/check-*.json")):
        verdict = diagnose.check(load_facts(path)).verdict
        (clean if verdict.status == "ok" else faulty).append(path)
    return clean, faulty


def make_fleet(directory: Path, nodes: int, seed: int = 7) -> None:
    clean, faulty = recordings()
    rng = random.Random(seed)
    i = 1
    while i <= nodes:
        if rng.random() < 0.03:                       # a run of 2-8 neighbours with the same fault
            path, run = rng.choice(faulty), rng.randint(2, 8)
        elif rng.random() < 0.06:
            path, run = rng.choice(faulty), 1
        else:
            path, run = rng.choice(clean), 1
        doc = json.loads(path.read_text())
        for _ in range(run):
            if i > nodes:
                break
            name = f"node{i:04d}"
            doc["host"]["hostname"] = name
            (directory / f"{name}.json").write_text(json.dumps(doc))
            i += 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the facts files here (kept) instead of a temporary dir")
    ap.add_argument("--html", type=Path, help="keep the HTML overview here")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rdmadoctor-fleet-bench-"))
    facts = args.keep or work / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    try:
        made = time.perf_counter()
        make_fleet(facts, args.nodes)
        print(f"fleet: {args.nodes} facts files from {len(list(LAB.glob('*/*/check-*.json')))} lab recordings "
              f"in {facts} ({time.perf_counter() - made:.1f} s to make)")
        html = args.html or work / "fleet.html"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        times, cpu = [], []
        line = ""
        import resource
        for _ in range(args.repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "rdmadoctor", "fleet", "check", "--from", str(facts),
                                   "--html", str(html), "--format", "line"], env=env, capture_output=True, text=True,
                                  timeout=600)
            times.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            line = proc.stdout.strip()
            if proc.returncode not in (0, 1, 2, 3):
                print(proc.stderr, file=sys.stderr)
                return 1
        cpus = os.cpu_count()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"fleet check --from --html: median {statistics.median(times):.2f} s, best {min(times):.2f} s "
              f"over {len(times)} runs ({cpus} CPUs, load average {load:.1f}); aim: under 10 s")
        print(f"CPU time (the command and its worker processes): median {statistics.median(cpu):.2f} s; "
              f"on {cpus} idle CPUs the wall time is about "
              f"{statistics.median(cpu) / max(1, min(cpus or 1, 2)) + 0.5:.1f} s")
        print(f"HTML: {html.stat().st_size / 1e6:.2f} MB{' (kept: ' + str(html) + ')' if args.html else ''}")
        print(f"verdict: {line[:300]}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(facts, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
