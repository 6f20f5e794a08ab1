#!/usr/bin/env python3
"""How fast `rdmadoctor explain` reads a huge log, and how fast `rdmadoctor --help` starts.

Prints, side by side on the same files and the same machine:
  * explain on a 100 MB log (and a 10 MB one, to show memory stays flat), wall time, MB/s, peak RSS;
  * `grep -a -c` on the same file with the key perftest messages as its pattern (-a: a fixture holds binary
    bytes, and grep stops at "binary file matches"; output to a pipe: GNU grep quits at the first match
    when it writes to /dev/null);
  * `rdmadoctor --help` start-up against `python -c pass`.
Aims: explain >= 50 MB/s and within 3x of grep; start-up < 150 ms; memory flat.

    python3 benchmarks/explain_bench.py [--size-mb 100] [--repeat 3]
The log is built from the repository's fixtures (real, lab and hand-written pastes), repeated: it is
the realistic worst case of many perftest runs in one file. An adversarial variant with unique noise
lines is measured too.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GREP_PATTERN = ("ethernet_read_keys|Couldn't connect|Failed status|Port number|mismatch|Couldn't allocate|"
                "Failed to modify QP|Waiting for client|Number of qps|#bytes")


def rdmadoctor_cmd() -> list:
    exe = shutil.which("rdmadoctor")
    return [exe] if exe else [sys.executable, "-m", "rdmadoctor"]


def build_log(path: Path, size_mb: int, unique_noise: bool) -> None:
    samples = [p.read_bytes() for p in sorted((ROOT / "fixtures").rglob("*.log")) if p.stat().st_size < 1 << 20]
    rng = random.Random(7)
    target = size_mb << 20
    written = 0
    with open(path, "wb") as f:
        n = 0
        while written < target:
            if unique_noise:
                chunk = "".join(f"{time.time():.6f} node{rng.randrange(10**6)} kernel: noise line {n}-{i} "
                                f"value={rng.random():.9f}\n" for i in range(200)).encode()
            else:
                chunk = samples[n % len(samples)] + b"\n"
            f.write(chunk)
            written += len(chunk)
            n += 1


def timed(argv, stdout=subprocess.DEVNULL):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=stdout, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_maxrss, proc.returncode, before


def peak_rss_kb(argv) -> int:
    """Peak RSS of one child, measured by /usr/bin/time when present (RUSAGE_CHILDREN is a running max)."""
    if os.path.exists("/usr/bin/time"):
        out = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            return int(out.stderr.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
    return -1


def best_of(argv, repeat, stdout=subprocess.DEVNULL):
    times = []
    for _ in range(repeat):
        seconds, *_ = timed(argv, stdout)
        times.append(seconds)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cmd = rdmadoctor_cmd()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for label, size, noise in (("fixtures x N", args.size_mb, False), ("fixtures x N", 10, False),
                                   ("unique noise", args.size_mb, True)):
            log = Path(tmp) / f"log-{size}-{noise}.log"
            build_log(log, size, noise)
            mb = log.stat().st_size / 1e6
            explain_best, explain_median = best_of([*cmd, "explain", "--json", str(log)], args.repeat)
            grep_best, _ = best_of(["grep", "-a", "-c", "-E", GREP_PATTERN, str(log)], args.repeat,
                                   subprocess.PIPE)
            grep_fixed, _ = best_of(["grep", "-a", "-c", "-F", "ethernet_read_keys", str(log)], args.repeat,
                                    subprocess.PIPE)
            rss = peak_rss_kb([*cmd, "explain", "--json", str(log)])
            rows.append((label, mb, explain_best, mb / explain_best, grep_best, explain_best / grep_best,
                         grep_fixed, rss))
            log.unlink()
        print(f"{'log':<14} {'MB':>7} {'explain s':>10} {'MB/s':>7} {'grep -E s':>10} {'x grep':>7} "
              f"{'grep -F s':>10} {'peak RSS':>10}")
        for label, mb, e, rate, g, ratio, gf, rss in rows:
            print(f"{label:<14} {mb:>7.1f} {e:>10.2f} {rate:>7.1f} {g:>10.3f} {ratio:>7.0f} {gf:>10.3f} "
                  f"{rss / 1024:>8.0f} MB")
    start_best, start_median = best_of([*cmd, "--help"], max(5, args.repeat * 3))
    py_best, py_median = best_of([sys.executable, "-c", "pass"], max(5, args.repeat * 3))
    print()
    print(f"start-up: rdmadoctor --help {start_best * 1000:.0f} ms (median {start_median * 1000:.0f} ms); "
          f"python -c pass {py_best * 1000:.0f} ms (median {py_median * 1000:.0f} ms)")
    print(f"cpu: {os.cpu_count()} cores; python {sys.version.split()[0]}; explain via {' '.join(cmd)}")


if __name__ == "__main__":
    main()
