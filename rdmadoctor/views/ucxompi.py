"""Observations about the runs of UCX and Open MPI (and what a paste shows around them) that rules ask for
by name. Each is a pure function of the run, the other runs of its input and the pasted lines; each
returns None or a record whose "line" is the line it rests on (the rule's evidence), never a cause.

  ucx_memlock_hint_expected  the UCX that printed the run would have appended "Please set max locked memory"
                             to an ENOMEM failure if RLIMIT_MEMLOCK were finite (a 1.17+ message shape or a
                             shown version >= 1.13): the limit was not what failed
  ucx_startup                the failure happened while connecting (ucp_ep_create, MPI_Init, perftest setup)
  ucx_env_typos              names in "unused environment variable" warnings that UCX never reads (misspelt)
  ucx_selection_typo         such a name whose closest real name chooses devices, transports, GIDs, timeouts
  ucx_tls_without_network    UCX_TLS as shown lists no transport that reaches another host
  ompi_btl_without_network   OMPI_MCA_btl as shown lists no BTL that reaches another host
  container_without_ipc_lock a docker/podman/nerdctl run line in the paste grants neither IPC_LOCK, nor
                             --privileged, nor an unlimited memlock ulimit
  pasted_memlock_limit       `ulimit -l` / `ulimit -a` output in the paste with a finite locked-memory limit
  verbs_provider_missing      libibverbs in the same paste found a device without its userspace driver
  ompi_help_hosts            the local and peer host (and device) of the Open MPI help text in the run
"""
from __future__ import annotations

import difflib
import functools
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rdmadoctor.model import Run
from rdmadoctor.views import bysource

_SETTINGS_FILE = Path(__file__).resolve().parent.parent / "knowledge" / "ucx_settings.toml"

# UCX transports (UCX_TLS names and aliases) that reach another host; the others are intra-node
# (sm, posix, sysv, cma, knem, xpmem, self, cuda_copy, cuda_ipc, rocm_*, gdr_copy, ze_*).
UCX_NETWORK_TLS = frozenset("""all ib rc rc_v rc_x rc_verbs rc_mlx5 dc dc_x dc_mlx5 ud ud_v ud_x ud_verbs ud_mlx5 tcp
    srd rc_gda gga gga_mlx5 ugni ugni_rdma ugni_smsg ugni_udt mm_ib""".split())
# Open MPI BTLs that reach another host (the others: self, vader, sm, smcuda)
OMPI_NETWORK_BTLS = frozenset("tcp openib uct usnic ofi ugni portals4 sctp mx".split())


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


def _of_lines(compute: Callable[[List[str]], Optional[Dict[str, Any]]]):
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
    CAP_IPC_LOCK) (src/uct/ib/base/ib_log.c uct_ib_memlock_limit_msg()). 1.17+ prefixes queue creation
    failures with "<device>: ". So such a failure without the hint, from a UCX known to print it, means the
    locked-memory limit was not the problem."""
    for m in _messages(run, ctx, "UCX.VERSION"):
        code = _version_code(m.fields.get("version", ""))
        if code is not None and code >= 113:
            return {"line": m.line, "version": m.fields.get("version"), "why": "version"}
    for m in _messages(run, ctx, "UCX.IB_QUEUE_CREATE_FAILED", "UCX.IB_CREATE_QP_FAILED"):
        if m.fields.get("device") and m.fields.get("error") == "Cannot allocate memory":
            return {"line": m.line, "version": "1.17 or newer", "why": "shape"}
    return None


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


@lru_cache(maxsize=1)
def _ucx_settings() -> Tuple[frozenset, Tuple[str, ...]]:
    with open(_SETTINGS_FILE, "rb") as f:
        data = tomllib.load(f)
    return frozenset(data["fields"]), tuple(data["prefixes"])


def ucx_setting_known(name: str) -> bool:
    """A UCX_* name UCX can read: "UCX_" + prefixes ("IB_", "RC_MLX5_", "TX_" ...) + one field name."""
    if not name.startswith("UCX_"):
        return False
    fields, prefixes = _ucx_settings()
    rest = name[4:]

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


def ucx_tls_without_network(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """UCX_TLS lists only intra-node transports: no transport can reach another host."""
    shown, values = _list_setting(run, "UCX_TLS")
    if shown is None or not values or values[0].startswith("^") or any(v.lstrip("^\\") in UCX_NETWORK_TLS
                                                                         for v in values):
        return None
    return {"line": shown.line, "value": shown.value}


def ompi_btl_without_network(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """OMPI_MCA_btl (--mca btl / -mca btl / OMPI_MCA_btl=) lists only on-node BTLs (self, vader, sm, smcuda)."""
    shown, values = _list_setting(run, "OMPI_MCA_btl")
    if shown is None or not values or values[0].startswith("^") or any(v in OMPI_NETWORK_BTLS for v in values):
        return None
    return {"line": shown.line, "value": shown.value}


# -- what else the paste shows ------------------------------------------------------------------------------

_CONTAINER_RUN = re.compile(r"(?<![\w-])(?:docker|podman|nerdctl)\s+(?:container\s+)?(?:run|create)\b(?P<args>.*)")
_GRANTS_LOCK = re.compile(r"--privileged\b|--cap-add[= ](?:CAP_)?(?:IPC_LOCK|ALL)\b|"
                          r"--ulimit[= ]memlock=(?:-1|unlimited)(?::(?:-1|unlimited))?\b", re.I)


@_of_lines
def container_without_ipc_lock(lines: List[str]) -> Optional[Dict[str, Any]]:
    """A container launch line that gives the container no way to lock memory beyond the default limit."""
    for number, line in enumerate(lines, 1):
        m = _CONTAINER_RUN.search(line)
        if m and not _GRANTS_LOCK.search(m.group("args")):
            return {"line": number, "command": line.strip()[:200]}
    return None


_ULIMIT_A = re.compile(r"max locked memory\s+\(kbytes, -l\)\s+(?P<value>\d+|unlimited)", re.I)
_ULIMIT_L = re.compile(r"^\s*(?:\S*[$#]\s*)?ulimit\s+-(?:S|H)?l\s*$")


@_of_lines
def pasted_memlock_limit(lines: List[str]) -> Optional[Dict[str, Any]]:
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


FEATURES: Dict[str, Callable[[Run, Dict[str, Any]], Any]] = {
    f.__name__: f for f in (ucx_memlock_hint_expected, ucx_startup, ucx_env_typos, ucx_selection_typo,
                            ucx_tls_without_network,
                            ompi_btl_without_network, container_without_ipc_lock, pasted_memlock_limit,
                            verbs_provider_missing, ompi_help_hosts)
}

FIELDS_OF: Dict[str, Tuple[str, ...]] = {
    "ucx_memlock_hint_expected": ("line", "version", "why"),
    "ucx_startup": ("line", "text"),
    "ucx_env_typos": ("line", "names", "text", "suggestion"),
    "ucx_selection_typo": ("line", "names", "text", "suggestion"),
    "ucx_tls_without_network": ("line", "value"),
    "ompi_btl_without_network": ("line", "value"),
    "container_without_ipc_lock": ("line", "command"),
    "pasted_memlock_limit": ("line", "kb"),
    "verbs_provider_missing": ("line", "text"),
    "ompi_help_hosts": ("line", "local", "peer", "device"),
}

