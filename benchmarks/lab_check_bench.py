#!/usr/bin/env python3
"""Boot the Soft-RoCE lab and run benchmarks/check_bench.py inside a guest.

    python3 benchmarks/lab_check_bench.py [--release bookworm|trixie] [--repeat 5]

Prints the guest's figures: `rdmadoctor check` against ibv_devinfo -v, rdma, ip -j, nft -j, ss, dmesg... run
one after the other, on the same VM in the same minute. The VM runs under TCG (no KVM here), so absolute
times are several times a real host's; the ratio is what the benchmark is about.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.lab.vm import Lab  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", default="bookworm", choices=("bookworm", "trixie"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with Lab(args.release, args.release) as lab:
        lab.reset()
        env = " ".join(f"{k}={v}" for k, v in lab.h1.python_env().items())
        result = lab.h1.run(f"cd /lab/src && env {env} python3 benchmarks/check_bench.py --repeat {args.repeat} "
                            f"--python python3", timeout=1200)
        print(f"guest h1 ({args.release}, TCG):")
        print(result.output.strip())
        if result.rc != 0:
            raise SystemExit(result.rc)


if __name__ == "__main__":
    main()
