"""perftest's command-line options, as its getopt_long tables declare them.

Read from linux-rdma/perftest src/perftest_parameters.c (`long_options[]` and the getopt_long short
string) at tags V4.1-0.2, v4.4-0.37, v4.5-0.17, 25.01.0-0.80 and HEAD 00b55b6 (6.29); the union is
kept so that a command line of any generation parses. Canonical names are the long names.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

# getopt short string of every generation read: "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"
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
