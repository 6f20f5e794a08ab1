#!/usr/bin/env python3
"""How long `rdmadoctor check` takes to gather a host's facts, beside the native tools gathering the same.

Runs on the host it is started on (a lab VM: `python3 benchmarks/lab_check_bench.py` boots one and runs this
inside). Prints, for N repetitions, the median and best of:
  * `rdmadoctor check --save FILE` (all collectors, counters sampled once: --sample 0), and
  * the native tools one after the other, as an engineer would: ibv_devinfo -v, rdma -j link, ip -j link/addr/
    route/neigh, nft -j list ruleset, ss -ltnp, dmesg, cat /proc/modules, lspci (when present).
Aim: check no slower than 2x the native tools.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

NATIVE = [
    ["ibv_devinfo", "-v"], ["rdma", "-j", "link", "show"], ["rdma", "-j", "dev", "show"],
    ["ip", "-j", "-d", "link"], ["ip", "-j", "addr"], ["ip", "-j", "route"], ["ip", "-j", "neigh"],
    ["nft", "-j", "list", "ruleset"], ["iptables-legacy-save"], ["ss", "-ltnp"], ["dmesg"],
    ["cat", "/proc/modules"], ["lspci", "-vv"], ["dpkg-query", "-W", "rdma-core", "perftest"],
]


def timed(argv, env=None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=120)
    return time.perf_counter() - start


def native_once() -> float:
    total = 0.0
    for argv in NATIVE:
        if shutil.which(argv[0]):
            total += timed(argv)
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    # as an installed rdmadoctor runs: its byte code written (pip compiles it; PYTHONDONTWRITEBYTECODE=1 would make
    # every run compile every module again) and its rule table cached, by one run not counted
    # (to a folder of its own: the checkout may be read-only, as in a lab VM)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "rdmadoctor-bench-pycache"))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "facts.json")
        check = [args.python, "-m", "rdmadoctor", "check", "--sample", "0", "--save", out]
        timed(check, env)
        checks = [timed(check, env) for _ in range(args.repeat)]
    natives = [native_once() for _ in range(args.repeat)]
    present = [a[0] for a in NATIVE if shutil.which(a[0])]
    ratio = statistics.median(checks) / statistics.median(natives) if statistics.median(natives) else float("nan")
    print(f"rdmadoctor check --save: median {statistics.median(checks):.2f} s, best {min(checks):.2f} s")
    print(f"native tools ({len(present)}: {' '.join(present)}): median {statistics.median(natives):.2f} s, "
          f"best {min(natives):.2f} s")
    print(f"ratio (median): {ratio:.2f}x  (aim: <= 2x)")


if __name__ == "__main__":
    main()
