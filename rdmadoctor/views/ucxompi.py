"""Observations about the runs of UCX and Open MPI (and what a paste shows around them) that rules ask for
by name. Each is a pure function of the run, the other runs of its input and the pasted lines; each
returns None or a record whose "line" is the line it rests on (the rule's evidence), never a cause.

  ucx_memlock_hint_expected  the UCX that printed the run would have appended "Please set max locked memory"
                             to an ENOMEM failure if RLIMIT_MEMLOCK were finite (a 1.13+ message shape, in a
                             whole UCX log line, or a shown version >= 1.13): the limit was not what failed
  ucx_startup                the failure happened while connecting (ucp_ep_create, MPI_Init, perftest setup)
  ucx_timeout_both_hosts     UCX endpoints on two hosts of the input timed out (each waited for the other)
  ucx_gid_index_set          a run of the input shows a UCX GID index setting (UCX_IB_GID_INDEX and the like)
  ucx_perftest_test_differs  the ucx_perftest server prints another test than the client's -t asked for
  ucx_shown                  the run shows UCX itself (a UCX tool's command line, a UCX line of its own), not only
                             words countless servers print ("Waiting for connection...")
  ucx_env_typos              names in "unused environment variable" warnings that UCX never reads (misspelt)
  ucx_selection_typo         such a name whose closest real name chooses devices, transports, GIDs, timeouts
  ucx_tls_without_network    UCX_TLS as shown lists no transport that reaches another host
  ucx_tls_rc_without_ud      UCX_TLS as shown names rc_verbs, rc_mlx5 or dc_mlx5 and nothing that brings UD, the
                             auxiliary transport their endpoints are connected over
  ucx_devices_without_tls    UCX_NET_DEVICES as shown names only network interfaces (TCP's devices) and UCX_TLS
                             allows no TCP
  ucx_rdma_devices_without_tls  UCX_NET_DEVICES as shown names only RDMA devices (mlx5_0:1) and UCX_TLS allows no
                             RDMA transport
  ucx_selection_without_rdma UCX_NET_DEVICES names no RDMA device, or UCX_TLS allows no RDMA transport: UCX is left
                             with TCP, shared memory and self
  ucx_tls_without_gpu        UCX_TLS as shown lists no GPU transport (cuda_*, rocm_*, ze_*): UCX then opens no GPU
                             memory domain and takes GPU memory for host memory
  ompi_btl_without_network   OMPI_MCA_btl as shown lists no BTL that reaches another host
  ompi_btl_without_rdma      OMPI_MCA_btl as shown lists no BTL that drives an RDMA device (sm,self,tcp)
  container_without_ipc_lock a docker/podman/nerdctl run line in the paste grants neither IPC_LOCK, nor
                             --privileged, nor an unlimited memlock ulimit
  pasted_memlock_limit       `ulimit -l` / `ulimit -a` output in the paste with a finite locked-memory limit
  verbs_provider_missing      libibverbs in the same paste found a device without its userspace driver
  ompi_help_hosts            the local and peer host (and device) of the Open MPI help text in the run
  ompi_openib_port_not_ib    the port openib found no connection scheme for is a device whose driver never runs
                             InfiniBand (iWARP or RoCE only): udcm, which takes InfiniBand ports only, did not apply
"""
from __future__ import annotations

import difflib
import functools
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rdmadoctor.knowledge import devices
from rdmadoctor.model import HeaderField, Message, Run
from rdmadoctor.views import bysource

_SETTINGS_FILE = Path(__file__).resolve().parent.parent / "knowledge" / "ucx_settings.toml"

# UCX transports (UCX_TLS names and aliases) that reach another host; the others are intra-node
# (sm, posix, sysv, cma, knem, xpmem, self, cuda_copy, cuda_ipc, rocm_*, gdr_copy, ze_*).
UCX_NETWORK_TLS = frozenset("""all ib rc rc_v rc_x rc_verbs rc_mlx5 dc dc_x dc_mlx5 ud ud_v ud_x ud_verbs ud_mlx5 tcp
    srd rc_gda gga gga_mlx5 ugni ugni_rdma ugni_smsg ugni_udt mm_ib""".split())
# UCX_TLS names that select a GPU memory domain's transports (and "all"): without one, UCX closes the GPU memory
# domains and reports GPU memory as host memory (ucp_mem_query(): UCS_MEMORY_TYPE_HOST)
_UCX_GPU_TLS = re.compile(r"^(?:all|cuda|rocm|ze|gdr_copy|(?:cuda|rocm|ze)_\w+)$")
# Open MPI BTLs that reach another host (the others: self, vader, sm, smcuda)
OMPI_NETWORK_BTLS = frozenset("tcp openib uct usnic ofi ugni portals4 sctp mx".split())
OMPI_RDMA_BTLS = OMPI_NETWORK_BTLS - {"tcp", "sctp"}


def _same_source_runs(run: Run, ctx: Dict[str, Any]) -> List[Run]:
    return (bysource.runs_of_source(ctx, run.source) if "runs" in ctx else []) or [run]


def _messages(run: Run, ctx: Dict[str, Any], *ids: str):
    for r in _same_source_runs(run, ctx):
        for m in r.messages:
            if m.id in ids:
                yield m


def _of_source(compute: Callable[[Run, Dict[str, Any]], Optional[Dict[str, Any]]]):
    """A feature that reads only the runs of the run's source (`_messages`): computed once per source, each run
    getting its own copy of the record. A run whose source has no runs in ctx["runs"] reads itself alone."""
    @functools.wraps(compute)
    def feature(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if "runs" not in ctx or not bysource.runs_of_source(ctx, run.source):
            return compute(run, ctx)
        found = bysource.once_per_source(ctx, compute.__name__, run.source, lambda: compute(run, ctx))
        return dict(found) if found is not None else None
    return feature


def _of_lines(compute: Callable[[Sequence[str]], Optional[Dict[str, Any]]]):
    """A feature that reads only the pasted lines of the run's source: scanned once per source."""
    @functools.wraps(compute)
    def feature(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        found = bysource.once_per_source(ctx, compute.__name__, run.source,
                                         lambda: compute(bysource.source_lines(run, ctx)))
        return dict(found) if found is not None else None
    return feature


# -- UCX ----------------------------------------------------------------------------------------------------

def _version_code(text: str) -> Optional[int]:
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return int(m.group(1)) * 100 + int(m.group(2)) if m else None


@_of_source
def ucx_memlock_hint_expected(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """This UCX would have printed the memlock hint with an ENOMEM failure if the limit were finite.

    From UCX 1.13 a failed CQ/SRQ/QP creation and from 1.10 a failed registration with ENOMEM append
    "Please set max locked memory ..." whenever RLIMIT_MEMLOCK is finite (from 1.14: and the process lacks
    CAP_IPC_LOCK) (src/uct/ib/base/ib_log.c uct_ib_mem_lock_limit_msg(), uct_ib_memlock_limit_msg()). A queue
    creation failure names its device ("<device>: ") only from 1.13 (the memory domain's own queues; from 1.17
    every one: ib_log.h uct_ib_check_memlock_limit_msg()). So such a failure without the hint, from a UCX known
    to print it, means the locked-memory limit was not the problem. Known by its shape only when the line is
    UCX's own and whole: a quote cut after "Cannot allocate memory." (1.13-1.16 write ". Please set ..." right
    there) or a line without UCX's log prefix shows nothing of what followed."""
    for m in _messages(run, ctx, "UCX.VERSION"):
        code = _version_code(m.fields.get("version", ""))
        if code is not None and code >= 113:
            return {"line": m.line, "version": m.fields.get("version"), "why": "version"}
    for m in _messages(run, ctx, "UCX.IB_QUEUE_CREATE_FAILED", "UCX.IB_CREATE_QP_FAILED"):
        if m.fields.get("device") and m.fields.get("error") == "Cannot allocate memory" and _whole_ucx_line(m, ctx):
            return {"line": m.line, "version": "1.13 or newer", "why": "shape"}
    return None


_UCX_LOG_PREFIX = re.compile(r"\bUCX\s+(?:ERROR|WARN|DIAG|INFO|DEBUG)\b")


def _whole_ucx_line(message: Message, ctx: Dict[str, Any]) -> bool:
    """The message's line is UCX's log line (its "UCX  ERROR" prefix before the message) and ends with the message."""
    line = bysource.line_text(ctx, message.source, message.line) if message.line else None
    at = line.find(message.text) if line is not None else -1
    if line is None or at < 0:
        return False
    return bool(_UCX_LOG_PREFIX.search(line, 0, at)) and not line[at + len(message.text):].strip()


_STARTUP_CALLS = ("ucp_ep_create", "ucp_perf_test_setup_endpoints", "ucp_worker_create", "ucp_init")


def ucx_startup(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The paste shows the failure while endpoints were being created (before any traffic)."""
    if run.command is not None and run.command.tool == "ucx_perftest" and \
            not any(m.id == "UCX.PERFTEST_RESULT" for m in run.messages):
        # ucx_perftest connects its endpoints before the first measurement: no result line, no traffic yet
        return {"line": run.command.line, "text": "ucx_perftest printed no measurement"}
    return _startup_failure(run, ctx)


@_of_source
def _startup_failure(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The first message of the run's source that shows a failure while connecting."""
    for m in _messages(run, ctx, "UCX.API_CALL_FAILED", "UCX.NO_TRANSPORT_TO_PEER", "UCX.PERFTEST_RUN_FAILED",
                       "OMPI.PML_UCX_EP_CREATE_FAILED", "OMPI.PML_ADD_PROCS_FAILED", "OMPI.MPI_INIT_FAILED",
                       "UCX.IB_CREATE_AH_FAILED", "UCX.IB_MODIFY_QP_FAILED"):
        if m.id == "UCX.API_CALL_FAILED" and m.fields.get("function") not in _STARTUP_CALLS:
            continue
        if m.id == "UCX.PERFTEST_RUN_FAILED" and "setup" not in m.text.lower():
            continue
        return {"line": m.line, "text": m.text}
    return None


# "[1700000000.100000] [node1:1234:0]" (ucs_log) or "[node1:1234:0:1234]" (ucs_fatal_error): the host of the line
# UCX's "[host:pid:thread]" prefix, wherever the line begins: mpirun --timestamp-output / --tag-output put
# "Tue Apr 10 02:29:25 2018[1,383]<stderr>:" before it (the rank's "[1,383]" has a comma, so it is not a host)
_UCX_PREFIX = re.compile(r"\[(?P<host>[^\s:\[\],]+):\s*\d+")
_TIMEOUT_IDS = ("UCX.UD_EP_TIMEOUT", "UCX.EP_ERROR_UNHANDLED", "UCX.API_CALL_FAILED", "UCX.PERFTEST_RUN_FAILED")


def _timeout_hosts(ctx: Dict[str, Any]) -> Dict[str, Tuple[str, int]]:
    """Each host (or, without a UCX line prefix, each file) of the input whose UCX endpoint timed out -> its
    first such line (source, line number)."""
    found: Dict[str, Tuple[str, int]] = {}
    for r in ctx.get("runs") or []:
        for m in r.messages:
            if m.id not in _TIMEOUT_IDS or (m.id != "UCX.UD_EP_TIMEOUT"
                                             and m.fields.get("ucs_status") != "Endpoint timeout"):
                continue
            prefix = _UCX_PREFIX.search(bysource.line_text(ctx, r.source, m.line) or "")
            found.setdefault(prefix.group("host") if prefix else "file " + r.source, (r.source, m.line))
    return found


def ucx_timeout_both_hosts(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX endpoints on two hosts (or in two files) of the input timed out: each end waited for the other.

    UCX's UD transport aborts with "unhandled timeout error" when its peer stops acknowledging
    (src/uct/ib/ud/base/ud_ep.c uct_ud_ep_deferred_timeout_handler()); when both ends print it, both were
    alive and sending, and neither heard the other."""
    hosts = bysource.once_per_input(ctx, "_timeout_hosts", lambda: _timeout_hosts(ctx))
    mine = [line for source, line in hosts.values() if source == run.source]
    if len(hosts) < 2 or not mine:
        return None
    return {"line": min(mine), "hosts": ", ".join(sorted(h for h in hosts))}


_GID_INDEX_SETTING = re.compile(r"^UCX_(?:\w+_)?GID_INDEX$")


def ucx_gid_index_set(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """A run of the input shows a GID index for UCX (UCX_IB_GID_INDEX, UCX_RC_VERBS_GID_INDEX ...): UCX did not
    choose the GID itself (its default, "auto", picks a RoCE v2 IPv4 GID first: src/uct/ib/base/ib_device.c
    uct_ib_device_select_gid())."""
    if not ctx.get("runs"):
        return _gid_index_setting([run])
    return bysource.once_per_input(ctx, "_gid_index_setting", lambda: _gid_index_setting(ctx["runs"]))


def _gid_index_setting(runs: List[Run]) -> Optional[Dict[str, Any]]:
    for r in runs:
        for name, shown in r.settings.items():
            if _GID_INDEX_SETTING.match(name):
                return {"line": shown.line, "source": r.source, "quote": f"{name}={shown.value}",
                        "name": name, "value": shown.value}
    return None


# ucx_perftest's -t names and the description its server prints as "Test:" (src/tools/perf/perftest.c, later
# perftest_params.c, tests[]; older releases end the atomics' descriptions in "message rate")
_PERFTEST_TESTS = {
    "am_lat": ("active message latency",), "put_lat": ("put latency",), "add_lat": ("atomic add latency",),
    "get": ("get latency / bandwidth / message rate",),
    "fadd": ("atomic fetch-and-add latency / rate", "atomic fetch-and-add latency / message rate"),
    "swap": ("atomic swap latency / rate", "atomic swap latency / message rate"),
    "cswap": ("atomic compare-and-swap latency / rate", "atomic compare-and-swap latency / message rate"),
    "am_bw": ("active message bandwidth / message rate",), "put_bw": ("put bandwidth / message rate",),
    "add_mr": ("atomic add message rate",), "tag_lat": ("tag match latency",), "tag_bw": ("tag match bandwidth",),
    "tag_sync_lat": ("tag sync match latency",), "tag_sync_bw": ("tag sync match bandwidth",),
    "ucp_put_lat": ("put latency",), "ucp_put_bw": ("put bandwidth",),
    "ucp_get": ("get latency / bandwidth / message rate",), "ucp_add": ("atomic add bandwidth / message rate",),
    "ucp_fadd": ("atomic fetch-and-add latency / bandwidth / rate",),
    "ucp_swap": ("atomic swap latency / bandwidth / rate",),
    "ucp_cswap": ("atomic compare-and-swap latency / bandwidth / rate",),
    "stream_bw": ("stream bandwidth",), "stream_lat": ("stream latency",), "ucp_am_lat": ("am latency",),
    "ucp_am_bw": ("am bandwidth / message rate",),
}


def _client_tests(ctx: Dict[str, Any]) -> List[str]:
    """The -t of every ucx_perftest client command of the input."""
    return [str(r.command.options.get("-t")) for r in ctx.get("runs") or []
            if r.command is not None and r.command.tool == "ucx_perftest" and r.command.host
            and r.command.options.get("-t")]


def ucx_perftest_test_differs(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The ucx_perftest server printed a test other than the one its client's -t names.

    The server takes every parameter from its client: it reads the client's parameter structure from the TCP
    socket as raw bytes (setup_sock_rte_p2p(): safe_recv(connfd, &ctx->params, sizeof(ctx->params))) and prints
    the test it read. Another test means the bytes were read with another layout: the two ucx_perftest builds
    are of different UCX releases (or the client was not ucx_perftest)."""
    if run.command is None or run.command.tool != "ucx_perftest" or run.command.host:
        return None
    shown = next((m for m in run.messages if m.id == "UCX.PERFTEST_TEST"), None)
    asked = set(_client_tests(ctx))
    if shown is None or len(asked) != 1:
        return None
    test = asked.pop()
    expected = _PERFTEST_TESTS.get(test)
    printed = str(shown.fields.get("test", "")).strip()
    if expected is None or printed in expected:
        return None
    return {"line": shown.line, "printed": printed, "asked": test, "expected": expected[0]}


# ucx_perftest's server lines (src/tools/perf/perftest.c setup_sock_rte()) are also the words of countless other
# servers (librdmacm's rcopy, socket examples, gnutls' DTLS example: "Waiting for connection...", "Accepted connection
# from %s"): they show a UCX run only beside something UCX's own
_GENERIC_UCX = frozenset({"UCX.PERFTEST_WAITING"})


def ucx_shown(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The line that shows UCX itself in the run: a UCX tool's command line, or a message of UCX's catalogue other
    than the words many programs print."""
    if run.command is not None and run.command.tool.startswith("ucx_"):
        return {"line": run.command.line, "text": run.command.text}
    own = next((m for m in run.messages if m.id.startswith("UCX.") and m.id not in _GENERIC_UCX), None)
    return {"line": own.line, "text": own.text} if own is not None else None


@lru_cache(maxsize=1)
def _ucx_settings() -> Tuple[frozenset, Tuple[str, ...]]:
    with open(_SETTINGS_FILE, "rb") as f:
        data = tomllib.load(f)
    return frozenset(data["fields"]), tuple(data["prefixes"])


# the env_prefix a program passes to ucp_config_read(): UCX then reads "UCX_<prefix>_<name>" before "UCX_<name>"
# (Open MPI's UCX components: ucp_config_read("MPI", ...) in ompi/mca/pml/ucx/pml_ucx.c and opal/mca/common/ucx;
# its OpenSHMEM: ucp_config_read("OSHMEM", ...) in oshmem/mca/spml/ucx/spml_ucx_component.c)
_PROGRAM_PREFIXES = ("MPI_", "OSHMEM_")


def ucx_setting_known(name: str) -> bool:
    """A UCX_* name UCX can read: "UCX_" + prefixes ("IB_", "RC_MLX5_", "TX_" ...) + one field name, after the
    prefix of a program that names its own (UCX_MPI_TLS, UCX_OSHMEM_NET_DEVICES)."""
    if not name.startswith("UCX_"):
        return False
    fields, prefixes = _ucx_settings()
    rest = name[4:]
    program = next((p for p in _PROGRAM_PREFIXES if rest.startswith(p)), None)
    if program is not None and ucx_setting_known("UCX_" + rest[len(program):]):
        return True

    @lru_cache(maxsize=None)
    def splits(tail: str, depth: int) -> bool:
        if tail in fields:
            return True
        if depth == 0:
            return False
        return any(tail.startswith(p) and splits(tail[len(p):], depth - 1) for p in prefixes)
    return splits(rest, 3)


@lru_cache(maxsize=1)
def _ucx_full_names() -> Tuple[str, ...]:
    fields, prefixes = _ucx_settings()
    with open(_SETTINGS_FILE, "rb") as f:
        roots = tomllib.load(f).get("roots", [])
    names = {f"UCX_{f}" for f in roots}
    names |= {f"UCX_{p}{f}" for p in prefixes for f in fields}
    return tuple(sorted(names))


def _edits(a: str, b: str) -> int:
    """Edit distance counting a swap of two neighbours as one edit (a typist's distance)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def closest_ucx_setting(name: str) -> Optional[str]:
    """The real name the user most likely meant: the names a cut-short one begins ("UCX_LOG": UCX_LOG_FILE or
    UCX_LOG_LEVEL, the fewest words first), else the nearest by spelling."""
    head = name.upper() + "_"
    longer = sorted((c for c in _ucx_full_names() if c.startswith(head)), key=lambda c: (c.count("_"), c))
    if longer:
        shortest = [c for c in longer if c.count("_") == longer[0].count("_")]
        return " or ".join(shortest[:3])
    candidates = difflib.get_close_matches(name.upper(), _ucx_full_names(), n=12, cutoff=0.7)
    if not candidates:
        return None
    return min(candidates, key=lambda c: (_edits(name.upper(), c), c.count("_"), c))


@_of_source
def ucx_env_typos(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_* names that UCX warned it did not use and that no UCX release reads: misspelt settings."""
    for m in _messages(run, ctx, "UCX.ENV_UNUSED"):
        names = re.findall(r"UCX_[A-Za-z0-9_]+", m.fields.get("env", "") or m.text)
        typos = [n for n in names if n != "UCX_WARN_UNUSED_ENV_VARS" and not ucx_setting_known(n)]
        if typos:
            closest = {n: closest_ucx_setting(n) for n in typos}
            hints = [f"{n} (UCX reads {closest[n]})" if closest[n] else n for n in typos]
            return {"line": m.line, "names": ", ".join(typos), "text": "; ".join(hints),
                    "suggestion": closest[typos[0]] or "the name `ucx_info -c` lists"}
    return None


# settings that choose what a connection uses: a misspelt one changes which device, transport or GID the
# job really used
_SELECTION = re.compile(r"^UCX_(?:TLS|NET_DEVICES|SHM_DEVICES|SOCKADDR_TLS_PRIORITY|(?:IB_|RC_|UD_|DC_|RC_MLX5_|"
                        r"DC_MLX5_|UD_MLX5_|RC_VERBS_|UD_VERBS_)?(?:GID_INDEX|ROCE_\w+|TRAFFIC_CLASS|SL|PKEY|"
                        r"REACHABILITY_MODE|TIMEOUT|RETRY_COUNT|RNR_\w+|PATH_MTU|MLX5_DEVX\w*))$")


def ucx_selection_typo(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """A misspelt UCX_* name whose closest real name selects devices, transports, GIDs or timeouts."""
    typos = ucx_env_typos(run, ctx)
    if typos and _SELECTION.match(typos["suggestion"]):
        return typos
    return None


def _list_setting(run: Run, name: str):
    shown = run.settings.get(name)
    if shown is None:
        return None, []
    return shown, [v.strip().lower() for v in re.split(r"[,\s]+", shown.value.strip("'\"")) if v.strip()]


def _allow_list_without(run: Run, name: str, wanted: Callable[[str], bool]) -> Optional[Dict[str, Any]]:
    """The setting as shown, when it is an allow-list (not a "^..." exclusion) and names nothing `wanted`."""
    shown, values = _list_setting(run, name)
    if shown is None or not values or values[0].startswith("^") or any(wanted(v) for v in values):
        return None
    return {"line": shown.line, "value": shown.value}


def ucx_tls_without_network(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_TLS lists only intra-node transports: no transport can reach another host."""
    return _allow_list_without(run, "UCX_TLS", lambda v: v.lstrip("^\\") in UCX_NETWORK_TLS)


# UCX_TLS names that bring a UD transport: UD itself, and the aliases that add it as the auxiliary transport RC and
# DC connect their endpoints over (src/ucp/core/ucp_context.c ucp_tl_aliases: "rc_v" is rc_verbs + ud_verbs:aux ...)
_UCX_BRINGS_UD = frozenset("all ib ud ud_v ud_x ud_verbs ud_mlx5 rc rc_v rc_x dc dc_x".split())
_UCX_NEEDS_AUX = frozenset("rc_verbs rc_mlx5 dc_mlx5".split())


def ucx_tls_rc_without_ud(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_TLS names RC or DC by their transport names (rc_verbs, rc_mlx5, dc_mlx5) and nothing that brings UD, the
    auxiliary transport their endpoints are connected over."""
    found = _allow_list_without(run, "UCX_TLS", lambda v: v.lstrip("\\") in _UCX_BRINGS_UD)
    _, values = _list_setting(run, "UCX_TLS")
    if found is None or not any(v.lstrip("\\") in _UCX_NEEDS_AUX for v in values or ()):
        return None
    return found


def _devices_only(run: Run, rdma: bool) -> Optional[HeaderField]:
    """UCX_NET_DEVICES as shown, when it lists only RDMA devices (`rdma`: each with its port, mlx5_0:1) or only
    network interfaces (eth0, TCP's devices)."""
    shown, devices = _list_setting(run, "UCX_NET_DEVICES")
    if shown is None or not devices or devices[0].startswith("^") or "all" in devices \
            or any((":" in d) != rdma for d in devices):
        return None
    return shown


def _devices_without_tls(run: Run, rdma: bool) -> Optional[Dict[str, Any]]:
    """UCX_NET_DEVICES names only RDMA devices or only network interfaces, and UCX_TLS allows no transport of that
    kind: none of the transports allowed has a device UCX may use."""
    shown = _devices_only(run, rdma)
    if shown is None or _allow_list_without(run, "UCX_TLS", _rdma_tl if rdma else _tcp_tl) is None:
        return None
    return {"line": shown.line, "value": shown.value, "tls": run.settings["UCX_TLS"].value}


def ucx_devices_without_tls(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_NET_DEVICES names only network interfaces (eth0: TCP's devices; an RDMA device is named with its port,
    mlx5_0:1) while UCX_TLS allows no TCP."""
    return _devices_without_tls(run, rdma=False)


def ucx_rdma_devices_without_tls(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_NET_DEVICES names only RDMA devices (mlx5_0:1) while UCX_TLS allows no RDMA transport (tcp, shared memory
    and self only)."""
    return _devices_without_tls(run, rdma=True)


def _rdma_tl(value: str) -> bool:
    name = value.lstrip("\\")
    return name in UCX_NETWORK_TLS and name != "tcp"


def _tcp_tl(value: str) -> bool:
    return value.lstrip("\\") in ("tcp", "all")


def ucx_selection_without_rdma(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_NET_DEVICES names no RDMA device (interfaces only), or UCX_TLS allows no RDMA transport: what UCX is left
    with is TCP, shared memory and self. {setting, value, line}: the setting that leaves RDMA out."""
    shown = _devices_only(run, rdma=False)
    if shown is not None:
        return {"setting": "UCX_NET_DEVICES", "value": shown.value, "line": shown.line}
    found = _allow_list_without(run, "UCX_TLS", _rdma_tl)
    if found is not None:
        return {"setting": "UCX_TLS", **found}
    return None


def ucx_tls_without_gpu(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_TLS lists transports and none of them a GPU's: UCX opens no GPU memory domain."""
    return _allow_list_without(run, "UCX_TLS", lambda v: _UCX_GPU_TLS.match(v.lstrip("\\")) is not None)


def ompi_btl_without_network(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """OMPI_MCA_btl (--mca btl / -mca btl / OMPI_MCA_btl=) lists only on-node BTLs (self, vader, sm, smcuda)."""
    return _allow_list_without(run, "OMPI_MCA_btl", OMPI_NETWORK_BTLS.__contains__)


def ompi_btl_without_rdma(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """OMPI_MCA_btl (--mca btl / -mca btl / OMPI_MCA_btl=) lists no BTL that drives an RDMA device: on-node BTLs and
    TCP only."""
    return _allow_list_without(run, "OMPI_MCA_btl", OMPI_RDMA_BTLS.__contains__)


# -- what else the paste shows ------------------------------------------------------------------------------

_CONTAINER_RUN = re.compile(r"(?<![\w-])(?:docker|podman|nerdctl)\s+(?:container\s+)?(?:run|create)\b(?P<args>.*)")
_GRANTS_LOCK = re.compile(r"--privileged\b|--cap-add[= ](?:CAP_)?(?:IPC_LOCK|ALL)\b|"
                          r"--ulimit[= ]memlock=(?:-1|unlimited)(?::(?:-1|unlimited))?\b", re.I)


@_of_lines
def container_without_ipc_lock(lines: Sequence[str]) -> Optional[Dict[str, Any]]:
    """A container launch line that gives the container no way to lock memory beyond the default limit."""
    for number, line in enumerate(lines, 1):
        m = _CONTAINER_RUN.search(line)
        if m and not _GRANTS_LOCK.search(m.group("args")):
            return {"line": number, "command": line.strip()[:200]}
    return None


_ULIMIT_A = re.compile(r"max locked memory\s+\(kbytes, -l\)\s+(?P<value>\d+|unlimited)", re.I)
_ULIMIT_L = re.compile(r"^\s*(?:\S*[$#]\s*)?ulimit\s+-(?:S|H)?l\s*$")


@_of_lines
def pasted_memlock_limit(lines: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The locked-memory limit as `ulimit -a` (or `ulimit -l` followed by its answer) shows it, when finite."""
    for number, line in enumerate(lines, 1):
        m = _ULIMIT_A.search(line)
        value = m.group("value") if m else None
        if value is None and _ULIMIT_L.match(line) and number < len(lines):
            answer = lines[number].strip()
            value = answer if re.fullmatch(r"\d+|unlimited", answer) else None
            number += 1 if value else 0
        if value and value != "unlimited":
            return {"line": number, "kb": int(value)}
    return None


# -- Open MPI -----------------------------------------------------------------------------------------------

@_of_source
def verbs_provider_missing(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """libibverbs, in the same paste, found a device but no userspace driver for it.

    rdma-core's provider library (libmlx5 ...) is missing, or its config directory is unreadable."""
    for m in _messages(run, ctx, "VERBS.NO_USERSPACE_DRIVER", "D15"):
        return {"line": m.line, "text": m.text}
    return None


def ompi_help_hosts(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The hosts and device named by the help text of the run's first error (Local host / Peer host ...)."""
    first_error = next((m for m in run.messages if m.kind == "error" and m.id.startswith("OMPI.")), None)
    if first_error is None:
        return None
    out: Dict[str, Any] = {"line": first_error.line, "local": None, "peer": None, "device": None}
    for m in run.messages:
        if m.line < first_error.line or m.line > first_error.line + 40:
            continue
        if m.id == "OMPI.HELP_LOCAL_HOST" and out["local"] is None:
            out["local"] = m.fields.get("host")
        elif m.id == "OMPI.HELP_PEER_HOST" and out["peer"] is None:
            out["peer"] = m.fields.get("peer")
        elif m.id == "OMPI.HELP_LOCAL_DEVICE" and out["device"] is None:
            out["device"] = m.fields.get("device")
    return out


def ompi_openib_port_not_ib(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The device of the run's first "No OpenFabrics connection schemes" help text (its "Local device:" line, within
    the box) has a driver that never runs InfiniBand (knowledge/devices.py). udcm_component_query() refuses any port
    that is not InfiniBand's (btl_openib_connect_udcm.c, "UD CPC only supported on InfiniBand"), so only rdmacm could
    have taken it."""
    box = next((m for m in run.messages if m.id == "OMPI.OPENIB_NO_CPCS"), None)
    if box is None:
        return None
    for m in run.messages:
        if m.id == "OMPI.HELP_LOCAL_DEVICE" and box.line < m.line <= box.line + 12:
            device = m.fields.get("device") or ""
            if devices.has_no_infiniband_port(device):
                return {"line": m.line, "device": device, "text": m.text}
            return None
    return None


FEATURES: Dict[str, Callable[[Run, Dict[str, Any]], Any]] = {
    f.__name__: f for f in (ucx_memlock_hint_expected, ucx_startup, ucx_env_typos, ucx_selection_typo,
                            ucx_tls_without_network, ucx_tls_rc_without_ud, ucx_devices_without_tls,
                            ucx_rdma_devices_without_tls, ucx_selection_without_rdma,
                            ucx_tls_without_gpu, ucx_timeout_both_hosts, ucx_gid_index_set,
                            ucx_perftest_test_differs, ucx_shown,
                            ompi_btl_without_network, ompi_btl_without_rdma, container_without_ipc_lock,
                            pasted_memlock_limit, verbs_provider_missing, ompi_help_hosts, ompi_openib_port_not_ib)
}

FIELDS_OF: Dict[str, Tuple[str, ...]] = {
    "ucx_memlock_hint_expected": ("line", "version", "why"),
    "ucx_startup": ("line", "text"),
    "ucx_timeout_both_hosts": ("line", "hosts"),
    "ucx_shown": ("line", "text"),
    "ucx_gid_index_set": ("line", "name", "value"),
    "ucx_perftest_test_differs": ("line", "printed", "asked", "expected"),
    "ucx_env_typos": ("line", "names", "text", "suggestion"),
    "ucx_selection_typo": ("line", "names", "text", "suggestion"),
    "ucx_tls_without_network": ("line", "value"),
    "ucx_tls_without_gpu": ("line", "value"),
    "ucx_tls_rc_without_ud": ("line", "value"),
    "ucx_devices_without_tls": ("line", "value", "tls"),
    "ucx_rdma_devices_without_tls": ("line", "value", "tls"),
    "ucx_selection_without_rdma": ("setting", "value", "line"),
    "ompi_btl_without_network": ("line", "value"),
    "ompi_btl_without_rdma": ("line", "value"),
    "container_without_ipc_lock": ("line", "command"),
    "pasted_memlock_limit": ("line", "kb"),
    "verbs_provider_missing": ("line", "text"),
    "ompi_help_hosts": ("line", "local", "peer", "device"),
    "ompi_openib_port_not_ib": ("line", "device", "text"),
}

