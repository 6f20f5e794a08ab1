"""Accuracy of `rdmadoctor explain` on real-world logs: perftest, NCCL, UCX, Open MPI, libfabric, the verbs and
rdma_cm tools, libibverbs, the kernel, Kubernetes device plugins, GPUDirect.

Every directory under fixtures/real/ holds one log as pasted in a public source (server.log, client.log or
paste.log) and a meta.toml with the root cause that the source itself established (see fixtures/real/README.md).

* Labels of confidence high/medium that name a cause (or "none" for a healthy run): the verdict's cause and status
  must equal the label.
* Labels "unknown" (the source never established a cause) and labels of low confidence: rdmadoctor must not claim
  a *different* cause with high confidence.
* Every fixture must parse (no crash, no usage error, no decode error), and a real failure is never called ok.
* The whole corpus (tools/scorecard.py): top-1 on the cases with an established cause at least 89% (the known
  misses at most 11% of them), no wrong cause at high confidence, no failure called ok.

Known misses are marked xfail(strict=True) in KNOWN_MISSES with the reason, so that a fix shows up as XPASS.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
FIXTURES = sorted(p for p in REAL.iterdir() if p.is_dir() and (p / "meta.toml").is_file())
LOG_NAMES = ("server.log", "client.log", "paste.log")
NO_CAUSE = (None, "", "none")

# fixture name -> why rdmadoctor does not name the established cause first. Each stays honest: from the paste
# alone the cause cannot be told (the threads established it with facts the paste lacks). A fix shows up as XPASS.
KNOWN_MISSES = {
    "verbs-mscclpp-493-ibstat-port-down": (
        "the paste is ibstat alone: mlx5_1's port Down / Disabled beside mlx5_0's Active one is named port-down, as a "
        "warning, since nothing in it says a rank used mlx5_1; the hang that did is only in the thread"),
    "ucx-1878-roce-ud-endpoint-timeout-gid0": (
        "the stored paste ends at the OSU header, before UCX's 'Endpoint timeout' lines: what is left is openib's "
        "'no CPCs' banner in a job on pml ucx and the command line's UCX_IB_GID_INDEX=0, not a failure of the UCX run "
        "whose GID index the developer found wrong"),
    "ucx-2434-roce-gid0-retry-exceeded": (
        "the stored paste ends after the first result row of osu_ialltoall, before the 'Transport retry count "
        "exceeded' line of the thread's title: nothing in it failed, and UCX_IB_GID_INDEX=0 on the command line is "
        "not wrong by itself"),
    "nccl-nccl-304-plx-acs-cut-before-results": (
        "the stored paste ends in Open MPI's openib warnings, before all_reduce_perf printed anything: no line shows "
        "the ACS on the PLX switch that the thread found; explain says no run completed (unknown), with no candidate"),
    "rdmacore-1039-efa-mac-args": (
        "IndexError in rdma-core's tests/base.py _select_config() ('self.mac_addr = args[4]'): the test program's own "
        "argument list; nothing in the paste is an RDMA message, and the IndexError alone is not read as a cause"),
    "rdmacore-hns-raw-qp-einval": (
        "pyverbs 'Failed to create QP. Errno: 22' with no provider named in the paste: EINVAL is ranked "
        "device-limit-exceeded first and driver-bug (libhns returning EINVAL for an unsupported QP type, rdma-core "
        "fd8020e) second; the paste cannot tell them apart"),
    "fastswap-4-queue-count-mismatch": (
        "fastswap_rdma's 'cm_handler msg: rejected (8) status 28' is an rdma_cm REJECTED with IB CM reason 28 "
        "(consumer-defined: the rmserver program refused the connection); that the server was built for fewer queues "
        "than the client's online CPUs is only the reporter's closing comment, nothing in the dmesg shows the counts"),
    "rlib-4-path-mtu-4096": (
        "one rlib 'poll till completion error: 12 transport retry counter exceeded' line with no device listing: "
        "rlib's hardcoded path MTU 4096 above the port's active MTU 1024 came from the reporter's ibv_devinfo in the "
        "thread, not the paste; mtu-mismatch is among the ranked candidates"),
    "amzn-drivers-308-efa-mofed-headers": (
        "only the EFA probe lines and a '[ cut here ]' were readable: nothing in the paste shows the module was built "
        "against MLNX_OFED's ofa_kernel headers (no build path, no WARNING line or trace), so "
        "kernel-module-build-mismatch cannot be read from it"),
    "rr-361-sa6400-mlxfw-missing": (
        "mlx5_core's firmware version line inside DSM and a healthy probe in the loader; no line shows the missing "
        "mlxfw module (no 'Unknown symbol', no modprobe error), only the absent eth the thread describes"),
    "azhpc-images-154-an-rate-40-healthcheck": (
        "azhpc-images' old test-ib.sh counted the Accelerated Networking Ethernet VF (mlx5_an0, 40 Gb/s) as an IB "
        "port; the paste holds only the script's verdict, no ibstatus, so rdmadoctor cannot call it healthy: a "
        "warning symptom that ranks benign-warning before link-rate-low and asks for ibstatus per port"),
    "dspark-pr95-healthy-gid3": (
        "NCCL init-only lines with no completed collective: nothing in the paste is a result, so never ok"),
    "dsv41-14-reg-mr-enomem-kernel": (
        "ENOMEM from ibv_reg_mr_iova2 was a kernel pinning defect per the thread; nothing in the paste tells it from "
        "memlock-limit, which is ranked first"),
    "cscs-nccl-tests-cxi-hook-disabled-slow": (
        "a completed 2-node nccl-tests run (0 wrong, 1.59 GB/s average bus bandwidth) with no NCCL INFO lines: "
        "without the transport NCCL chose (NET/Socket vs the OFI plugin) or an expected bandwidth, nothing in the "
        "paste tells a path without the fabric from a healthy one; the 19.8 GB/s comparison is only in CSCS's prose"),
    "aws-ofi-nccl-20-efa-eq-fork": (
        "a one-line EFA 'Unable to write to EQ' (EIO, prov_errno -114) that names no fork; the thread tied it to "
        "DataLoader's fork start method; fork-unsafe is a ranked candidate, first only with a fork line "
        "(OFI-EFA-FORK-ABORT)"),
    "khiops-307-psm3-fi-endpoint": (
        "the same Open MPI fi_endpoint EINVAL help block as libfabric#6710, which is labelled failure/high; "
        "mtl_ofi_component_init() returns NULL after it, so Open MPI falls back to another PML, but the paste cannot "
        "show whether the job went on (khiops exited 0)"),
    "nccl-1043-nvls-fm-multicast-team-dual-port": (
        "nv-fabricmanager's 'failed to find the GPU handle ... in the multicast team request setup' comes from "
        "closed source whose log format no public document shows; the thread's NCCL dual-port NVLS defect is not "
        "in the paste"),
    "nccl-1612-bootstrap-closed-before-magic": (
        "without the NCCL release the trail's socket.cc lines cannot be read as socketFinalizeAccept(); the "
        "symptom ranks firewall-blocks-port (what connects) before library-bug (2.27.3 stops failing on it)"),
    "ucx-3611-ucp-init-no-such-device": (
        "'ucp_init(): No such device' is the reporter's own test program printing a status, not a line of UCX; "
        "UCS_ERR_NO_DEVICE alone cannot tell UCX_TLS/device selection from the master regression"),
    "magic-castle-136-selinux-ibv-devices": (
        "only user01's empty ibv_devices table from an ordinary user's prompt: no listing in the paste shows the "
        "device (the admin's view is only in the thread's prose), so VERBS-NO-DEVICE keeps device-permission-denied "
        "after the usual candidates; VERBS-NO-DEVICE-UNPRIVILEGED ranks it first only when another listing shows "
        "the device"),
    "rxe-dev-46-devinfo-healthy": (
        "a healthy rxe0 ibv_devinfo (PORT_ACTIVE) alone: a device listing is not evidence of a working path (no "
        "program ran), so rdmadoctor says unknown, never ok"),
    "mercury-596-fi-tsend-ebadf": (
        "Mercury NA OFI's 'fi_tsend() failed, rc: -9 (Bad file descriptor)' is read (MERCURY-OFI-CALL-FAILED), but "
        "EBADF alone cannot name the author's own I/O-interception layer: application-bug is a candidate, not first"),
    "ucx-py-344-sockcm-badfd-known": (
        "UCX 1.7 sockcm's 'send(fd=-1) failed: Bad file descriptor' in a run that worked, which the maintainer called "
        "a known issue; UCX's source has not shown it to be a harmless teardown print, so rdmadoctor claims nothing"),
    "spark-rapids-2474-ucp-listener-binds": (
        "only UCX DEBUG 'created a TCP listener' lines on consecutive ports: the plugin's retry loop shows only by "
        "counting listeners, and no general rule tells it from a program that wants several"),
    "pytorch-73790-iommu-p2p-hang": (
        "a one-host hang that the IOMMU caused, but the paste shows no one-host evidence (NCCL 2.10 prints no nNodes "
        "line and the copy stops after the second rank's Bootstrap line, before any P2P or channel line); its socket "
        "interface list reads as nccl#697's two-host case, whose fix was NCCL_SOCKET_IFNAME"),
    "pytorch-20313-nccl242-unhandled-system": (
        "a bare 'unhandled system error' from ProcessGroupNCCL.cpp with no NCCL WARN and no NCCL version: the fix "
        "(PyTorch 1.2 with NCCL 2.4.8) is in a sibling thread, and nothing in the paste ties it to a defect of NCCL "
        "2.4.2, so it stays the unhandled-system-error symptom asking for NCCL_DEBUG=INFO"),
    "lightning-4420-ib-disable-healthy": (
        "labelled healthy by its thread, but the paste ends mid-init (two P2P channel lines, no 'Init COMPLETE', no "
        "result): it holds no evidence of health, so rdmadoctor says unknown, never ok"),
    "dstack-2712-ib-after-ibverbs-install": (
        "labelled healthy by its thread (IB in use after libibverbs was installed), but the paste ends at 'Init "
        "START' and the plugin lookup: no evidence of health, so rdmadoctor says unknown, never ok"),
    "fds-5701-dapl-memlock-torque": (
        "the same two 'DAPL startup: RLIMIT_MEMLOCK too small' lines as firemodels/fds#6023, whose job failed: here "
        "the reporter's job ran on (Intel MPI fell back), which the paste does not show, so rdmadoctor names "
        "memlock-limit as a failure where the thread's status is a warning"),
    "nccl-697-docker-bridge-ifname": (
        "the stored paste stops before the ncclSystemError the thread reports: NCCL's socket list with docker bridges "
        "and veth link-local interfaces gives wrong-transport-selection (medium) as a warning, not a failure, since "
        "the failing line is not in the paste"),
    "nccl-tests-24-ib-write-bw-rcm-ok": (
        "the server's paste ends at the result header (the copy dropped the rows); a run that hung there looks the "
        "same, so rdmadoctor says unknown with a hang's candidates and asks for the rest, never ok; that it finished "
        "is only the reporter's word"),
    "rxe-dev-79-pingpong-gid0-ipv6-gone": (
        "the paste ends at the `ibv_rc_pingpong -g 0` command: the failure lines and the GID table were cut; that GID "
        "0 (IPv6 link-local) went away with the interface's IPv6 address came from a contributor's comment, so "
        "rdmadoctor says unknown (no run completed)"),
    "awslibfabric-3-efa-no-fi-rma": (
        "the EFA release lacked FI_RMA, so fi_getinfo picked tcp;ofi_rxm; ps-lite's check line cannot tell an old EFA "
        "from no usable EFA, so PSLITE-FABRIC-NOT-EFA is a symptom ranking library-bug, wrong-transport-selection; "
        "the label (device-limit-exceeded) is the nearest slug for a provider without a capability"),
    "libfabric-6682-tcp-rxm-reconnect-regression": (
        "the two lines show only the first, expected refusal (ECONNREFUSED with a negative sign); 1.12.0's missing "
        "reconnect leaves no line of its own, so OFI-RXM-CONNREFUSED-NEGATIVE ranks server-not-running before "
        "library-bug and asks for the version"),
    "sglang-5709-ucp-version-incompatible": (
        "the paste shows only UCX's 'UCP version is incompatible' warning and a normal start-up; the blocked transfer "
        "the thread reports is not in it, so rdmadoctor says warning/library-build-mismatch, not failure (with an "
        "error in the same input it says failure: UCX-API-VERSION-MISMATCH-FAILED)"),
    "uccl-617-broadcom-cqe12": (
        "one UCCL EP 'CQE ERROR ... status=12' line: the same line was a link-local GID in uccl#799 (wrong-gid-index) "
        "and too many in-flight writes for Thor-2's flow control in uccl#617 (fixed in the library by #681); the paste "
        "cannot tell them apart, so the verdict is unknown with library-bug second"),
    "sparkrdma-26-hostname-nonroce-ip": (
        "the paste ends before DiSNI's resolveAddr line with the non-RoCE IP (the thread describes it only in prose); "
        "the DiSNI/RdmaNode start-up lines that are pasted hold no error, so rdmadoctor says unknown (not ok)"),
    "daskcuda-1165-managed-mem-endpoint-timeout": (
        "UCX-Py's 'Endpoint timeout' says UCX gave up on the peer; a peer that exited first (the paste itself shows "
        "the scheduler removing that worker) ends the same way, so rdmadoctor ranks peer-process-exited first and "
        "library-bug second; that RMM managed memory needed UCX >= 1.14 with Dask-CUDA 23.04 came from the "
        "maintainer, not from the log"),
    "nccl-tests-libfabric-8963-tcp-rdm-hang": (
        "five nccl-tests rows and nothing after them: rdmadoctor says the table stops without nccl-tests' summary "
        "(the run hung or died there, or the paste was cut), with library-bug among the candidates; that libfabric's "
        "tcp rdm endpoint hangs came from the reporter's comparison with tcp;ofi_rxm, not from the rows"),
    "k8s-shared-dev-plugin-106-old-image": (
        "'Did not detect devices' only says libibverbs listed no device; from this log alone rdmadoctor stays "
        "'unknown' and lists userspace-kernel-mismatch among the candidates (with `check` facts it can tell); the "
        "thread established an old rdma-core in the container"),
    "perftest-perftest-393-grh-required-rtr": (
        "only 'Failed to modify QP N to RTR' twice, without header, command line or device: the port's "
        "IBV_QPF_GRH_REQUIRED (which perftest ignores) is not in the paste, so rdmadoctor stays 'unknown' with "
        "the RTR candidates; with the header (Link type IB, no -x) PT-RTR-IB-NO-GRH names perftest-bug first"),
    "kernel-librxe-dev-9-rdma-rxe-not-found-old-kernel": (
        "the paste is modprobe's 'Module rdma_rxe not found': a missing module (kernel-module-missing) is what it "
        "says; that the kernel carried the module under its old name ib_rxe came from modinfo in a later comment"),
    "libfabric-libfabric-12708-efa-unopenable-device": (
        "EFA's device listing failed; that this was a provider defect (library-bug) is not in the log"),
    "libfabric-libfabric-9900-pingpong-second-nic-enodata": (
        "fi_getinfo -61 alone; the same line in libfabric-fabtests-802 had a missing IPoIB address: the paste "
        "cannot tell a provider defect from the setup, so the verdict is unknown with both candidates"),
    "nccl-nccl-1676-gdr-disabled-old-nccl": (
        "'GPU Direct RDMA Disabled' without the NCCL version: NCCL <= 2.22.3 not detecting nvidia_peermem (the "
        "thread) looks the same as a missing peermem module (nccl-1939); library-bug is the second candidate"),
    "nccl-nccl-1524-access-violation-mtu-differs": (
        "an access violation and a flushed receive (vendor err 249) without either host's MTU in the paste: NCCL "
        "2.20-2.28 with port MTUs that differ (the thread) and GPU-NIC peer-to-peer blocked by ACS end the same way; "
        "rdmadoctor says unknown with mtu-mismatch second, after pcie-acs-enabled"),
    "nccl-nccl-709-status12-mtu-after-rate-limit": (
        "one 'error 12' line: retry exceeded has several causes (GID index, MTU, loss); the MTU was found by the "
        "reporter on the hosts, not in the paste; mtu-mismatch is among the ranked candidates"),
    "nccl-nccl-799-modify-qp-enodev-exclude-hca": (
        "ENODEV from ibv_modify_qp says the GID's netdev is not this process's; the thread fixed it by excluding "
        "the HCA (wrong-transport-selection, second candidate) without finding out why it was unusable"),
    "mpich-mpich-7853-efa-rma-get-regression": (
        "MPICH's OFI poll failure with Invalid argument on EFA, stack abbreviated by hand: that it is an MPICH 5.x "
        "regression (library-bug) was found by bisecting releases, which the two lines do not show; rdmadoctor says "
        "unknown with library-bug among the candidates"),
    "perftest-perftest-26-couldnt-allocate-mr-contig-regression": (
        "'Couldn't allocate MR' as root: a perftest regression (the thread bisected the perftest tree) prints the same "
        "as a device or driver refusing the registration; the bisect lines beside it do not say which tree was "
        "bisected, and named the wrong commit, so rdmadoctor stays 'unknown' with the registration candidates"),
    "verbs-tools-lore-20210222-rc-pingpong-couldnt-create-cq": (
        "'Couldn't create CQ' alone; a kernel update fixed it (userspace-kernel-mismatch, among the candidates)"),
    "ksmbd-609-mlx5-post-send-crash": (
        "ksmbd debug lines and a bare 'Modules linked in:' list: the oops header and frames (the fault in "
        "mlx5_ib_post_send the maintainer named) are not in the paste, so nothing shows a crash or which driver "
        "faulted"),
    "mercury-297-iface-vs-domain": (
        "CaRT's 'crt_na_ofi_config_init() no IP addr found.' only says no interface of the OFI_INTERFACE name has an "
        "IPv4 address (crt_init.c): the line cannot tell a device name given as OFI_INTERFACE (wrong-device-name, "
        "first) from the Mercury/CaRT limitation of mercury#297 (library-bug, third)"),
    "mooncake-1143-e810-modify-qp-init": (
        "only ifconfig and ibstat of a healthy Active irdma port: Mooncake's '[Handshake] Failed to modify QP to "
        "INIT' line was not in the stored paste, so nothing in it is a failure"),
    "spdk-3300-e810-inbox-irdma-freeze": (
        "an SPDK autotest that hangs after 'NVMe/RDMA Target Listening' with no error line: that the inbox ice/irdma "
        "drivers caused the freeze is only the maintainer's comparison with the out-of-tree drivers"),
    "ompi-users-2009-8599-retry-exceeded-default-timeout": (
        "the 1.3.0/1.3.1 ACK-timeout defect is in the thread, not the paste: the help text's '(defaulted to 10)' is "
        "the same static text in v1.2.9-v1.4.5, so no line shows the release; rdmadoctor stays unknown with the "
        "retry-exceeded candidates"),
    "ompi-faq-default-gid-prefix": (
        "the same [default subnet prefix] warning is benign-warning (high) in ompi-users-2007-4626 and "
        "cross-rail-connection in the FAQ; the paste cannot tell one fabric from separate ones, so the symptom ranks "
        "benign-warning first and cross-rail-connection second"),
    "users-2015-10-27881-sriov-multi-vf": (
        "the paste shows only RETRY EXCEEDED with Local device mlx4_14; that every SR-IOV VF is visible in the "
        "containers (the thread's cause) is not in the log, only a high device index"),
    "siw-provider-wrong-match": (
        "the paste is the reporter's own debug prints from an instrumented rdma-core, not any stock program's "
        "output"),
    "rdmacm-loopback-enodev": (
        "the only log is a healthy ibv_devinfo; the rdma_create_ep ENODEV for 127.0.0.1 is in the reporter's prose "
        "only"),
    "ompi-underworld2-223-fork-warning-import": (
        "the same fork() warning block is labelled fork-unsafe in pyaesar-readme-ompi-fork-warning; Open MPI's text "
        "warns of memory corruption, so the symptom ranks fork-unsafe first and benign-warning second; the paste "
        "cannot show whether the children exec at once"),
    "spdk-414-port-error-segfault": (
        "the paste ends where the queue pair moved to IBV_QPS_ERR after 'Async event: port error' and a status-12 "
        "completion; the segfault in SPDK's error handling the thread is about is not in it, so port-down is what the "
        "paste shows"),
    "ceph-13680-rados-bench-ok": (
        "rados bench output cut after each bench's first second: no summary and nothing showing the async+rdma "
        "messenger, so nothing shows a run completed over RDMA, and rdmadoctor rightly does not say ok"),
    "azurebuildcentos-92-nc24rsv3-no-mlx-vf": (
        "an lspci listing that lacks the Mellanox virtual function: only the VM size (Standard_NC24rs_v3, known from "
        "the thread) says one should be there, and the kernel defect that hid it is named nowhere in the paste"),
    "ompi-6795-efa-sg-egress-hang": (
        "Open MPI's component-selection lines and then nothing: the job hung without an error, and the missing "
        "security-group egress rule the thread found leaves no trace in the output"),
    "nixpkgs-212220-libfabric117-mpi4py-segfault": (
        "the stored paste ends before mpi4py's segfault: only hwloc's sysfs notices, a UCX opendir(/sys/class/net) "
        "error from the Nix sandbox and mpi4py's version lines; the libfabric 1.17 / Open MPI btl/ofi crash the label "
        "rests on is not in it"),
    "nccl-1538-roce-version-num-segv": (
        "a proxy Connect failure and a segfault in NCCL's frames: the GID auto-selection defect the thread found "
        "(NCCL_IB_ROCE_VERSION_NUM, sparse GID tables in pods) shows in no line; library-bug is among the candidates"),
    "ompi-users-25923-registerable-memory-false-warning": (
        "Open MPI's 'registering part of your physical memory' warning: that 1.8.1's calculate_max_reg() misread the "
        "newer mlx4 driver's parameters (a false positive) is the maintainers' finding, not something the text shows"),
    "ompi-users-3077-system-call-fork-ofed11": (
        "openib's LOCAL LENGTH ERROR alone: that the program called system() on OFED 1.1 is the thread's, not the "
        "paste's; fork-unsafe is among the candidates"),
    "ompi-users-7812-sge-memlock-32k": (
        "the 32 KB memlock warning and openib's device-init warning name memlock-limit, as a warning: whether the "
        "hello world then failed (the label) or ran over TCP is not in the paste"),
    "rccl-1303-pxn-off-cross-subnet-qp": (
        "one line, 'NCCL WARN Call to ibv_modify_qp failed with error', cut before the errno: the per-NIC subnets and "
        "PXN off that the reporter found are not in it"),
}


def _meta(fixture: Path) -> dict:
    with open(fixture / "meta.toml", "rb") as fh:
        return tomllib.load(fh)


def _logs(fixture: Path) -> list[Path]:
    return [fixture / n for n in LOG_NAMES if (fixture / n).is_file()]


@functools.lru_cache(maxsize=None)
def _explain(fixture: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "rdmadoctor", "explain", "--json", *map(str, _logs(fixture))],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1, 2, 3), f"exit {proc.returncode}\nstderr:\n{proc.stderr}"
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - reported as the failure
        raise AssertionError(f"not JSON ({exc}); stderr:\n{proc.stderr}\nstdout:\n{proc.stdout[:2000]}")


def _param(fixture: Path, with_misses: bool):
    marks = []
    if with_misses and fixture.name in KNOWN_MISSES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[fixture.name]))
    return pytest.param(fixture, id=fixture.name, marks=marks)


def test_corpus_is_well_formed():
    assert len(FIXTURES) >= 150
    slugs = set()
    from rdmadoctor.knowledge import causes
    slugs.update(causes.slugs())
    for fixture in FIXTURES:
        meta = _meta(fixture)
        assert _logs(fixture), f"{fixture.name}: no server.log/client.log/paste.log"
        for key in ("source", "title", "retrieved", "producer", "what_happened", "expected_cause", "expected_status",
                    "confidence_of_label", "notes"):
            assert key in meta, f"{fixture.name}: meta.toml lacks {key}"
        assert meta["source"].startswith("https://"), fixture.name
        assert meta["expected_status"] in ("ok", "warning", "failure", "unknown"), fixture.name
        assert meta["confidence_of_label"] in ("high", "medium", "low"), fixture.name
        assert meta["expected_cause"] in slugs | {"none", "unknown"}, f"{fixture.name}: {meta['expected_cause']}"
        if meta["expected_cause"] == "none":
            assert meta["expected_status"] == "ok", fixture.name
    assert set(KNOWN_MISSES) <= {f.name for f in FIXTURES}


def test_fixture_links_stay_inside_the_repository():
    """A fixture that links to a folder outside the checkout (a probe's scratch copy) is missing on a clean one,
    so every link under fixtures/ (a recorded sysfs tree has many) must resolve inside the repository."""
    repo = REAL.parent.parent
    outside = [str(p.relative_to(repo)) for p in REAL.parent.rglob("*")
               if p.is_symlink() and not p.resolve().is_relative_to(repo)]
    assert outside == []


@pytest.mark.parametrize("fixture", [_param(f, with_misses=False) for f in FIXTURES])
def test_real_log_parses(fixture):
    meta = _meta(fixture)
    _, out = _explain(fixture)
    for inp in out.get("inputs", []):
        assert inp.get("decode_errors", 0) == 0, f"{fixture.name}: {inp}"
    if meta["expected_status"] == "failure":
        assert out["verdict"]["status"] != "ok", f"{fixture.name}: a failure called ok"


@pytest.mark.parametrize("fixture", [_param(f, with_misses=True) for f in FIXTURES])
def test_real_log_verdict(fixture):
    """Established causes: the first cause rdmadoctor names (the verdict's, or an unknown verdict's first ranked
    candidate) is the established one; otherwise nothing confident about another cause (tools/scorecard.py)."""
    case = _case(fixture)
    where = (f"{fixture.name}: verdict {case.status}/{case.cause}/{case.confidence}, causes named {case.ranked[:3]}, "
             f"label {case.meta['expected_status']}/{case.expected}/{case.meta['confidence_of_label']}")
    if case.established:
        assert case.top1, where
    assert not case.confident_wrong, where
    assert not case.failure_called_ok, where


@functools.lru_cache(maxsize=1)
def _scored():
    sys.path.insert(0, str(REAL.parent.parent / "tools"))
    import scorecard
    return {c.name: c for c in scorecard.cases()}, scorecard


def _case(fixture: Path):
    return _scored()[0][fixture.name]


def test_scorecard_on_the_whole_corpus():
    cases, scorecard = _scored()
    tally = scorecard.tallies(list(cases.values()))["all"]["all"]
    assert tally.established >= 80
    assert set(tally.misses) == set(KNOWN_MISSES), f"misses {sorted(tally.misses)}"
    assert len(KNOWN_MISSES) <= 0.11 * tally.established
    assert tally.confident_wrong == 0 and tally.failure_called_ok == 0
