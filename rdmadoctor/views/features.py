"""Observations about one run that rules ask for by name (`feature = "garbage_row"`).

They are what an engineer reads between the lines of a perftest log: a result row that is really a
key record, a run that stopped printing, the bandwidth as a fraction of the link's rate. Each is a
pure function of the run (and of the link rate the user gave); none knows about causes.
"""
from __future__ import annotations

import math
import string
from typing import Any, Callable, Dict, Optional, Tuple

from rdmadoctor.logparse import catalog
from rdmadoctor.model import Run
from rdmadoctor.knowledge.perftest import TOOLS as PERFTEST_TOOLS, UINT32, UNIT_TO_GBPS
from rdmadoctor.views.params import real_rows
from rdmadoctor.views import bysource, completions, prompt, sidechannel
from rdmadoctor.views.completions import completion

_PRINTABLE = set(string.hexdigits + ":")


def _decoded(value: int) -> Optional[str]:
    try:
        raw = value.to_bytes(8, "big")
    except OverflowError:
        return None
    text = raw.decode("ascii", "replace")
    return text if all(c in _PRINTABLE for c in text) else None


def garbage_row(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A result row whose #bytes is no size: 8 bytes of a QP key record (ASCII hex) read as a number.

    perftest's server reads the client's report as five 8-byte fields; when the two sides disagree on
    how many key records to exchange, those bytes are the text of a key record ("0000:0000:...").
    """
    for row in run.results:
        if row.size >= UINT32 or row.iterations >= UINT32:
            text = "".join(t for t in (_decoded(row.size), _decoded(row.iterations)) if t)
            return {"line": row.line, "size": row.size, "iterations": row.iterations,
                    "ascii": text or None}
    return None


def errors(run: Run, ctx) -> int:
    return sum(1 for m in run.messages if m.kind == "error")


def results(run: Run, ctx) -> int:
    """How many measurements the run printed: perftest's real result rows, and the lines another producer
    prints when it measured something (a catalogue entry with `result = true`)."""
    measured = catalog.load().result_ids
    rows = run.row_summary["real_rows"] if run.row_summary else len(real_rows(run))     # run.results keeps some
    return rows + sum(1 for m in run.messages if m.id in measured)


def prints_results(producer: Optional[str]) -> bool:
    """Whether a producer ever prints that it measured something: perftest's result rows, or a catalogue entry
    of its with `result = true`. The kernel's log, an agent's or a daemon's never do: a run of theirs without an
    error does not show that anything worked."""
    if producer in (None, "perftest"):
        return True
    known = catalog.load()
    return not known.result_ids.isdisjoint(known.ids_of(producer))


def benchmark_started(run: Run, ctx) -> bool:
    """The run's command line starts a test program that prints its measurements (perftest, nccl-tests,
    ucx_perftest, fabtests' pingpongs), itself or under a launcher (`mpirun ... all_reduce_perf`): such a run that
    printed none did not finish. A launcher of any other program (an MPI "hello"), a listing tool, or no command
    shows no such thing."""
    if run.command is None:
        return False
    from rdmadoctor.logparse.producers import TOOLS
    from rdmadoctor.knowledge.listings import LISTING_TOOLS
    for word in (run.command.tool, *run.command.argv[1:]):
        name = word.rsplit("/", 1)[-1]
        if name in PERFTEST_TOOLS:
            return True
        tool = TOOLS.get(name)
        if tool is not None and name not in LISTING_TOOLS and tool.producer != "ompi" and prints_results(tool.producer):
            return True
    return False


def completed(run: Run, ctx) -> bool:
    """Printed at least one real result row and no error."""
    return bool(real_rows(run)) and errors(run, ctx) == 0


# the tests whose server only answers the client's work requests and measures nothing (ib_read_lat, ib_atomic_lat)
_PASSIVE_SERVER_TESTS = frozenset({("RDMA_Read", "LATENCY"), ("Atomic", "LATENCY")})


def passive_server_closed(run: Run, ctx) -> bool:
    """An ib_read_lat or ib_atomic_lat server (it measures nothing) closed the side channel: it finished.

    It printed the dashes after the client's address and no table: perftest's read_lat.c and atomic_lat.c print
    RESULT_LINE after ctx_close_connection(), which the client does only after its last measurement. The results
    are in the client's output."""
    test = run.test or {}
    return (run.closed_line is not None and run.side == "server" and not errors(run, ctx)
            and (test.get("verb"), test.get("tst")) in _PASSIVE_SERVER_TESTS)


def stalled_at(run: Run, ctx) -> Optional[str]:
    """Where a run that printed no error and no result stopped: it hung, or was killed."""
    if errors(run, ctx) or real_rows(run) or garbage_row(run, ctx) or passive_server_closed(run, ctx):
        return None
    if run.result_header_line:
        return "traffic"              # results header printed, no row: the data transfer never finished
    if run.addresses:
        return "addresses"
    if run.test_name or run.header:
        return "header"
    if run.banner_line:
        if any(m.id == "R14" and m.line > run.banner_line for m in run.messages):
            return "gpu-setup"        # a server sets up its GPU buffer after a client connected
        return "waiting"              # the server's banner: nobody connected
    if run.command:
        return "command"
    return None


def interrupted(run: Run, ctx) -> bool:
    """The terminal shows ^C: the run was stopped by hand (or by a timeout's SIGINT)."""
    return any(m.id == "U01" for m in run.messages)


def exchanged(run: Run, ctx) -> bool:
    """Both QPs' addresses were exchanged (the side channel worked up to the traffic)."""
    return any(a.role == "remote" for a in run.addresses)


def bw_gbps(run: Run, ctx) -> Optional[float]:
    best = None
    for row in real_rows(run):
        if row.kind != "bw" or not row.unit:
            continue
        value = row.values.get("bw_avg")
        if value is None or math.isnan(value):
            continue
        gbps = value * UNIT_TO_GBPS.get(row.unit, 0)
        best = gbps if best is None or gbps > best else best
    return best


def bw_row(run: Run, ctx):
    best, best_gbps = None, -1.0
    for row in real_rows(run):
        if row.kind == "bw" and row.unit and not math.isnan(row.values.get("bw_avg", float("nan"))):
            g = row.values["bw_avg"] * UNIT_TO_GBPS.get(row.unit, 0)
            if g > best_gbps:
                best, best_gbps = row, g
    return best


def bw_fraction(run: Run, ctx) -> Optional[float]:
    rate = ctx.get("link_rate_gbps")
    bw = bw_gbps(run, ctx)
    if not rate or bw is None:
        return None
    return bw / rate


def local_gid_family(run: Run, ctx) -> Optional[str]:
    for a in run.addresses:
        if a.role == "local" and a.gid:
            if a.gid.startswith("::ffff:"):
                return "ipv4"
            return "link-local" if a.gid.startswith("fe80") else ("empty" if a.gid == "::" else "ipv6")
    return None


def sizes_before_error(run: Run, ctx) -> Optional[int]:
    """With -a: the largest size that completed before a completion error (a path-MTU black hole)."""
    rows = real_rows(run)
    if not rows or not completion(run, ctx):
        return None
    return max(r.size for r in rows)


def named_device_listed(run: Run, ctx) -> bool:
    """The device that perftest "could not find" appears in device listings pasted with it."""
    named = {m.fields.get("device") for m in run.messages if m.id == "D02"}
    if not named:
        return False

    def listed_in(runs) -> set:
        return {m.fields.get("device") for r in runs for m in r.messages if m.id == "V10"}
    listed = bysource.once_per_input(ctx, "named_device_listed", lambda: listed_in(ctx["runs"])) \
        if "runs" in ctx else listed_in([run])
    return bool(named & listed)


def perftest_shown(run: Run, ctx) -> bool:
    """The run shows perftest itself: its command line, its header, a result row, or an error or warning of perftest's
    catalogue. A run opened by glibc's or the shell's words (a crash of whatever program was pasted) shows none, and
    a notice is no proof ("Version: 0.0" is also another program's properties)."""
    if run.command or run.test or run.results or run.row_summary:
        return True
    own = catalog.load().ids_of("perftest")
    return any(m.id in own and m.kind != "notice" for m in run.messages)


def soft_roce_device(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The run's device when its name is a Soft-RoCE device's (rxe0, rxe_eth0), else None.

    `rdma link add rxe0 type rxe netdev eth0` names them so. rdma_rxe fails a work request where a NIC would retry
    (drivers/infiniband/sw/rxe/rxe_req.c: a packet it cannot build or send completes with IB_WC_LOC_QP_OP_ERR).
    Read from perftest's device (its header or -d), an rdma-core example's -d / --ib-dev, or UCX_NET_DEVICES."""
    from rdmadoctor.views import params
    found = params.read(run, "device")
    option = run.command.options.get("-d") or run.command.options.get("--ib-dev") if run.command is not None else None
    if found is not None:
        names, line, quote = [str(found.value)], found.line, found.text
    elif option and run.command is not None:
        names, line, quote = [str(option)], run.command.line, run.command.text
    elif "UCX_NET_DEVICES" in run.settings:
        setting = run.settings["UCX_NET_DEVICES"]
        # every device UCX may use must be one (eth0 or a NIC beside it could be the one that failed)
        names = [d.split(":")[0] for d in str(setting.value).split(",")]
        line, quote = setting.line, f"UCX_NET_DEVICES={setting.value}"
    else:
        return None
    if not all(n.lower().startswith("rxe") for n in names):
        return None
    return {"value": names[0], "line": line, "quote": quote}


def generation(run: Run, ctx):
    from rdmadoctor.views.generation import infer
    return infer(run)


FEATURES: Dict[str, Callable[[Run, Dict[str, Any]], Any]] = {
    f.__name__: f for f in (garbage_row, errors, results, completed, stalled_at, passive_server_closed,
                            interrupted, exchanged, bw_gbps,
                            bw_row, bw_fraction, completion, local_gid_family, sizes_before_error,
                            named_device_listed, perftest_shown, generation, benchmark_started, soft_roce_device)
}
FEATURES.update(completions.FEATURES)
FEATURES.update(prompt.FEATURES)
FEATURES.update(sidechannel.FEATURES)


# The names inside a feature that is a record, for templates ({run.garbage_row.ascii}).
FIELDS_OF: Dict[str, Tuple[str, ...]] = {
    "garbage_row": ("line", "size", "iterations", "ascii"),
    "completion": completions.COMPLETION_FIELDS,
    "bw_row": ("line", "kind", "size", "iterations", "values", "unit"),
    "generation": ("low", "high", "clues", "known", "consistent"),
    "soft_roce_device": ("value", "line", "quote"),
    **sidechannel.FIELDS_OF,
}

from rdmadoctor.views import nccl as _nccl; FEATURES.update(_nccl.FEATURES); FIELDS_OF.update(_nccl.FIELDS_OF)  # noqa: E402,E702
from rdmadoctor.views import ucxompi as _uo; FEATURES.update(_uo.FEATURES); FIELDS_OF.update(_uo.FIELDS_OF)  # noqa: E402,E702


def feature(run: Run, name: str, ctx: Dict[str, Any]) -> Any:
    cache = ctx.setdefault("_feature_cache", {})
    key = (id(run), name)
    if key not in cache:
        cache[key] = FEATURES[name](run, ctx)
    return cache[key]
from rdmadoctor.views import stackfeatures  # noqa: E402,F401  (rdma-core tools and GPU memory: registers its features)
from rdmadoctor.views import fabtests  # noqa: E402,F401  (libfabric's test programs: registers its features)
from rdmadoctor.views import mpibench  # noqa: E402,F401  (MPI benchmarks' tables and launches: registers its features)
