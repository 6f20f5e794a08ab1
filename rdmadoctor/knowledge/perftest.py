"""What rdmadoctor knows of perftest itself: its options, defaults, units, what it pins, and the allowlist of
what `bench` may run.

The command-line options are as its getopt_long tables declare them.

Read from linux-rdma/perftest src/perftest_parameters.c (`long_options[]` and the getopt_long short
string) at tags V4.1-0.2, v4.4-0.37, v4.5-0.17, 25.01.0-0.80 and HEAD 00b55b6 (6.29); the union is
kept so that a command line of any generation parses. Canonical names are the long names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

# getopt short string of every generation read:
# "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"
SHORT: Dict[str, Tuple[str, bool]] = {
    "w": ("limit_bw", True), "y": ("limit_msgrate", True), "p": ("port", True), "d": ("ib-dev", True),
    "i": ("ib-port", True), "m": ("mtu", True), "s": ("size", True), "n": ("iters", True),
    "t": ("tx-depth", True), "u": ("qp-timeout", True), "S": ("sl", True), "x": ("gid-index", True),
    "c": ("connection", True), "q": ("qp", True), "I": ("inline_size", True), "o": ("outs", True),
    "M": ("MGID", True), "r": ("rx-depth", True), "Q": ("cq-mod", True), "A": ("atomic_type", True),
    "l": ("post_list", True), "D": ("duration", True), "f": ("margin", True), "B": ("source_mac", True),
    "T": ("tos", True), "L": ("hop_limit", True), "E": ("dest_mac", True), "J": ("dest_ip", True),
    "j": ("source_ip", True), "K": ("dest_port", True), "k": ("source_port", True), "X": ("vector", True),
    "W": ("report-counters", True),
    "a": ("all", False), "F": ("CPU-freq", False), "e": ("events", False), "g": ("mcg", False),
    "z": ("comm_rdma_cm", False), "R": ("rdma_cm", False), "v": ("mac_fwd", False), "h": ("help", False),
    "b": ("bidirectional", False), "N": ("noPeak", False), "V": ("version", False),
    "C": ("report-cycles", False), "H": ("report-histogrm", False), "U": ("report-unsorted", False),
    "O": ("dualport", False), "Z": ("server", False), "P": ("client", False),
}

_LONG_WITH_ARG = """
port ib-dev ib-port mtu size iters tx-depth qp-timeout sl gid-index connection qp vector inline_size outs
tos hop_limit MGID rx-depth cq-mod atomic_type post_list duration margin source_mac dest_mac dest_ip
source_ip dest_port source_port ethertype limit_bw limit_msgrate report-counters force-link remote_mac
local_mac remote_ip local_ip remote_port local_port pkey_index burst_size typical_pkt_size rate_limit
rate_limit_type rate_units output out_json_file latency_gap flow_label retry_count payload_file_path
use_cuda use_cuda_bus_id cuda_mem_type use_musa use_musa_bus_id use_rocm use_neuron use_hl use_mlu
use_opencl opencl_platform_id use_ib_dm_dmabuf gpu_touch mmap mmap-offset dlid tclass wait_destroy flows
flows_burst reply_every vlan_pcp recv_post_list aes_block_size kek_path credentials_path
data_enc_keys_number data_enc_key_app_path log_dci_streams log_active_dci_streams congest_type
bind_source_ip cqe_poll tph_mem cpu_id ph pin_cores numa_node
"""
_LONG_FLAGS = """
all CPU-freq events mcg comm_rdma_cm rdma_cm help bidirectional noPeak version report-cycles
report-histogrm report-unsorted dualport server client mac_fwd use_rss run_infinitely report_gbits use-srq
no_lock use-null-mr report-both reversed tcp cpu_util out_json dont_xchg_versions use_cuda_dmabuf
use_cuda_pcie_mapping use_data_direct use_musa_dmabuf use_musa_pcie_mapping use_rocm_dmabuf
use_neuron_dmabuf use_mlu_dmabuf ipv6 ipv6-addr raw_ipv6 report-per-port odp use_hugepages
use_old_post_send promiscuous sniffer raw_mcast mr_per_qp perform_warm_up vlan_en aes_xts encrypt_on_tx
sig_before disable_pcie_relaxed use_ooo write_with_imm send_with_imm no_enhanced_reorder
unsolicited_write connectionless disable_dynamic_polling sig_offload data_validation
data_validation_debug disable_numa
"""
# Options that took no argument in old releases and one in new ones (e.g. --use_cuda, --use_rocm):
# their value is taken only when it is attached with '=' or looks like a number.
OPTIONAL_ARG = frozenset({"use_cuda", "use_rocm"})

LONG: Dict[str, bool] = {name: True for name in _LONG_WITH_ARG.split()}
LONG.update({name: False for name in _LONG_FLAGS.split()})


def resolve_long(name: str) -> Optional[str]:
    """The canonical long option for `name`, accepting unambiguous prefixes as getopt_long does."""
    if name in LONG:
        return name
    matches = [known for known in LONG if known.startswith(name)]
    return matches[0] if len(matches) == 1 else None


# The tools: write/read/send/atomic x bw/lat, and the raw Ethernet ones (no side channel at all).
TOOLS = tuple(f"ib_{verb}_{kind}" for verb in ("write", "read", "send", "atomic") for kind in ("bw", "lat")) + (
    "raw_ethernet_bw", "raw_ethernet_lat", "raw_ethernet_burst_lat", "raw_ethernet_fs_rate")


# -- defaults and units -------------------------------------------------------------------------------------
DEFAULT_PORT = 18515                 # the TCP side channel (-p)
UINT32 = 1 << 32                     # a result row's #bytes or #iterations beyond this is not a count
# perftest's "MB/sec" was always 2^20 bytes (its MEGA factor); 24.07 renamed the column MiB/sec.
UNIT_TO_GBPS = {"MB/sec": 8 * 1048576 / 1e9, "MiB/sec": 8 * 1048576 / 1e9, "Gb/sec": 1.0}


def is_real_row(size: object, iterations: object) -> bool:
    """A result row that measured something: a positive size and an iteration count below 2^32. A row
    beyond that is 8 bytes of a key record read as a number (a desynchronised side-channel exchange)."""
    return (isinstance(size, int) and not isinstance(size, bool) and 0 < size < UINT32
            and isinstance(iterations, int) and not isinstance(iterations, bool) and 0 <= iterations < UINT32)


def pin_bytes(size: Optional[int] = None, qps: Optional[int] = None) -> int:
    """The least a bandwidth test pins: perftest's alloc_ctx makes its buffer max(size, one page) x 2 (send and
    receive halves) x the QPs (x flows; 1 unless --flows), and registers it whole."""
    return max(size or 65536, 4096) * 2 * max(qps or 1, 1)


DEFAULT_PIN = pin_bytes()                    # 128 KiB: default options
ALL_SIZES_PIN = pin_bytes(8 * 1024 * 1024)   # 16 MiB: -a goes up to 8 MiB

# perftest >= 6.28 prints " <field> mismatch: local=.., remote=.." with its internal field names.
NEGOTIATED_FIELDS = {
    "test_method": "-a / --run_infinitely", "connection_type": "-c", "verb": "the test binary (write/read/send/atomic)",
    "tst": "the test binary (_bw vs _lat)", "atomicType": "-A", "test_type": "-D (duration) vs -n (iterations)",
    "report_fmt": "--report_gbits", "size": "-s", "iters": "-n", "aes_xts": "--aes_xts", "num_of_qps": "-q/--qp",
    "duration": "-D", "use_rdma_cm": "-R / -z", "use_write_with_imm": "--write_with_imm",
    "no_enhanced_reorder": "--no_enhanced_reorder", "sig_offload": "--sig_offload",
    "data_validation": "--data_validation",
}


# -- what bench may run -------------------------------------------------------------------------------------
# The binaries `rdmadoctor bench` (and the peer agent for it) may run (raw_ethernet and multicast tests need
# root and MACs: not offered).
BENCH_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat",
         "ib_send_lat", "ib_atomic_lat")

# What perftest itself forbids, so a sweep does not start a pair that cannot run.
MAX_QPS = 16384
MAX_SIZE = 1 << 31

# Numeric options: (least, most). Values are ASCII digits only (str.isdigit() and the regex \d also take
# fullwidth and Arabic-Indic digits, which int() reads: "\uff12" would reach perftest's command line as text).
# gid-index, duration and iters are what `rdmadoctor bench` itself takes (cli.py); the others are the
# hardware's and perftest's own limits, rounded: queue depths up to 16384 work requests (mlx5 and rxe
# allow that much), an inline size up to 1024 bytes, cq moderation up to 1024, port numbers 1-32, SL 0-15.
BOUNDS: Dict[str, Tuple[int, int]] = {
    "qp": (1, MAX_QPS),
    "size": (1, MAX_SIZE),
    "iters": (5, 100_000_000),
    "duration": (1, 600),
    "tx-depth": (1, 16384),
    "rx-depth": (1, 16384),
    "ib-port": (1, 32),
    "gid-index": (0, 64),
    "inline_size": (0, 1024),
    "cq-mod": (1, 1024),
    "sl": (0, 15),
}
_DIGITS = re.compile(r"[0-9]{1,10}", re.ASCII)

# option -> (how to validate its value: BOUNDS for a number, a pattern, or None for a flag; the long flag
# perftest takes). Everything else is refused.
ALLOWED: Dict[str, Tuple[Optional[str], str]] = {
    **{name: ("number", f"--{name}") for name in BOUNDS},
    "ib-dev": (r"[A-Za-z0-9_.-]{1,64}", "--ib-dev"),
    "connection": (r"RC|UC|UD|XRC|DC|SRD", "--connection"),
    "mtu": (r"256|512|1024|2048|4096", "--mtu"),
    "atomic_type": (r"CMP_AND_SWAP|FETCH_AND_ADD", "--atomic_type"),
    "bidirectional": (None, "--bidirectional"),
    "rdma_cm": (None, "--rdma_cm"),
    "report_gbits": (None, "--report_gbits"),
    "CPU-freq": (None, "--CPU-freq"),
    "all": (None, "--all"),
}


def _number(name: str, value: object) -> str:
    """The option's value as ASCII digits within BOUNDS[name], or PlanError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise PlanError(f"option {name!r}: {value!r} is not a whole number")
    text = str(value)
    if not _DIGITS.fullmatch(text):
        raise PlanError(f"option {name!r}: {text!r} is not a whole number in ASCII digits")
    low, high = BOUNDS[name]
    if not low <= int(text) <= high:
        raise PlanError(f"option {name!r}: {text} is not from {low} to {high}")
    return str(int(text))


class PlanError(ValueError):
    """A bench request that would not run (unknown tool or option, bad value)."""


@dataclass(frozen=True)
class RunSpec:
    """One perftest pair: the tool and options both sides run (the client adds the server address)."""
    tool: str
    options: Tuple[Tuple[str, object], ...]     # sorted (name, value); True for flags

    def argv(self, server: Optional[str] = None, port: Optional[int] = None) -> List[str]:
        out = [self.tool]
        for name, value in self.options:
            flag = ALLOWED[name][1]
            out.append(flag if value is True else f"{flag}={value}")
        if port is not None:
            out.append(f"--port={port}")
        if server is not None:
            out.append(server)
        return out

    def get(self, name: str, default=None):
        return dict(self.options).get(name, default)

    @property
    def label(self) -> str:
        qp, size = self.get("qp", 1), self.get("size")
        return f"{self.tool} qp={qp}" + (f" size={size}" if size is not None else "")


def validate(tool: str, options: Dict[str, object]) -> RunSpec:
    """Check a tool and its options against the allowlist; raise PlanError naming what is refused."""
    if not isinstance(tool, str) or tool not in BENCH_TOOLS:
        raise PlanError(f"tool {tool!r} is not allowed (allowed: {', '.join(BENCH_TOOLS)})")
    clean = {name: _allowed_value(name, value) for name, value in options.items()}
    _check_combination(tool, clean)
    return RunSpec(tool, tuple(sorted(clean.items())))


def _allowed_value(name: str, value: object) -> object:
    """The option's value as it will be passed (True for a flag), or PlanError: a number is ASCII digits within
    BOUNDS, any other value matches its pattern (ASCII only)."""
    if name not in ALLOWED:
        raise PlanError(f"option {name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED))})")
    pattern = ALLOWED[name][0]
    if pattern is None:
        if value is not True and value not in ("true", "1", 1):
            raise PlanError(f"option {name!r} is a flag and takes no value")
        return True
    if pattern == "number":
        return _number(name, value)
    text = value if isinstance(value, str) else ""
    if not re.fullmatch(pattern, text, re.ASCII):
        raise PlanError(f"option {name!r}: {value!r} is not a valid value")
    return text


def _check_combination(tool: str, clean: Dict[str, object]) -> None:
    """What perftest itself refuses: several QPs on a latency test, -D with -n."""
    if tool.endswith("_lat") and int(str(clean.get("qp", 1))) > 1:
        raise PlanError("latency tests run one QP (perftest: 'Multiple QPs only available on bw tests')")
    if "duration" in clean and "iters" in clean:
        raise PlanError("--duration and --iters exclude each other")


def expected_seconds(spec: RunSpec) -> float:
    """How long one run of `spec` may take: -D plus margin, or its iterations at 1 Gb/s (a slow fabric still
    finishes inside the bound)."""
    duration = spec.get("duration")
    if duration is not None:
        return float(duration) + 5.0
    iters = float(spec.get("iters", 5000 if spec.tool == "ib_write_bw" else 1000))
    size = float(spec.get("size", 65536))
    return 5.0 + iters * size * 8 / 1e9
