#!/usr/bin/env python3
"""How fast `rdmadoctor explain` reads huge logs and many files, how much memory and output it needs, and how
fast it starts; every figure beside GNU grep on the same file in the same run, and beside another checkout of
rdmadoctor (`--before`) when asked.

    python3 benchmarks/explain_bench.py                      # shapes at 10 MB, scaling to 100 MB, files, start-up
    python3 benchmarks/explain_bench.py --quick              # the same, smaller and fewer runs (a minute or two)
    python3 benchmarks/explain_bench.py --sizes 10,100 --before /tmp/old   # every shape, this tree and another
    python3 benchmarks/explain_bench.py --only scaling --scaling 1,10,100,1000
    python3 benchmarks/explain_bench.py --only dense,flat --sizes 1000

Shapes (each built to the size asked, from the repository's fixtures, varied so that no two rows repeat):
  dense       what a long `--run_infinitely` or `-D` soak writes: a perftest header in about one chunk of a
              hundred, all the rest result rows
  one-run     one run's header and then nothing but result rows (millions of them)
  many-runs   every perftest log of fixtures/ repeated: thousands of runs, every line something perftest prints
  noise       kernel-log-like lines that share a word with the message catalogue, all different
  flat        a healthy paste flattened into ONE line of the whole size (a chat joined it)
  nccl, ucx, ompi, libfabric
              that producer's fixtures/real cases, repeated, with their numbers varied
Each command runs in turn with the others on the same file (this tree, the --before tree, grep), --repeat times;
wall seconds are median (min-max), CPU seconds (user + system) and peak RSS are each run's own (os.wait4), output
sizes are those of the last run. grep is `grep -a -c -E` with the key messages as its pattern, its output read
through a pipe (GNU grep stops at the first match when it writes to /dev/null). Every tree's byte code and cached
catalogues, rule table and pattern database are made before the timed runs (an installed rdmadoctor has them).
The whole default run takes a few minutes; 100 MB of every shape with --before takes much longer (the slowest
shapes read at a few MB/s).
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
class Sample:
    """One run: wall and CPU seconds, peak RSS (MiB), exit status, output bytes."""

    def __init__(self, wall: float, cpu: float, rss: float, status: int, out_bytes: int):
        self.wall, self.cpu, self.rss, self.status, self.out_bytes = wall, cpu, rss, status, out_bytes


def run_once(argv: Sequence[str], env: Dict[str, str], stdout_path: Optional[Path] = None) -> Sample:
    """Run in a directory of no checkout (`python -m` looks in the current directory before PYTHONPATH)."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir())
    read = 0
    if out is subprocess.PIPE:
        while True:                          # a pipe, read as it comes (grep quits early on /dev/null)
            chunk = proc.stdout.read(1 << 16)
            if not chunk:
                break
            read += len(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if stdout_path:
        out.close()
        read = stdout_path.stat().st_size
    else:
        proc.stdout.close()
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
                  read)


def fmt(values: Sequence[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


class Tree:
    """A checkout of rdmadoctor to run, with a cache directory of its own (two checkouts may key a cached
    pattern database alike and differ in how they use it)."""

    def __init__(self, label: str, path: Path, tmp: Path):
        self.label = label
        self.path = path.resolve()
        self.env = {k: v for k, v in dict(os.environ, PYTHONPATH=str(self.path),
                                          XDG_CACHE_HOME=str(tmp / f"cache-{label}")).items()
                    if k != "PYTHONDONTWRITEBYTECODE"}
        self.cmd = [sys.executable, "-m", "rdmadoctor"]

    def prepare(self, tmp: Path) -> None:
        """Byte code, the cached catalogues and rule table, and the compiled pattern database, made once."""
        small = tmp / f"prepare-{self.label}.log"
        small.write_bytes(SMALL_LOG)
        run_once([*self.cmd, "explain", str(small)], self.env)
        warm = "from rdmadoctor.logparse import prefilter\nif hasattr(prefilter, 'warm'): prefilter.warm()"
        subprocess.run([sys.executable, "-c", warm], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600, cwd=tempfile.gettempdir())


def grep_argv(paths: Sequence[str]) -> List[str]:
    return ["grep", "-a", "-c", "-E", GREP_PATTERN, *paths]


def measure(trees: Sequence[Tree], explain_args: Sequence[str], paths: Sequence[str], tmp: Path, repeat: int,
            with_grep: bool = True) -> Dict[str, List[Sample]]:
    """Each tree's `explain ARGS PATHS` and grep on PATHS, in turn, `repeat` times."""
    out: Dict[str, List[Sample]] = {t.label: [] for t in trees}
    out["grep"] = []
    for _ in range(repeat):
        for tree in trees:
            out[tree.label].append(run_once([*tree.cmd, "explain", *explain_args, *paths], tree.env,
                                            tmp / f"out-{tree.label}"))
        if with_grep:
            out["grep"].append(run_once(grep_argv(paths), trees[0].env))
    return out


PARSE_ONLY = """
import os, sys, time
from rdmadoctor.logparse import catalog, prefilter
try:
    from rdmadoctor.logparse.streams import parse_paths
except ImportError:             # a checkout from before the entry points moved to logparse/streams.py (--before)
    from rdmadoctor.logparse import parse_paths
catalog.load()
prefilter.load(sum(map(os.path.getsize, sys.argv[1:])))
start = time.process_time()
parse_paths(sys.argv[1:])
print(time.process_time() - start)
"""


def parse_cpu(tree: Tree, paths: Sequence[str]) -> float:
    """CPU seconds of logparse alone (in a process of its own, its catalogues and pattern database loaded first)."""
    proc = subprocess.run([sys.executable, "-c", PARSE_ONLY, *paths], env=tree.env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    try:
        return float(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return float("nan")


def shapes_table(trees: Sequence[Tree], tmp: Path, shapes: Sequence[str], size_mb: float, repeat: int) -> None:
    print(f"\n## Shapes at {size_mb:g} MB: explain (text) and grep on the same file in turn, {repeat} run(s) each")
    print("| shape | MB | tree | explain wall s | CPU s | MB/s (CPU) | parse alone CPU s (MB/s) | grep wall s | "
          "explain / grep (wall) | peak RSS text / --json MB | JSON KB | exit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape in shapes:
        log = tmp / f"{shape}.log"
        build(shape, log, size_mb)
        mb = log.stat().st_size / 1e6
        text = measure(trees, [], [str(log)], tmp, repeat)
        js = measure(trees, ["--json"], [str(log)], tmp, 1, with_grep=False)
        grep = statistics.median(s.wall for s in text["grep"])
        for tree in trees:
            runs, jruns = text[tree.label], js[tree.label]
            wall, cpu = [s.wall for s in runs], [s.cpu for s in runs]
            parse = parse_cpu(tree, [str(log)])
            print(f"| {shape} | {mb:.1f} | {tree.label} | {fmt(wall)} | {statistics.median(cpu):.2f} | "
                  f"{mb / statistics.median(cpu):.0f} | {parse:.2f} ({mb / parse:.0f}) | "
                  f"{fmt([s.wall for s in text['grep']], 3)} | "
                  f"{statistics.median(wall) / grep:.0f}x | {max(s.rss for s in runs):.0f} / "
                  f"{max(s.rss for s in jruns):.0f} | {jruns[-1].out_bytes / 1024:.0f} | {runs[-1].status} |")
            sys.stdout.flush()
        log.unlink()


def scaling_table(trees: Sequence[Tree], tmp: Path, sizes: Sequence[float], repeat: int) -> None:
    print("\n## Scaling with input size (dense shape, explain text output)")
    print("| MB | tree | explain wall s | CPU s | CPU s per 100 MB | MB/s (wall) | grep wall s | explain / grep | "
          "peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in sizes:
        log = tmp / f"scale-{size}.log"
        build("dense", log, size)
        mb = log.stat().st_size / 1e6
        r = measure(trees, [], [str(log)], tmp, repeat if size < 500 else 1)
        grep = statistics.median(s.wall for s in r["grep"])
        for tree in trees:
            wall, cpu = [s.wall for s in r[tree.label]], [s.cpu for s in r[tree.label]]
            print(f"| {mb:.0f} | {tree.label} | {fmt(wall)} | {statistics.median(cpu):.2f} | "
                  f"{statistics.median(cpu) / mb * 100:.2f} | {mb / statistics.median(wall):.0f} | "
                  f"{fmt([s.wall for s in r['grep']], 3)} | {statistics.median(wall) / grep:.0f}x | "
                  f"{max(s.rss for s in r[tree.label]):.0f} |")
            sys.stdout.flush()
        log.unlink()


_FILES_HEADER = ("| files | MB | tree | explain wall s | CPU s | CPU ms per file | grep wall s | peak RSS MB | "
                 "JSON KB | exit |\n|---|---|---|---|---|---|---|---|---|---|")


def _fixture_files(d: Path, count: int, seed: int) -> List[str]:
    """`count` fixture logs, one a file in `d`, their digits varied."""
    d.mkdir()
    logs, rng = _fixture_logs(), random.Random(seed)
    paths = []
    for i in range(count):
        p = d / f"{i:05d}.log"
        p.write_bytes(_vary(logs[i % len(logs)], rng))
        paths.append(str(p))
    return paths


def _files_rows(trees: Sequence[Tree], count: int, mb: float, samples: Dict[str, List[Sample]]) -> None:
    for tree in trees:
        runs = samples[tree.label]
        cpu = statistics.median(s.cpu for s in runs)
        print(f"| {count} | {mb:.1f} | {tree.label} | {fmt([s.wall for s in runs])} | {cpu:.2f} | "
              f"{cpu / count * 1000:.2f} | {fmt([s.wall for s in samples['grep']], 3)} | "
              f"{max(s.rss for s in runs):.0f} | {runs[-1].out_bytes / 1024:.0f} | {runs[-1].status} |")
        sys.stdout.flush()


def files_table(trees: Sequence[Tree], tmp: Path, counts: Sequence[int], repeat: int) -> None:
    print("\n## Scaling with the number of files (fixture logs, one per file, digits varied; explain --json)")
    print(_FILES_HEADER)
    for count in counts:
        d = tmp / f"files-{count}"
        paths = _fixture_files(d, count, count)
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        _files_rows(trees, count, mb, measure(trees, ["--json"], paths, tmp, repeat))
        shutil.rmtree(d)


def listed_files_table(trees: Sequence[Tree], tmp: Path, counts: Sequence[int], repeat: int) -> None:
    print("\n## Files named by --files-from (4,000 fixture logs, digits varied, named over and over in one list; "
          "explain --json; grep through xargs)")
    print(_FILES_HEADER)
    d = tmp / "listed"
    paths = _fixture_files(d, 4000, 7)
    for count in counts:
        named = [paths[i % len(paths)] for i in range(count)]
        listing = tmp / f"list-{count}.txt"
        listing.write_text("".join(f"{p}\n" for p in named))
        mb = sum(os.path.getsize(p) for p in named) / 1e6
        samples: Dict[str, List[Sample]] = {t.label: [] for t in trees}
        samples["grep"] = []
        for _ in range(repeat):
            for tree in trees:
                samples[tree.label].append(run_once([*tree.cmd, "explain", "--json", "--files-from", str(listing)],
                                                    tree.env, tmp / f"out-{tree.label}"))
            samples["grep"].append(run_once(["xargs", "-a", str(listing), *grep_argv([])], trees[0].env))
        _files_rows(trees, count, mb, samples)
    shutil.rmtree(d)


# A rank's log of a job run with NCCL_DEBUG=INFO, one file per rank: the INFO lines ncclIbInitDevices() and the
# channel setup print (src/transport/net_ib.cc, src/transport/net.cc), then the flush error every rank gets when a peer
# goes away (net_ib.cc: "Got completion from peer ... with error 5"). Written here in those lines' format.
RANK_INFO = ("node{n}:{pid}:{tid} [{dev}] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; "
             "OOB eth0:10.0.{a}.{n}<0>")
RANK_CHANNEL = "node{n}:{pid}:{tid} [{dev}] NCCL INFO Channel {c:02d}/0 : {r}[{dev}] -> {r2}[{dev}] [send] via NET/IB/0"
RANK_FLUSH = ("node{n}:{pid}:{tid} [{dev}] transport/net_ib.cc:1155 NCCL WARN NET/IB : Got completion from peer "
              "10.2.8.{peer}<25466> with error 5, opcode 0, len 0, vendor err 249 (Recv) localGid "
              "fe80::966d:aeff:fe5d:0950 remoteGid fe80::1e92:cfff:fe87:ca50")


def _rank_log(i: int) -> bytes:
    lines = [(RANK_INFO if j % 2 else RANK_CHANNEL).format(n=i % 250, pid=1000 + i, tid=2000 + j, dev=j % 8,
                                                           a=j % 200, c=j % 32, r=i, r2=i + 1)
             for j in range(450)]
    lines.append(RANK_FLUSH.format(n=i % 250, pid=1000 + i, tid=3000, dev=1, peer=i % 250))
    return ("\n".join(lines) + "\n").encode()


def rank_files_table(trees: Sequence[Tree], tmp: Path, counts: Sequence[int], repeat: int) -> None:
    print("\n## Scaling with the number of rank logs (NCCL_DEBUG=INFO, 451 lines a rank, one file each; explain "
          "--json)")
    print("| files | MB | tree | explain wall s | CPU s | peak RSS MB | JSON KB | exit |")
    print("|---|---|---|---|---|---|---|---|")
    for count in counts:
        d = tmp / f"ranks-{count}"
        d.mkdir()
        paths = []
        for i in range(count):
            p = d / f"rank{i:05d}.log"
            p.write_bytes(_rank_log(i))
            paths.append(str(p))
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        r = measure(trees, ["--json"], paths, tmp, repeat)
        for tree in trees:
            runs = r[tree.label]
            print(f"| {count} | {mb:.1f} | {tree.label} | {fmt([s.wall for s in runs])} | "
                  f"{statistics.median(s.cpu for s in runs):.2f} | {max(s.rss for s in runs):.0f} | "
                  f"{runs[-1].out_bytes / 1024:.0f} | {runs[-1].status} |")
            sys.stdout.flush()
        shutil.rmtree(d)


SMALL_LOG = b""


def startup_table(trees: Sequence[Tree], tmp: Path, repeat: int) -> None:
    n = max(10, repeat * 5)
    print(f"\n## Start-up (ms: median (min-max) of {n}, each command in turn)")
    print("| command | tree | wall ms | CPU ms | peak RSS MB |")
    print("|---|---|---|---|---|")
    small = tmp / "small.log"
    small.write_bytes(SMALL_LOG)
    rows = [("python -c pass", None, [sys.executable, "-c", "pass"]),
            ("rdmadoctor --help", "cmd", ["--help"]),
            ("explain, 5 KB log", "cmd", ["explain", str(small)]),
            ("explain --json, 5 KB log", "cmd", ["explain", "--json", str(small)])]
    for label, kind, args in rows:
        for tree in (trees if kind else trees[:1]):
            argv = [*tree.cmd, *args] if kind else args
            run_once(argv, tree.env)
            samples = [run_once(argv, tree.env) for _ in range(n)]
            print(f"| {label} | {tree.label if kind else '-'} | {fmt([s.wall * 1000 for s in samples], 0)} | "
                  f"{fmt([s.cpu * 1000 for s in samples], 0)} | {max(s.rss for s in samples):.0f} |")
            sys.stdout.flush()


def _small_log() -> bytes:
    """5 KB of a healthy two-sided paste."""
    case = ROOT / "fixtures" / "real" / "felixfu-cx3-write-bw-healthy"
    data = b"".join((case / name).read_bytes() for name in ("server.log", "client.log"))
    return (data * (5000 // len(data) + 1))[:5000]


def _numbers(text: str) -> List[float]:
    return [float(x) for x in text.split(",") if x]


def main() -> None:
    global SMALL_LOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10", help="shape sizes in MB, comma-separated (default 10)")
    ap.add_argument("--scaling", default="1,10,100", help="sizes of the scaling series in MB (1000 adds a GB)")
    ap.add_argument("--files", default="1000,4000", help="file counts")
    ap.add_argument("--rank-files", default="1000", help="counts of NCCL rank logs, one file each (table 'ranks')")
    ap.add_argument("--listed-files", default="16000", help="counts of files named by --files-from (table 'listed')")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 MB shapes, scaling to 10 MB, 1,000 files, 1 run each")
    ap.add_argument("--only", help="comma-separated: shapes and/or scaling,files,ranks,listed,startup")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the rdmadoctor checkout to measure (default: this one)")
    ap.add_argument("--before", type=Path, help="another checkout, measured in turn on the same files")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.scaling, args.files, args.rank_files, args.repeat = "1", "1,10", "1000", "200", 1
        args.listed_files = "4000"
    only = set(args.only.split(",")) if args.only else None
    grep_version = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    try:
        import hyperscan  # noqa: F401
        fast = "hyperscan present"
    except ImportError:
        fast = "hyperscan absent"
    SMALL_LOG = _small_log()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        trees = [Tree("after" if args.before else "this", args.tree, tmp)]
        if args.before:
            trees.append(Tree("before", args.before, tmp))
        print(f"{', '.join(f'{t.label}: {t.path}' for t in trees)}; python {sys.version.split()[0]}; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; {grep_version}; {fast}")
        for tree in trees:
            tree.prepare(tmp)
        shapes = [s for s in SHAPES if only is None or s in only]
        for size in _numbers(args.sizes) if shapes else []:
            shapes_table(trees, tmp, shapes, size, args.repeat if size < 500 else 1)
        if only is None or "scaling" in only:
            scaling_table(trees, tmp, _numbers(args.scaling), args.repeat)
        if only is None or "files" in only:
            files_table(trees, tmp, [int(n) for n in _numbers(args.files)], args.repeat)
        if only is None or "ranks" in only:
            rank_files_table(trees, tmp, [int(n) for n in _numbers(args.rank_files)], args.repeat)
        if only is None or "listed" in only:
            listed_files_table(trees, tmp, [int(n) for n in _numbers(args.listed_files)], args.repeat)
        if only is None or "startup" in only:
            startup_table(trees, tmp, args.repeat)


if __name__ == "__main__":
    main()
