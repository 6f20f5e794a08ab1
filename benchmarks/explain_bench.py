#!/usr/bin/env python3
"""How fast `rdmadoctor explain` reads huge logs and many files, how much memory and output it needs, and how
fast it starts; every figure beside GNU grep on the same file in the same run.

    python3 benchmarks/explain_bench.py                    # every shape at 100 MB, scaling, files, start-up
    python3 benchmarks/explain_bench.py --quick            # 10 MB shapes, fewer runs (a minute or two)
    python3 benchmarks/explain_bench.py --big              # adds the 1,000 MB point of the scaling table
    python3 benchmarks/explain_bench.py --tree DIR         # measures another checkout of rdmadoctor (before/after)
    python3 benchmarks/explain_bench.py --only dense,flat  # some shapes only

Shapes (each built to the size asked, from the repository's fixtures, varied so that no two rows repeat):
  dense       what a long `--run_infinitely` or `-D` soak writes: a perftest header in about one chunk of a
              hundred, all the rest result rows
  one-run     one run's header and then nothing but result rows (millions of them)
  many-runs   every perftest log of fixtures/ repeated: thousands of runs, every line something perftest prints
  noise       kernel-log-like lines that share a word with the message catalogue, all different
  flat        a healthy paste flattened into ONE line of the whole size (a chat joined it)
  nccl, ucx, ompi, libfabric
              that producer's fixtures/real cases, repeated, with their numbers varied
Each is timed (wall seconds, min/median/max over --repeat runs, explain and grep in turn) as `explain` with text
output and `explain --json`; peak RSS is each run's own (os.wait4), output sizes are those of the last run.
grep is `grep -a -c -E` with the key messages as its pattern, output to a pipe (GNU grep stops at the first
match when it writes to /dev/null).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
GREP_PATTERN = ("ethernet_read_keys|Couldn't connect|Failed status|Port number|mismatch|Couldn't allocate|"
                "Failed to modify QP|Waiting for client|Number of qps|#bytes")
SHAPES = ("dense", "one-run", "many-runs", "noise", "flat", "nccl", "ucx", "ompi", "libfabric")
PRODUCER_PREFIXES = {"nccl": ("nccl-", "nccl-tests-"), "ucx": ("ucx-",), "ompi": ("ompi-",),
                     "libfabric": ("libfabric-",)}

HEADER = """\
root@node02:~# ib_write_bw -d mlx5_0 -x 3 --run_infinitely 192.0.2.1
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : ON
 TX depth        : 128
 CQ Moderation   : 100
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 3
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x0108 PSN 0x3a1f2e RKey 0x1fffbd VAddr 0x007f3b4c0a0000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:00:02:02
 remote address: LID 0000 QPN 0x0109 PSN 0x5d21c0 RKey 0x1fffbe VAddr 0x007f9a1e600000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:00:02:01
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
"""


def _rows(rng: random.Random, count: int, size: int = 65536) -> str:
    return "".join(f" {size:<10d} {rng.randrange(5000, 6000):<10d}       {rng.uniform(9000, 9200):.2f}"
                   f"            {rng.uniform(9000, 9200):.2f}\t\t   {rng.uniform(0.14, 0.15):.6f}\n"
                   for _ in range(count))


def _fixture_logs(prefixes: Optional[Tuple[str, ...]] = None) -> List[bytes]:
    out = []
    for path in sorted((ROOT / "fixtures").rglob("*.log")):
        if path.stat().st_size >= 1 << 20:
            continue
        case = path.parent.name
        if prefixes is None or (path.parent.parent.name == "real" and case.startswith(prefixes)):
            out.append(path.read_bytes())
    return out


def _vary(data: bytes, rng: random.Random) -> bytes:
    """The same log with its digits changed here and there: lines stop repeating, their shape stays."""
    out = bytearray(data)
    for i in range(0, len(out), 7):
        if 48 <= out[i] <= 57:
            out[i] = 48 + rng.randrange(10)
    return bytes(out)


def build(shape: str, path: Path, size_mb: float) -> None:
    rng = random.Random(7)
    target = int(size_mb * (1 << 20))
    written = 0
    with open(path, "wb") as f:
        def put(chunk: bytes) -> None:
            nonlocal written
            f.write(chunk)
            written += len(chunk)

        if shape == "dense":
            header = HEADER.encode()
            while written < target:
                put(header)
                # about 99 chunks of rows for each chunk of header
                put(_rows(rng, max(1, 99 * len(header) // 80)).encode())
        elif shape == "one-run":
            put(HEADER.encode())
            while written < target:
                put(_rows(rng, 5000).encode())
        elif shape == "many-runs":
            logs = _fixture_logs()
            n = 0
            while written < target:
                put(logs[n % len(logs)] + b"\n")
                n += 1
        elif shape == "noise":
            n = 0
            while written < target:
                put("".join(f"{time.time():.6f} node{rng.randrange(10**6)} kernel: noise line {n}-{i} "
                            f"value={rng.random():.9f}\n" for i in range(500)).encode())
                n += 1
        elif shape == "flat":
            body = HEADER.replace("\n", " ")
            put(body.encode())
            while written < target - 100:
                put(_rows(rng, 2000).replace("\n", " ").encode())
            put(b"\n")
        elif shape in PRODUCER_PREFIXES:
            logs = _fixture_logs(PRODUCER_PREFIXES[shape])
            n = 0
            while written < target:
                put(_vary(logs[n % len(logs)], rng) + b"\n")
                n += 1
        else:
            raise ValueError(shape)


# -- timing -------------------------------------------------------------------------------------------------
def run_once(argv: Sequence[str], env: Dict[str, str], stdout_path: Optional[Path] = None) -> Tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB of this child alone, exit status); CPU seconds in LAST_CPU."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
    if out is subprocess.PIPE:
        while proc.stdout.read(1 << 16):       # a pipe, read as it comes (grep quits early on /dev/null)
            pass
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if stdout_path:
        out.close()
    else:
        proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    return seconds, usage.ru_maxrss, proc.returncode


LAST_CPU = [0.0]


def spread(values: List[float]) -> Tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def fmt(values: List[float], digits: int = 2) -> str:
    lo, med, hi = spread(values)
    return f"{med:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


class Bench:
    def __init__(self, tree: Path, repeat: int):
        self.repeat = repeat
        # an installed rdmadoctor has its byte code compiled: let the measured runs write and reuse theirs
        self.env = {k: v for k, v in dict(os.environ, PYTHONPATH=str(tree)).items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.cmd = [sys.executable, "-m", "rdmadoctor"]

    def pair(self, explain_args: Sequence[str], grep_argv: Optional[Sequence[str]], out: Path,
             repeat: Optional[int] = None) -> Dict[str, object]:
        """explain and grep in turn; explain's output goes to `out`."""
        times, greps, rss, cpu = [], [], [], []
        for _ in range(repeat or self.repeat):
            seconds, peak, status = run_once([*self.cmd, *explain_args], self.env, out)
            times.append(seconds)
            cpu.append(LAST_CPU[0])
            rss.append(peak / 1024)
            if grep_argv:
                greps.append(run_once(grep_argv, self.env)[0])
        return {"times": times, "grep": greps, "rss": rss, "cpu": cpu, "status": status,
                "out_bytes": out.stat().st_size}


def shapes_table(bench: Bench, tmp: Path, shapes: Sequence[str], size_mb: float) -> None:
    print(f"\n## Shapes at {size_mb:g} MB (wall s: median (min-max) of {bench.repeat}; grep on the same file in turn)")
    print(f"{'shape':<10} {'MB':>7} {'text s':>18} {'MB/s':>6} {'cpu s':>6} {'json s':>18} {'grep s':>18} "
          f"{'x grep':>7} {'RSS text':>9} {'RSS json':>9} {'json KB':>8} {'html KB':>8} {'exit':>4}")
    for shape in shapes:
        log = tmp / f"{shape}.log"
        build(shape, log, size_mb)
        mb = log.stat().st_size / 1e6
        grep = ["grep", "-a", "-c", "-E", GREP_PATTERN, str(log)]
        text = bench.pair(["explain", str(log)], grep, tmp / "out.txt")
        js = bench.pair(["explain", "--json", str(log)], None, tmp / "out.json")
        html = bench.pair(["explain", "--html", str(tmp / "out.html"), str(log)], None, tmp / "out.html.txt", 1)
        html_kb = (tmp / "out.html").stat().st_size / 1024 if (tmp / "out.html").exists() else float("nan")
        med_text, med_grep = statistics.median(text["times"]), statistics.median(text["grep"])
        print(f"{shape:<10} {mb:>7.1f} {fmt(text['times']):>18} {mb / med_text:>6.0f} "
              f"{statistics.median(text['cpu']):>6.2f} {fmt(js['times']):>18} "
              f"{fmt(text['grep'], 3):>18} {med_text / med_grep:>6.1f}x {max(text['rss']):>7.0f}MB "
              f"{max(js['rss']):>7.0f}MB {js['out_bytes'] / 1024:>8.0f} {html_kb:>8.0f} {text['status']:>4}")
        sys.stdout.flush()
        log.unlink()


def scaling_table(bench: Bench, tmp: Path, sizes: Sequence[float]) -> None:
    print("\n## Scaling with input size (dense shape, explain text output)")
    print(f"{'MB':>7} {'explain s':>18} {'MB/s':>6} {'cpu s':>6} {'s per 100 MB':>12} {'grep s':>18} {'x grep':>7} "
          f"{'RSS':>7}")
    for size in sizes:
        log = tmp / f"scale-{size}.log"
        build("dense", log, size)
        mb = log.stat().st_size / 1e6
        grep = ["grep", "-a", "-c", "-E", GREP_PATTERN, str(log)]
        r = bench.pair(["explain", str(log)], grep, tmp / "out.txt", bench.repeat if size < 500 else 1)
        med, med_grep = statistics.median(r["times"]), statistics.median(r["grep"])
        print(f"{mb:>7.0f} {fmt(r['times']):>18} {mb / med:>6.0f} {statistics.median(r['cpu']):>6.2f} "
              f"{med / mb * 100:>12.2f} {fmt(r['grep'], 3):>18} "
              f"{med / med_grep:>6.1f}x {max(r['rss']):>5.0f}MB")
        sys.stdout.flush()
        log.unlink()


def files_table(bench: Bench, tmp: Path, counts: Sequence[int]) -> None:
    print("\n## Scaling with the number of files (fixture logs, one per file; explain --json)")
    print(f"{'files':>6} {'MB':>6} {'explain s':>18} {'cpu s':>6} {'ms per file':>11} {'grep s':>18} {'RSS':>7} "
          f"{'json KB':>8} {'exit':>4}")
    logs = _fixture_logs()
    for count in counts:
        d = tmp / f"files-{count}"
        d.mkdir()
        rng = random.Random(count)
        paths = []
        for i in range(count):
            p = d / f"{i:05d}.log"
            p.write_bytes(_vary(logs[i % len(logs)], rng))
            paths.append(str(p))
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        grep = ["grep", "-a", "-c", "-E", GREP_PATTERN, *paths]
        r = bench.pair(["explain", "--json", *paths], grep, tmp / "out.json")
        med = statistics.median(r["times"])
        print(f"{count:>6} {mb:>6.1f} {fmt(r['times']):>18} {statistics.median(r['cpu']):>6.2f} "
              f"{med / count * 1000:>11.2f} {fmt(r['grep'], 3):>18} "
              f"{max(r['rss']):>5.0f}MB {r['out_bytes'] / 1024:>8.0f} {r['status']:>4}")
        sys.stdout.flush()
        shutil.rmtree(d)


def startup_table(bench: Bench, tmp: Path) -> None:
    print(f"\n## Start-up (wall ms: median (min-max) of {max(5, bench.repeat * 3)})")
    small = tmp / "small.log"
    data = (ROOT / "fixtures" / "real" / "felixfu-cx3-write-bw-healthy" / "paste.log").read_bytes()
    small.write_bytes((data * (5000 // len(data) + 1))[:5000])
    n = max(5, bench.repeat * 3)
    rows = [("python -c pass", [sys.executable, "-c", "pass"]),
            ("rdmadoctor --help", [*bench.cmd, "--help"]),
            ("explain 5 KB log", [*bench.cmd, "explain", str(small)]),
            ("explain --json 5 KB", [*bench.cmd, "explain", "--json", str(small)])]
    for label, argv in rows:
        run_once(argv, bench.env)     # warm the page cache and the user's compiled-catalogue cache
        times, cpu = [], []
        for _ in range(n):
            times.append(run_once(argv, bench.env)[0] * 1000)
            cpu.append(LAST_CPU[0] * 1000)
        print(f"{label:<22} {fmt(times, 0):>16} ms wall, cpu {fmt(cpu, 0)} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10 MB shapes, 2 runs, 1,000 files")
    ap.add_argument("--big", action="store_true", help="add 1,000 MB to the scaling table")
    ap.add_argument("--only", help="comma-separated: shapes and/or scaling,files,startup")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the rdmadoctor checkout to measure")
    args = ap.parse_args()
    if args.quick:
        args.size_mb, args.repeat = 10, 2
    only = set(args.only.split(",")) if args.only else None
    bench = Bench(args.tree.resolve(), args.repeat)
    grep_version = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"rdmadoctor from {args.tree}; python {sys.version.split()[0]}; {os.cpu_count()} cores; {grep_version}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shapes = [s for s in SHAPES if only is None or s in only]
        if shapes:
            shapes_table(bench, tmp, shapes, args.size_mb)
        if only is None or "scaling" in only:
            sizes = [1, 10, 100] if not args.quick else [1, 10]
            scaling_table(bench, tmp, sizes + ([1000] if args.big else []))
        if only is None or "files" in only:
            files_table(bench, tmp, [1000] if args.quick else [1000, 4000])
        if only is None or "startup" in only:
            startup_table(bench, tmp)


if __name__ == "__main__":
    main()
