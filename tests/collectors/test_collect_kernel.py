"""kernel: modules, /dev/infiniband, kernel config and the RDMA lines of the kernel log."""
import pytest

from collect_helpers import section, tree
from rdmadoctor.collectors import collect_facts
from rdmadoctor.collectors import kernel as K


def kernel_of(name, **kw):
    return section(collect_facts(tree(name, **kw), only=["kernel"]), "kernel")


@pytest.mark.parametrize("rel, release", [("bookworm", "6.1.0-50-amd64"), ("trixie", "6.12.117+deb13-amd64")])
def test_rxe_lab_tree(rel, release):
    sec = kernel_of(f"{rel}-rxe-active")
    data = sec["data"]
    assert data["release"] == release
    for m in ("ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm", "rdma_rxe"):
        assert data["rdma_modules"][m] is True, m
    assert data["rdma_modules"]["ib_umad"] is False          # not loaded in the lab
    assert "rdma_rxe" in data["modules"]
    assert {d["path"]: d["mode"] for d in data["dev_infiniband"]} == {
        "/dev/infiniband/rdma_cm": "0666", "/dev/infiniband/uverbs0": "0666"}
    assert data["config"]["CONFIG_INFINIBAND"] == "m" and data["config"]["CONFIG_RDMA_RXE"] == "m"
    assert data["config_source"] == f"/boot/config-{release}"
    # the saved tree has no kernel log: said so, never an empty "no errors" log
    assert data["log"]["readable"] is False and data["log"]["lines"] == []
    assert any(u["what"] == "kernel log" for u in sec["unreadable"])
    assert data["rdma_netns_mode"] is None and any(u["what"] == "rdma netns mode" for u in sec["unreadable"])


def test_no_rxe_link_tree_still_has_modules():
    data = kernel_of("bookworm-no-rxe-link")["data"]
    assert data["rdma_modules"]["rdma_rxe"] is True and data["rdma_modules"]["ib_uverbs"] is True


def test_handmade_mlx5_kernel_log():
    data = kernel_of("handmade-mlx5-kernel-log")["data"]
    log = data["log"]
    assert log["source"] == "kmsg" and log["readable"] is True
    texts = [line["text"] for line in log["lines"]]
    assert log["total_records"] == 14 and len(texts) == 12
    assert not any("e1000e" in t or "systemd" in t for t in texts)
    errs = [line for line in log["lines"] if line["level"] in ("err", "crit")]
    assert any("mlx5_cmd_out_err" in line["text"] and "ACCESS_REG" in line["text"] for line in errs)
    assert any("health compromised" in line["text"] for line in errs)
    assert log["lines"][0]["ts"] == 2.413
    assert data["dmesg_restrict"] == 1
    assert data["rdma_modules"]["mlx5_ib"] is True and data["rdma_modules"]["mlx5_core"] is True


def test_parse_kmsg_continuations_and_levels():
    recs = K.parse_kmsg("3,7,1500000,-;mlx5_core 0000:3b:00.0: boom\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
                        "6,8,1600000,c;infiniband mlx5_0: ok\nnot a record\n")
    assert [(r["level"], r["seq"], r["ts"]) for r in recs] == [("err", 7, 1.5), ("info", 8, 1.6)]
    assert recs[0]["props"] == {"SUBSYSTEM": "pci", "DEVICE": "+pci:0000:3b:00.0"}


@pytest.mark.parametrize("text, hit", [
    ("infiniband rxe0: set active", True), ("rdma_rxe: loaded", True), ("mlx5_core 0000:3b:00.0: x", True),
    ("ib_srpt: y", True), ("irdma: z", True), ("bnxt_re: a", True), ("RoCEv2 frames", True),
    ("tsc: Detected 2596.134 MHz processor", False), ("Run /process_api as init process", False),
    ("e1000e eno1: NIC Link is Up", False), ("efa 0000:00:06.0: EFA device", True),
    ("ib_uverbs: module verification failed", True),
    # mm/util.c __vm_enough_memory() refusing perftest's buffer (Linux 6.12, a 2 GiB -s in a 1 GiB lab VM), and the
    # OOM killer naming perftest: other subsystems' lines about a program, not the RDMA stack
    ("__vm_enough_memory: pid: 1600, comm: ib_write_bw, bytes: 2147491840 not enough memory for the allocation", False),
    ("Out of memory: Killed process 4009 (ib_read_lat) total-vm:2101272kB", False),
])
def test_log_filter(text, hit):
    assert bool(K.LOG_PATTERN.search(text)) is hit


def test_modules_file_absent_means_no_module_support(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.18.0\n")
    from rdmadoctor.collectors.base import CollectContext
    sec = section(collect_facts(CollectContext(root=tmp_path, live=False), only=["kernel"]), "kernel")
    assert sec["data"]["modules_supported"] is False and sec["data"]["modules"] == []
    assert sec["data"]["rdma_modules"]["ib_core"] is False
