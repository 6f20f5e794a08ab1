"""devices: real rxe trees from the Soft-RoCE lab (bookworm, trixie), hand-written IB/mlx5 trees, the pyverbs
merge on a probe output recorded in the lab, and pyverbs/sysfs agreement recorded live in both guests."""
import re

import pytest

from collect_helpers import FACTS, SYSFS, load_json, section, tree
from rdmadoctor.collectors import collect_facts
from rdmadoctor.collectors import devices as D
from rdmadoctor.collectors.base import CollectContext

RELEASES = ("bookworm", "trixie")


def devices_of(name, **kw):
    facts = collect_facts(tree(name, **kw), only=["devices"])
    return section(facts, "devices")


def ibv_devinfo(name):
    """Port facts printed by `ibv_devinfo -v` on the same host when the tree was recorded."""
    text = (SYSFS / name / "commands" / "ibv_devinfo-v.txt").read_text()
    out = {"state": re.search(r"state:\s+PORT_(\w+)", text).group(1),
           "phys_state": re.search(r"phys_state:\s+(\w+)", text).group(1),
           "link_layer": re.search(r"link_layer:\s+(\w+)", text).group(1),
           "node_guid": re.search(r"node_guid:\s+(\S+)", text).group(1),
           "gids": re.findall(r"GID\[\s*(\d+)\]:\s+([0-9a-fA-F:.]+),?\s*(RoCE v\d)?", text)}
    return out


@pytest.mark.parametrize("rel", RELEASES)
def test_rxe_active_tree(rel):
    sec = devices_of(f"{rel}-rxe-active")
    assert sec["source"] == "sysfs"
    data = sec["data"]
    assert data["rdma_subsystem"] is True and data["uverbs_devices"] == ["uverbs0"]
    (dev,) = data["devices"]
    assert dev["name"] == "rxe0" and dev["driver"] == "rxe" and dev["parent"] == "eth0"
    assert dev["node_type"] == "CA" and dev["transport"] == "InfiniBand"
    assert dev["pci"] is None and dev["netdevs"] == ["eth0"] and dev["uverbs"] == "uverbs0"
    (port,) = dev["ports"]
    assert (port["state"], port["phys_state"], port["link_layer"]) == ("ACTIVE", "LinkUp", "Ethernet")
    assert port["netdev"] == "eth0" and port["netdev_mtu"] == 1500
    assert port["gid_tbl_len"] == 1024
    assert port["gids"] == [
        {"index": 0, "gid": "fe80::5054:ff:fe00:101", "type": "RoCE v2", "netdev": "eth0"},
        {"index": 1, "gid": "::ffff:192.0.2.1", "type": "RoCE v2", "netdev": "eth0", "ipv4": "192.0.2.1"}]
    assert "sent_pkts" in port["hw_counters"] and "lifespan" not in port["hw_counters"]
    assert port["counter_deltas"] is None                 # a saved tree: one sample, no deltas
    # caps and MTUs need verbs: null and said so, never guessed
    assert dev["max_qp"] is None and port["active_mtu"] is None
    assert sec["status"] == "partial"
    assert any("device capabilities" in u["what"] for u in sec["unreadable"])


@pytest.mark.parametrize("rel", RELEASES)
def test_sysfs_matches_ibv_devinfo_recorded_on_the_same_host(rel):
    name = f"{rel}-rxe-active"
    want = ibv_devinfo(name)
    (dev,) = devices_of(name)["data"]["devices"]
    port = dev["ports"][0]
    assert port["state"] == want["state"]
    assert port["phys_state"].upper() == want["phys_state"].upper().replace("_", "")
    assert port["link_layer"] == want["link_layer"]
    assert dev["node_guid"] == want["node_guid"]
    gids = [(int(i), g) for i, g, _ in want["gids"]]
    assert [(g["index"], D.canonical_gid(g["gid"])[0]) for g in port["gids"]] == \
           [(i, D.canonical_gid(g)[0]) for i, g in gids]


def test_rxe_port_down_tree():
    (dev,) = devices_of("bookworm-rxe-port-down")["data"]["devices"]
    port = dev["ports"][0]
    assert (port["state"], port["state_code"], port["phys_state"]) == ("DOWN", 1, "Disabled")
    assert port["hw_counters"]["link_downed"] == 1


@pytest.mark.parametrize("rel", RELEASES)
def test_no_rxe_link_tree(rel):
    sec = devices_of(f"{rel}-no-rxe-link")
    assert sec["status"] == "ok"
    assert sec["data"]["devices"] == [] and sec["data"]["rdma_subsystem"] is True
    assert "loaded but has no device" in sec["reason"]


def test_handmade_ib_port_init_without_sm():
    (dev,) = devices_of("handmade-ib-init-no-sm")["data"]["devices"]
    assert dev["driver"] == "mlx5_core" and dev["pci"] == "0000:3b:00.0" and dev["numa_node"] == 0
    assert dev["fw_ver"] == "28.39.1002" and dev["board_id"] == "MT_0000000838"
    port = dev["ports"][0]
    assert (port["state"], port["phys_state"], port["link_layer"]) == ("INIT", "LinkUp", "InfiniBand")
    assert port["lid"] == 0 and port["sm_lid"] == 0
    assert port["rate"] == "100 Gb/sec (4X EDR)" and port["rate_gbps"] == 100.0
    assert port["gids"] == [{"index": 0, "gid": "fe80::c42:a103:aa:bbcc", "type": "IB", "netdev": None}]
    assert port["netdev"] == "ib0" and port["netdev_mtu"] == 2044
    assert port["counters"]["symbol_error"] == 0


def test_handmade_mlx5_roce_gids():
    (dev,) = devices_of("handmade-mlx5-pcie-degraded")["data"]["devices"]
    gids = dev["ports"][0]["gids"]
    assert [(g["index"], g["type"], g.get("ipv4")) for g in gids] == [
        (0, "IB/RoCE v1", None), (1, "RoCE v2", None), (2, "IB/RoCE v1", "10.0.0.1"), (3, "RoCE v2", "10.0.0.1")]
    assert dev["netdevs"] == ["ens1f0np0"]


def test_no_sysfs_at_all(tmp_path):
    sec = section(collect_facts(CollectContext(root=tmp_path, live=False), only=["devices"]), "devices")
    assert sec["status"] == "unavailable" and "sysfs" in sec["reason"]


@pytest.mark.parametrize("text, gbps", [("100 Gb/sec (4X EDR)", 100.0), ("2.5 Gb/sec (1X SDR)", 2.5),
                                         ("400 Gb/sec (4X NDR)", 400.0), ("", None), (None, None)])
def test_rate_gbps(text, gbps):
    assert D.rate_gbps(text) == gbps


# -- pyverbs, recorded in the lab -------------------------------------------------------------------------

def lab(rel, name):
    return load_json(FACTS / "lab" / rel / name)


@pytest.mark.parametrize("rel", RELEASES)
def test_merge_of_recorded_pyverbs_probe(rel, monkeypatch):
    """The probe's JSON (recorded by verbs_probe.py inside the guest) merged over the sysfs tree of that guest."""
    probe = lab(rel, "verbs-probe.json")
    assert probe["available"] is True
    monkeypatch.setattr(D, "run_verbs_probe", lambda ctx, timeout=15.0: probe)
    ctx = tree(f"{rel}-rxe-active")
    ctx.live = True                        # let the collector ask for verbs; it reads the saved tree all the same
    ctx.sample_seconds = 0
    data = D.collect(ctx)
    (dev,) = data["devices"]
    assert dev["source"] == "pyverbs" and dev["verbs_visible"] is True and "disagreements" not in dev
    assert dev["max_qp"] > 0 and dev["max_cqe"] > 0 and dev["max_sge"] > 0 and dev["vendor_id"] == 0xffffff
    port = dev["ports"][0]
    assert port["active_mtu"] == 1024 and port["max_mtu"] == 4096     # rxe on a 1500-byte netdev
    assert [g["type"] for g in port["gids"]] == ["RoCE v2", "RoCE v2"]
    assert ctx.source == "pyverbs+sysfs"


def test_device_seen_by_sysfs_but_not_by_verbs(monkeypatch):
    monkeypatch.setattr(D, "run_verbs_probe",
                        lambda ctx, timeout=15.0: {"available": True, "version": None, "devices": []})
    ctx = tree("bookworm-rxe-active")
    ctx.live, ctx.sample_seconds = True, 0
    (dev,) = D.collect(ctx)["devices"]
    assert dev["verbs_visible"] is False and dev["source"] == "sysfs"


def test_pyverbs_import_error_falls_back_to_sysfs(monkeypatch):
    monkeypatch.setattr(D, "run_verbs_probe", lambda ctx, timeout=15.0: {
        "available": False, "error_kind": "import", "error": "No module named 'pyverbs'"})
    ctx = tree("trixie-rxe-active")
    ctx.live, ctx.sample_seconds = True, 0
    data = D.collect(ctx)
    assert data["pyverbs"]["available"] is False and data["devices"][0]["source"] == "sysfs"
    assert any("No module named 'pyverbs'" in u["why"] for u in ctx.unreadable_list)


def test_verbs_probe_on_this_host_never_raises():
    res = D.run_verbs_probe(CollectContext(), timeout=20)
    assert isinstance(res, dict) and "available" in res
    if not res["available"]:
        assert res["error"]


# fields that must agree between the pyverbs path and the sysfs path on the same host
PORT_KEYS = ("state", "phys_state", "link_layer", "lid", "sm_lid", "gid_tbl_len", "netdev")


@pytest.mark.parametrize("rel", RELEASES)
def test_pyverbs_and_sysfs_agree_on_the_same_host(rel):
    """Recorded live in the guest: `check` facts with pyverbs, and again sysfs-only, minutes apart."""
    with_verbs = section(lab(rel, "facts-root.json"), "devices")
    sysfs_only = section(lab(rel, "facts-root-sysfs.json"), "devices")
    assert with_verbs["source"] == "pyverbs+sysfs" and sysfs_only["source"] == "sysfs"
    assert with_verbs["data"]["pyverbs"]["available"] is True
    (a,) = with_verbs["data"]["devices"]
    (b,) = sysfs_only["data"]["devices"]
    assert "disagreements" not in a
    for key in ("name", "node_type", "transport", "driver", "node_guid", "sys_image_guid", "netdevs", "pci"):
        assert a[key] == b[key], key
    for pa, pb in zip(a["ports"], b["ports"]):
        for key in PORT_KEYS:
            assert pa[key] == pb[key], key
        assert pa["gids"] == pb["gids"]
    assert b["max_qp"] is None and a["max_qp"] == 1048560


@pytest.mark.parametrize("rel", RELEASES)
def test_live_counter_deltas_were_sampled(rel):
    (dev,) = section(lab(rel, "facts-root.json"), "devices")["data"]["devices"]
    port = dev["ports"][0]
    assert port["delta_seconds"] >= 1.0
    assert set(port["counter_deltas"]) >= {"sent_pkts", "rcvd_pkts"}
