"""Observations about runs of rdma-core's test programs and of perftest with GPU memory, for the rules of
rules/verbs.toml and rules/gpudirect.toml. Registered into views/features.py (FEATURES, FIELDS_OF) on import.

  gpu_memory          the run used GPU (or other accelerator) memory: perftest's --use_cuda/--use_rocm/... options,
                      its header's "Use ROCm memory : ON", or the lines its CUDA/ROCm code prints
  pingpong_gid_option the GID index an ibv_*_pingpong command line chose with -g (None: no -g, or no command line)
  pingpong_local_gid  the GID an ibv_*_pingpong run printed in its "local address:" line, and what kind it is
  pingpong_gid_family that kind alone: empty | link-local | ipv4 | ipv6
  run_tool            the program whose command line started the run
  pingpong_stalled_at where an ibv_*_pingpong run that printed no error and no result stopped: "exchange" (both
                      QP addresses printed: the QPs were connected, no message ever completed) or "connect" (only
                      its own address: the server waiting for a client, the client before the TCP exchange)
  pingpong_mtu_option the path MTU an ibv_*_pingpong command line asked for with -m (None: the default, 1024)
  pingpong_ib_port_option  the device port an ibv_*_pingpong command line chose with -i/--ib-port, when it is not
                      port 1 (the default): {value, line, quote}
  pingpong_gid_elsewhere  for a run whose -g chose an empty GID: another ibv_*_pingpong run of the input that chose
                      another index and printed a usable GID (where the usable GID sits on hosts set up alike)
  pingpong_peer_gid_type  for a run that printed a usable GID: the other side's ibv_*_pingpong run of the input when
                      its GID is of the other type (one an IPv4 address's RoCE v2 GID, ::ffff:a.b.c.d, the other an
                      IPv6 one, link-local or not): RoCE connects two GIDs of one type only
  pingpong_target_not_server  for a client that could not connect to an IPv4 address: the input's ibv_*_pingpong
                      server printed the RoCE GID of another IPv4 address (::ffff:a.b.c.d: its RDMA netdev's)
  device_opened_elsewhere for a run that found no device of its -d name: another run of the input that named the
                      same device and opened it (printed its local address), so the name itself is right
  rping_stalled       an rping client stopped by hand (^C) that completed no ping (no "ping data" line with -v,
                      no end of its -C count) and printed no error
  cmatose_step        the last step a ucmatose run printed ("connecting", "receiving data transfers" ...)
  cmatose_stalled_at  where a ucmatose run that printed no error and no completion stopped: "connect" (starting
                      server / connecting: no connection was established) or "data" (connected, then a data
                      transfer step never completed)
  devices_listed_none an ibv_devices run whose table ends under its header and its dashes: libibverbs listed no
                      device (a paste cut before the dashes says nothing)
"""
from __future__ import annotations

import bisect
import ipaddress
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rdmadoctor.model import Run
from rdmadoctor.views import bysource, features

# perftest's options that put the buffers in accelerator memory (knowledge/perftest.py names them)
GPU_OPTIONS = ("use_cuda", "use_cuda_bus_id", "use_cuda_dmabuf", "use_rocm", "use_rocm_dmabuf", "use_neuron",
               "use_neuron_dmabuf", "use_hl", "use_mlu", "use_mlu_dmabuf", "use_musa", "use_musa_dmabuf",
               "use_opencl")
# what perftest's cuda_memory.c / rocm_memory.c print while they set the buffer up (every generation's wording)
_GPU_SET_UP = ("initializing CUDA", "creating CUDA Ctx", "allocated GPU buffer", "cuMemAlloc() of a",
               "using DMA-BUF for GPU buffer", "Using ROCm Device", "hipMalloc", "Picking GPU number")
_GPU_LINE = re.compile("|".join(map(re.escape, _GPU_SET_UP)), re.IGNORECASE)
# the same words, sought in a lowered copy of an input: IGNORECASE makes `re` try each alternative at every place of the
# text, five times slower
_GPU_WORDS = re.compile("|".join(re.escape(words.lower()) for words in _GPU_SET_UP))
_PINGPONG = re.compile(r"^ibv_(?:rc|uc|ud|srq|xsrq)_pingpong$")


def gpu_memory(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    if run.command is not None:
        for option in GPU_OPTIONS:
            if option in run.command.options:
                kind = option.split("_")[1] if "_" in option else option
                return {"kind": kind, "how": f"--{option}", "line": run.command.line}
    for name in ("rocm_memory", "musa_memory"):
        field = run.header.get(name)
        if field is not None and str(field.value).upper() == "ON":
            return {"kind": name.split("_")[0], "how": f"header: {name} ON", "line": field.line}
    # perftest's CUDA/ROCm set-up lines are no messages: they may precede the run's first recognised line, down to
    # the end of the run before it in the same input
    numbers, shown = bysource.once_per_source(ctx, "_gpu_lines", run.source,
                                              lambda: _gpu_lines(bysource.source_lines(run, ctx)))
    at = bisect.bisect_left(numbers, _end_before(run, ctx) + 1)
    if at < len(numbers) and numbers[at] <= run.last_line:
        how = shown[at]
        kind = "rocm" if "rocm" in how.lower() or "hip" in how.lower() else "cuda"
        return {"kind": kind, "how": how, "line": numbers[at]}
    return None


def _gpu_lines(lines: Sequence[str]) -> Tuple[List[int], List[str]]:
    """The numbers of an input's lines that show a GPU buffer being set up, and the first such words of each: one
    search of the input (in pieces of _GPU_PIECE lines, each lowered: the input's kept lines may be megabytes), for
    each of its thousands of runs asks about its own lines."""
    numbers: List[int] = []
    shown: List[str] = []
    for first in range(0, len(lines), _GPU_PIECE):
        text = "\n".join(lines[first:first + _GPU_PIECE]).lower()
        number, pos = first + 1, 0
        for m in _GPU_WORDS.finditer(text):
            number += text.count("\n", pos, m.start())
            pos = m.start()
            if numbers and numbers[-1] == number:
                continue
            words = _GPU_LINE.search(lines[number - 1])         # as printed
            if words:
                numbers.append(number)
                shown.append(words.group(0))
    return numbers, shown


_GPU_PIECE = 2048


def _end_before(run: Run, ctx: Dict[str, Any]) -> int:
    """The last line of the last run of the same input that ends before this run begins (0: none)."""
    ends = bysource.once_per_source(ctx, "_run_ends", run.source,
                                    lambda: sorted(r.last_line for r in bysource.runs_of_source(ctx, run.source)))
    before = bisect.bisect_left(ends, run.first_line)
    return ends[before - 1] if before else 0


def _is_pingpong(run: Run) -> bool:
    return run.command is not None and bool(_PINGPONG.match(run.command.tool or ""))


def _pingpong_option(run: Run, options: Tuple[str, ...], base: int) -> Optional[int]:
    """The first of `options` an ibv_*_pingpong command line gives as a number (None: none, or not such a run)."""
    if not _is_pingpong(run):
        return None
    assert run.command is not None
    for option in options:
        try:
            return int(str(run.command.options.get(option)), base)
        except (TypeError, ValueError):
            continue
    return None


def pingpong_gid_option(run: Run, ctx: Dict[str, Any]) -> Optional[int]:
    return _pingpong_option(run, ("-g", "--gid-idx"), 10)


def _family(gid: str) -> Optional[str]:
    try:
        addr = ipaddress.IPv6Address(gid)
    except ValueError:
        return None
    if addr == ipaddress.IPv6Address("::"):
        return "empty"
    if addr.ipv4_mapped:
        return "ipv4"
    return "link-local" if addr.is_link_local else "ipv6"


def pingpong_local_gid(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The local address line's GID. A paste may wrap the GID onto the next line ("GID" ends the line)."""
    lines = bysource.source_lines(run, ctx)
    for m in run.messages:
        if m.id != "VERBS.EX_ADDRESS" or str(m.fields.get("side", "")).lower() != "local":
            continue
        gid = m.fields.get("gid")
        printed = lines[m.line - 1].rstrip() if 0 < m.line <= len(lines) else m.text
        if not gid and printed.endswith("GID") and m.line < len(lines):
            gid = lines[m.line].strip()
        family = _family(gid) if gid else None
        if family is not None:
            return {"gid": gid, "family": family, "lid": m.fields.get("lid"), "line": m.line}
    return None


def pingpong_gid_family(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """empty | link-local | ipv4 | ipv6: the kind of GID pingpong_local_gid found."""
    local = features.feature(run, "pingpong_local_gid", ctx)
    return local["family"] if local else None


def run_tool(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """The program whose command line started the run (rping, ibv_rc_pingpong, rdma, fi_pingpong ...)."""
    return run.command.tool if run.command is not None else run.tool


def pingpong_stalled_at(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    if not _is_pingpong(run) or features.feature(run, "errors", ctx) or features.feature(run, "results", ctx):
        return None
    sides = {str(m.fields.get("side", "")).lower() for m in run.messages if m.id == "VERBS.EX_ADDRESS"}
    if "remote" in sides:
        return "exchange"
    return "connect" if "local" in sides else None


def pingpong_mtu_option(run: Run, ctx: Dict[str, Any]) -> Optional[int]:
    return _pingpong_option(run, ("-m", "--mtu"), 0)


def pingpong_ib_port_option(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    port = _pingpong_option(run, ("-i", "--ib-port"), 0)
    if port is None or port == 1 or run.command is None:
        return None
    return {"value": port, "line": run.command.line, "quote": f"{run.side}: {run.command.text.strip()}"}


def _input_runs(run: Run, ctx: Dict[str, Any]):
    return [r for r in (ctx.get("runs") or [run]) if r is not run]


def pingpong_gid_elsewhere(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    index = features.feature(run, "pingpong_gid_option", ctx)
    if index is None or features.feature(run, "pingpong_gid_family", ctx) != "empty":
        return None
    for other in _input_runs(run, ctx):
        chosen = features.feature(other, "pingpong_gid_option", ctx)
        local = features.feature(other, "pingpong_local_gid", ctx)
        if chosen is not None and chosen != index and local and local["family"] in ("ipv4", "ipv6"):
            return {"index": chosen, "gid": local["gid"], "line": local["line"], "source": other.source,
                    "quote": f"-g {chosen}: GID {local['gid']}"}
    return None


def _pingpong_peers(run: Run, ctx: Dict[str, Any]) -> List[Run]:
    """The input's ibv_*_pingpong runs of the other side than `run`'s (none when its side is not known)."""
    if run.side not in ("server", "client"):
        return []
    return [r for r in _input_runs(run, ctx) if _is_pingpong(r) and r.side not in (run.side, "unknown")]


def pingpong_target_not_server(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The IPv4 address a pingpong client could not connect to, when the input's pingpong server printed a RoCE GID of
    another IPv4 address (an IPv4 address's GID is ::ffff:<that address>: the server's address on its RDMA netdev)."""
    failed = next((m for m in run.messages if m.id == "VERBS.EX_TCP_CONNECT_FAILED"), None)
    if failed is None or run.side != "client":
        return None
    try:
        target = ipaddress.IPv4Address(str(failed.fields.get("peer", "")))
    except ValueError:
        return None         # (a host name: what it resolved to is not in the paste)
    for other in _pingpong_peers(run, ctx):
        local = features.feature(other, "pingpong_local_gid", ctx)
        if other.side != "server" or local is None or local["family"] != "ipv4":
            continue
        mapped = ipaddress.IPv6Address(local["gid"]).ipv4_mapped
        if mapped is not None and mapped != target:
            return {"target": str(target), "server_address": str(mapped), "line": local["line"],
                    "source": other.source, "quote": f"server's GID {local['gid']}; the client connected to {target}"}
    return None


def pingpong_peer_gid_type(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The other side's GID when it is of the other type than this run's (an IPv4 address's RoCE v2 GID, or IPv6)."""
    local = features.feature(run, "pingpong_local_gid", ctx)
    if local is None or local["family"] == "empty":
        return None
    mine = local["family"] == "ipv4"
    for other in _pingpong_peers(run, ctx):
        theirs = features.feature(other, "pingpong_local_gid", ctx)
        if theirs is not None and theirs["family"] != "empty" and (theirs["family"] == "ipv4") != mine:
            index = features.feature(other, "pingpong_gid_option", ctx)
            chosen = f"-g {index}: " if index is not None else ""
            return {"gid": theirs["gid"], "family": theirs["family"], "own_gid": local["gid"],
                    "own_family": local["family"], "line": theirs["line"], "source": other.source,
                    "quote": f"{other.side}: {chosen}GID {theirs['gid']} ({theirs['family']}), this side's "
                             f"{local['gid']} ({local['family']})"}
    return None


def _device_option(run: Run) -> Optional[str]:
    if run.command is None:
        return None
    value = run.command.options.get("-d", run.command.options.get("--ib-dev"))
    return value if isinstance(value, str) else None


def device_opened_elsewhere(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    missing = {m.fields.get("device") for m in run.messages if m.id == "VERBS.EX_DEVICE_NOT_FOUND"}
    if not missing:
        return None
    for other in _input_runs(run, ctx):
        name = _device_option(other)
        opened = next((m for m in other.messages if m.id == "VERBS.EX_ADDRESS"), None)
        if name in missing and opened is not None:
            return {"device": name, "line": opened.line, "source": other.source,
                    "quote": f"-d {name}: {opened.text}"}
    return None


def rping_stalled(run: Run, ctx: Dict[str, Any]) -> bool:
    if run.command is None or run.command.tool != "rping" or run.side != "client":
        return False
    options = run.command.options
    if not ("-v" in options or "-C" in options) or not features.feature(run, "interrupted", ctx):
        return False
    return not (features.feature(run, "errors", ctx) or features.feature(run, "results", ctx))


_CMATOSE_CONNECT = ("starting server", "starting client", "connecting")


def cmatose_step(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """The last step a ucmatose run printed ("connecting", "receiving data transfers" ...); None after its end."""
    if run.command is None or run.command.tool != "ucmatose":
        return None
    steps = [m.fields.get("step") for m in run.messages if m.id in ("VERBS.CM_TEST_STEP", "VERBS.CM_TEST_STATUS")]
    return steps[-1] if steps else None


def cmatose_stalled_at(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    step = features.feature(run, "cmatose_step", ctx)
    if step is None or step == "disconnecting":
        return None
    if features.feature(run, "errors", ctx) or features.feature(run, "results", ctx):
        return None
    return "connect" if step in _CMATOSE_CONNECT else "data"


# ibv_devices' table (rdma-core libibverbs/examples/device_list.c): "    %-16s\t   node GUID",
# "    %-16s\t----------------", then "    %-16s\t%016llx" for each device
_DEVICES_DASHES = re.compile(r"^\s*-{3,}\s+-{3,}\s*$")
# (a row may carry what its paster wrote after it: "cxgb3_0   00074306cd6f0000  <-- Chelsio")
_DEVICES_ROW = re.compile(r"^\s*[A-Za-z][\w.-]*\s+[0-9a-fA-F]{16}\b")


def devices_listed_none(run: Run, ctx: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    header = next((m for m in run.messages if m.id == "VERBS.DEVICES_HEADER"), None)
    if header is None:
        return None
    dashes = bysource.line_text(ctx, run.source, header.line + 1)
    if dashes is None or not _DEVICES_DASHES.match(dashes):
        return None
    following = bysource.line_text(ctx, run.source, header.line + 2)
    if following is not None and _DEVICES_ROW.match(following):
        return None
    return {"line": header.line + 1, "quote": dashes.strip()}


FEATURES = {f.__name__: f for f in (gpu_memory, pingpong_gid_option, pingpong_local_gid, pingpong_gid_family, run_tool,
                                    pingpong_stalled_at, pingpong_mtu_option, pingpong_ib_port_option,
                                    pingpong_gid_elsewhere,
                                    pingpong_peer_gid_type, pingpong_target_not_server,
                                    device_opened_elsewhere, rping_stalled, cmatose_step,
                                    cmatose_stalled_at, devices_listed_none)}
FIELDS_OF = {"gpu_memory": ("kind", "how", "line"), "pingpong_local_gid": ("gid", "family", "lid", "line"),
             "pingpong_ib_port_option": ("value", "line", "quote"),
             "pingpong_gid_elsewhere": ("index", "gid", "line", "source", "quote"),
             "pingpong_peer_gid_type": ("gid", "family", "own_gid", "own_family", "line", "source", "quote"),
             "pingpong_target_not_server": ("target", "server_address", "line", "source", "quote"),
             "device_opened_elsewhere": ("device", "line", "source", "quote"),
             "devices_listed_none": ("line", "quote")}

features.FEATURES.update(FEATURES)
features.FIELDS_OF.update(FIELDS_OF)
