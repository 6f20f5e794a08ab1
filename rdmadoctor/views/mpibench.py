"""Observations about MPI benchmarks' result tables (OSU micro-benchmarks under mpirun or srun) and where their
processes ran, for rules/mpibench.toml. Registered into views/features.py (FEATURES) on import.

  osu_latency_small_us  the median latency, in us, of the 0-64 byte rows of osu_latency's table (host buffers),
                        remembering the banner's line; None without that table or with fewer than 3 such rows
  single_node_launch    the launch line that puts the run's processes on one node (srun/salloc/sbatch -N 1, an
                        #SBATCH directive, mpirun --host naming one host); None without one, or when another launch
                        line of the paste names more nodes
  ompi_btl_shm_listed   the run's Open MPI BTL list (--mca btl, OMPI_MCA_btl) names a shared-memory BTL (vader, sm)
  osu_table_unfinished  the run's last OSU point-to-point or one-sided table stops before its largest message size
                        (4 MiB, or the -m the command line gives): the size of its last row, the largest, the row's line
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rdmadoctor.model import Run
from rdmadoctor.views import bysource, features
from rdmadoctor.views.completions import OnLine

# osu_latency's own banner: "OSU MPI%s Latency Test" with no accelerator ("-CUDA", "-ROCM" ... move the buffers
# through a GPU, which costs microseconds on one node too)
_OSU_LATENCY = "MPI Latency Test"
# OSU's message sizes are powers of two from 0 (1 in older releases): 0-64 bytes go eagerly in one fragment of any
# shared-memory transport, so their latency is the transport's own
SMALL_BYTES = 64
# one or two rows do not make a table: a cut paste or a stray line of two numbers
MIN_SMALL_ROWS = 3


class LatencyAtLine(OnLine, float):
    """A latency in microseconds read from a line."""

    def __str__(self) -> str:
        return f"{float(self):.2f}"


def _latency_rows(run: Run) -> Tuple[Optional[int], List[Tuple[int, float]]]:
    """The banner's line of the run's osu_latency table and its rows (size, us): the rows after its "# Size  Latency
    (us)" header, up to the next OSU banner or header."""
    banner: Optional[int] = None
    rows: List[Tuple[int, float]] = []
    inside = False
    for m in run.messages:
        if m.id == "OMPI.OSU_BANNER":
            if inside and rows:
                break                     # another benchmark follows the latency table
            inside = False
            banner = m.line if m.fields.get("benchmark") == _OSU_LATENCY and not m.fields.get("accel") else None
        elif m.id == "OMPI.OSU_TABLE_HEADER":
            if inside and rows:
                break
            inside = banner is not None and (m.fields.get("column") or "").lower().startswith("latency")
        elif m.id == "OMPI.BENCH_ROW" and inside:
            try:
                rows.append((int(m.fields["bytes"]), float(m.fields["value"])))
            except (KeyError, ValueError):
                continue
    return (banner, rows) if inside or rows else (None, [])


def osu_latency_small_us(run: Run, ctx: Dict[str, Any]) -> Optional[LatencyAtLine]:
    """The median latency (us) of the 0-64 byte rows of osu_latency's table; None without 3 such rows.

    OSU micro-benchmarks c/mpi/pt2pt/osu_latency.c: rank 0 prints the banner ("# OSU MPI Latency Test v5.6.1"), the
    header ("# Size          Latency (us)") and, per size, half the round trip of a blocking ping-pong between two
    ranks (c/util/osu_util_mpi.c print_header())."""
    banner, rows = _latency_rows(run)
    small = [us for size, us in rows if size <= SMALL_BYTES]
    if banner is None or len(small) < MIN_SMALL_ROWS:
        return None
    import statistics       # (here: its import, with fractions and decimal, is 3 ms of every explain's start)
    return LatencyAtLine(round(statistics.median(small), 2), banner)


# -- a table that stops before its largest size ---------------------------------------------------------------------

# The largest message size of an OSU point-to-point or one-sided test when -m does not set it: MAX_MESSAGE_SIZE
# (1 << 22) in c/util/osu_util.h (osu_pt2pt.h MAX_MSG_SIZE and each one-sided test's MAX_SIZE in older releases).
# Collectives stop at 1 MiB, or lower when the processes times the size exceeds the memory limit (-M), so their last
# size depends on the job; the atomics (Fetch_and_op, Compare_and_swap) measure one size. Neither is read here.
OSU_LARGEST = 1 << 22
_OSU_NOT_SWEPT = re.compile(r"allreduce|allgather|alltoall|bcast|barrier|gather|scatter|reduce|scan|neighbo|"
                            r"fetch_and_op|compare_and_swap", re.IGNORECASE)
# OSU's message-size option: -m [MIN:]MAX, --message-size=[MIN:]MAX (c/util/osu_util_mpi.c process_options())
_OSU_SIZE_OPTION = re.compile(r"^(?:-m|--message-size)(?:=?(?P<value>.+))?$")


def _osu_largest(argv: Optional[Sequence[str]]) -> Optional[int]:
    """The largest size the OSU test was asked for: -m's MAX after the benchmark's name on the command line, else the
    default; None when -m's value cannot be read."""
    words = list(argv or [])
    program = next((i for i, w in enumerate(words) if "osu_" in w and not w.startswith("-")), None)
    if program is None:
        return OSU_LARGEST
    for i, word in enumerate(words[program + 1:], program + 1):
        found = _OSU_SIZE_OPTION.match(word)
        if found is None:
            continue
        value = found.group("value") or (words[i + 1] if i + 1 < len(words) else "")
        largest = value.rsplit(":", 1)[-1]
        return int(largest) if largest.isdigit() else None
    return OSU_LARGEST


def osu_table_unfinished(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The run's last OSU table of a point-to-point or one-sided test ends with a row below its largest size.

    Rank 0 prints one row per size, doubling from 0 or 1 up to the largest (4 MiB unless -m sets it), then the test
    ends (OSU micro-benchmarks c/mpi/pt2pt/osu_latency.c, c/mpi/one-sided/osu_acc_latency.c): a last row below it
    means the test stopped there (hung, or a rank died) or the paste ends there. A table after which the paste
    goes on with another message (another banner, a library's report) had its rows left out of the paste."""
    banner = header = None
    rows: List[Any] = []
    for m in run.messages:
        if m.id == "OMPI.OSU_BANNER":
            banner, header, rows = m, None, []
        elif m.id == "OMPI.OSU_TABLE_HEADER":
            header, rows = m, []
        elif m.id == "OMPI.BENCH_ROW" and header is not None:
            rows.append(m)
    if banner is None or header is None or not rows or _OSU_NOT_SWEPT.search(banner.fields.get("benchmark") or ""):
        return None
    last = rows[-1]
    if bysource.last_message_line(run, ctx, last.source) > last.line:
        return None           # the paste goes on after the table: rows were left out of it, not the test's end
    largest = _osu_largest(run.command.argv if run.command is not None else None)
    size = last.fields.get("bytes")
    if largest is None or size is None or not str(size).isdigit() or int(size) >= largest:
        return None
    return {"line": last.line, "source": last.source, "quote": last.text, "size": int(size), "largest": largest,
            "benchmark": banner.fields.get("benchmark")}


# -- how many nodes ----------------------------------------------------------------------------------------------

# salloc and sbatch are not catalogued (their lines open no run): their command lines and a job script's #SBATCH
# directives are read from the pasted lines, written as Slurm's own srun entry is (a prompt, `set -x`'s "+ ", a
# command after && or ;)
_SLURM_LINE = re.compile(r"(?:^|[$#>]\s|^\+\s|&&\s|;\s)\s*(?:\S*/)?(?:salloc|sbatch)(?P<args>\s+\S.*)$"
                         r"|^\s*#SBATCH(?P<directive>\s+\S.*)$")
_NODES = re.compile(r"^(?:-N|--nodes)(?:=|$)|^-N\d")
_HOST_OPTIONS = frozenset({"--host", "-host", "-H", "--hosts", "-hosts"})
_HOSTFILE_OPTIONS = frozenset({"--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f", "--default-hostfile"})
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _words(text: str) -> List[str]:
    try:
        return shlex.split(text)
    except ValueError:                    # an unbalanced quote in a pasted line
        return text.split()


def slurm_nodes(args: str) -> Optional[str]:
    """The node count a Slurm command line asks for (-N 1, -N1, --nodes=1, --nodes 1, a min-max range), read up to
    the program it starts (the first word with a "/"); None without one."""
    words = _words(args)
    for i, word in enumerate(words):
        if "/" in word and not word.startswith("-"):
            return None
        if _NODES.match(word):
            if word in ("-N", "--nodes"):
                return words[i + 1] if i + 1 < len(words) else None
            return word.split("=", 1)[1] if "=" in word else word[2:]
    return None


def _one_node(count: str) -> bool:
    """A node count that means exactly one node: "1" or the range "1-1"."""
    return count.strip() in ("1", "1-1")


def _slurm_counts(run: Run, ctx: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """Every node count of a Slurm launch the run's paste shows, with the record that quotes its line: read once for
    the paste (its lines are many, its osu_latency runs may be too)."""
    return bysource.once_per_source(ctx, "slurm_counts", run.source, lambda: list(_slurm_counts_of(run, ctx)))


def _slurm_counts_of(run: Run, ctx: Dict[str, Any]) -> Iterable[Tuple[str, Dict[str, Any]]]:
    runs = (bysource.runs_of_source(ctx, run.source) if "runs" in ctx else []) or [run]
    for r in runs:
        for m in r.messages:
            if m.id == "SLURM.SRUN_LAUNCH":
                count = slurm_nodes(m.fields.get("args", ""))
                if count is not None:
                    yield count, {"line": m.line, "quote": m.text, "source": m.source, "how": "srun"}
    for number, text in enumerate(bysource.source_lines(run, ctx), 1):
        if "salloc" not in text and "sbatch" not in text and "SBATCH" not in text:
            continue
        found = _SLURM_LINE.search(text.rstrip())
        if found is None:
            continue
        count = slurm_nodes(found.group("args") or found.group("directive") or "")
        if count is not None:
            how = "#SBATCH" if found.group("directive") else "salloc/sbatch"
            yield count, {"line": number, "quote": text.strip(), "source": run.source, "how": how}


def mpirun_hosts(argv: Sequence[str]) -> Optional[List[str]]:
    """The hosts an mpirun/mpiexec command line names with --host/-H/-hosts (slot counts ":2" taken off, the local
    host's names as one); [] when it reads a hostfile instead (its nodes are not in the paste); None without either."""
    hosts: Optional[List[str]] = None
    for i, word in enumerate(argv):
        name, _, value = word.partition("=")
        if name in _HOSTFILE_OPTIONS:
            return []
        if name in _HOST_OPTIONS:
            value = value or (argv[i + 1] if i + 1 < len(argv) else "")
            for host in value.split(","):
                host = host.split(":", 1)[0].strip().lower()
                if host:
                    hosts = (hosts or []) + ["localhost" if host in _LOCAL_NAMES else host]
    return hosts


def single_node_launch(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The launch line that puts the run's processes on one node; None without one or against another launch line.

    The run's own mpirun --host list decides when it has one (mpirun starts processes only on the hosts it names:
    Open MPI's --host, MPICH's and Intel MPI's -hosts); a hostfile hides the nodes. Otherwise every Slurm launch of
    the paste must ask for one node (man srun, salloc, sbatch: -N, --nodes=<minnodes>[-maxnodes]); one asking for
    more, or a range, leaves the count unknown."""
    if run.command is not None:
        hosts = mpirun_hosts(run.command.argv)
        if hosts is not None:
            if len(set(hosts)) != 1:
                return None
            return {"line": run.command.line, "quote": run.command.text, "source": run.source,
                    "how": "mpirun --host", "hosts": sorted(set(hosts))}
    found = None
    for count, record in _slurm_counts(run, ctx):
        if not _one_node(count):
            return None
        found = found or record
    return found


# -- Open MPI's BTL list ------------------------------------------------------------------------------------------

_SHM_BTLS = frozenset({"vader", "sm"})


def ompi_btl_shm_listed(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The run's BTL list (--mca btl, OMPI_MCA_btl) includes vader or sm: the user asked for shared memory on a node.

    Open MPI's MCA component lists (opal/mca/base/mca_base_components_select.c): a list names the components to use;
    one that starts with "^" names those to exclude, and says nothing of which are used."""
    shown = run.settings.get("OMPI_MCA_btl")
    if shown is None:
        return None
    value = str(shown.value).strip().strip("'\"")
    if value.startswith("^"):
        return None
    named = {b.strip() for b in value.split(",")}
    if named.isdisjoint(_SHM_BTLS):
        return None
    return {"line": shown.line, "btl": value}


FEATURES = {f.__name__: f for f in (osu_latency_small_us, single_node_launch, ompi_btl_shm_listed,
                                    osu_table_unfinished)}
FIELDS_OF = {"single_node_launch": ("line", "quote", "how", "hosts"), "ompi_btl_shm_listed": ("line", "btl"),
             "osu_table_unfinished": ("line", "quote", "size", "largest", "benchmark")}

features.FEATURES.update(FEATURES)
features.FIELDS_OF.update(FIELDS_OF)
