"""netlink, limits, ports, pci, versions: fixture trees, recorded lab facts, and live loopback-only checks."""
import os
import socket
from pathlib import Path

import pytest

from collect_helpers import FACTS, load_json, section, tree
from rdmadoctor.collectors import collect_facts
from rdmadoctor.collectors import ports as P
from rdmadoctor.collectors.base import CollectContext

LAB = FACTS / "lab"


def one(ctx, name):
    return section(collect_facts(ctx, only=[name]), name)


# -- netlink ------------------------------------------------------------------------------------------------

def test_netlink_from_a_saved_tree_uses_sysfs():
    sec = one(tree("bookworm-rxe-port-down"), "netlink")
    assert sec["status"] == "partial" and sec["source"] == "sysfs"
    eth0 = [link for link in sec["data"]["links"] if link["ifname"] == "eth0"][0]
    assert eth0["operstate"] == "DOWN" and eth0["admin_up"] is False and eth0["mtu"] == 1500
    assert {u["what"] for u in sec["unreadable"]} == {"addresses", "routes", "neighbours", "qdiscs"}


def test_netlink_live_loopback_peer():
    pytest.importorskip("pyroute2")
    sec = one(CollectContext(peer="127.0.0.1"), "netlink")
    assert sec["status"] == "ok", sec
    data = sec["data"]
    lo = [link for link in data["links"] if link["ifname"] == "lo"][0]
    assert lo["admin_up"] is True and lo["index"] == 1
    assert any(a["address"] == "127.0.0.1" and a["family"] == 4 for a in data["addresses"])
    assert data["peer"]["route"]["type"] == "local" and data["peer"]["route"]["ifname"] == "lo"


def test_netlink_reads_arp_ignore_for_all_and_each_netdev_with_an_ipv4_address():
    pytest.importorskip("pyroute2")
    data = one(CollectContext(), "netlink")["data"]
    holders = {a["ifname"] for a in data["addresses"] if a["family"] == 4}
    assert set(data["arp_ignore"]) == {"all"} | holders and "lo" in holders
    with open("/proc/sys/net/ipv4/conf/all/arp_ignore") as f:
        assert data["arp_ignore"]["all"] == int(f.read())


def test_arp_ignore_is_read_only_under_proc_sys_net_ipv4_conf_and_never_for_odd_names():
    from rdmadoctor.collectors import netlink
    asked = []

    class Reader:
        def read_int(self, path):
            asked.append(path)
            return 1
    addresses = [{"ifname": n, "family": 4} for n in ("eth0", "..", "a/b", "all", None)] + \
        [{"ifname": "eth1", "family": 6}]
    assert netlink._arp_ignore(Reader(), addresses) == {"all": 1, "eth0": 1}
    assert asked == ["/proc/sys/net/ipv4/conf/all/arp_ignore", "/proc/sys/net/ipv4/conf/eth0/arp_ignore"]
    assert netlink._arp_ignore(Reader(), None) is None


def test_pyroute2_api_loads_the_messages_without_the_whole_package_or_asyncio_and_leaves_it_importable():
    pytest.importorskip("pyroute2")
    code = ("import json, sys\n"
            "from rdmadoctor.collectors.netlink import pyroute2_api\n"
            "api = pyroute2_api()\n"
            "out = {'package_left': 'pyroute2' in sys.modules, 'ndb_loaded': 'pyroute2.ndb.main' in sys.modules,\n"
            "       'asyncio_loaded': 'asyncio' in sys.modules, 'iproute_loaded': 'pyroute2.iproute' in sys.modules,\n"
            "       'module': api.ifinfmsg.__module__, 'version': api.version}\n"
            "import pyroute2\n"
            "from pyroute2.netlink.rtnl.rtmsg import rtmsg\n"
            "out.update(same_class=rtmsg is api.rtmsg, has_ndb=hasattr(pyroute2, 'NDB'),\n"
            "           error_class=pyroute2.NetlinkError is api.NetlinkError)\n"
            "print(json.dumps(out))\n")
    import json
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["package_left"] is False and out["ndb_loaded"] is False
    assert out["asyncio_loaded"] is False and out["iproute_loaded"] is False
    assert out["module"] == "pyroute2.netlink.rtnl.ifinfmsg"
    assert out["same_class"] and out["error_class"] and out["has_ndb"]


def test_the_route_to_an_unreachable_peer_is_the_kernels_error(tmp_path):
    """In a network namespace of its own (only lo, down) the kernel has no route to 192.0.2.1: the peer's route is
    ENETUNREACH, read from the NLMSG_ERROR answer, and the dumps still end."""
    pytest.importorskip("pyroute2")
    import json
    import shutil
    import subprocess
    import sys
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a network namespace here")
    code = ("import json\n"
            "from rdmadoctor.collectors import CollectContext\n"
            "from rdmadoctor.collectors.netlink import collect\n"
            "print(json.dumps(collect(CollectContext(peer='192.0.2.1'))))\n")
    res = subprocess.run([unshare, "-n", sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [link["ifname"] for link in data["links"]] == ["lo"] and data["links"][0]["admin_up"] is False
    assert data["addresses"] == [] and data["routes"] == []
    assert data["peer"]["route"] == {"errno": 101, "error": "101: Network is unreachable"}


@pytest.mark.parametrize("rel, version", [("bookworm", "0.7.2"), ("trixie", "0.9.7")])
def test_netlink_recorded_in_the_lab(rel, version):
    data = section(load_json(LAB / rel / "facts-root.json"), "netlink")["data"]
    # bookworm was recorded before the collector asked importlib.metadata: Debian's 0.7.2 says "unknown"
    assert data["pyroute2"] in (version, "unknown")
    eth0 = [link for link in data["links"] if link["ifname"] == "eth0"][0]
    assert eth0["operstate"] == "UP" and eth0["mtu"] == 1500
    assert {"ifname": "eth0", "family": 4, "address": "192.0.2.1", "prefixlen": 24}.items() <= \
        [a for a in data["addresses"] if a["family"] == 4 and a["ifname"] == "eth0"][0].items()
    assert any(r["dst"] == "192.0.2.0/24" and r["ifname"] == "eth0" and r["prefsrc"] == "192.0.2.1"
               for r in data["routes"])
    peer = data["peer"]
    assert peer["route"]["ifname"] == "eth0" and peer["route"]["src"] == "192.0.2.1"
    assert peer["neighbour"]["dst"] == "192.0.2.2"         # no second VM answered: not reachable


# -- limits -------------------------------------------------------------------------------------------------

def test_limits_from_lab_tree():
    data = one(tree("trixie-rxe-active"), "limits")["data"]
    assert data["memlock"]["soft"] == 8388608 and data["cap_ipc_lock"] is True


def test_limits_conf_and_unlimited(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max locked memory         65536                unlimited            bytes     \n")
    (tmp_path / "proc/self/status").write_text("Name:\tx\nCapEff:\t0000000000000000\n")
    (tmp_path / "etc/security/limits.d").mkdir(parents=True)
    (tmp_path / "etc/security/limits.conf").write_text("# c\n*  soft  memlock  65536 # small\n@rdma - nofile 1\n")
    (tmp_path / "etc/security/limits.d/90-rdma.conf").write_text("@rdma  -  memlock  unlimited\n")
    (tmp_path / "etc/systemd").mkdir(parents=True)
    (tmp_path / "etc/systemd/system.conf").write_text("[Manager]\nDefaultLimitMEMLOCK=8M\n")
    sec = one(CollectContext(root=tmp_path, live=False), "limits")
    data = sec["data"]
    assert data["memlock"] == {"soft": 65536, "hard": None, "unit": "bytes"}
    assert data["cap_ipc_lock"] is False
    assert [(e["file"], e["line"], e["domain"], e["value"]) for e in data["limits_conf"]] == [
        ("/etc/security/limits.conf", 2, "*", "65536"),
        ("/etc/security/limits.d/90-rdma.conf", 1, "@rdma", "unlimited")]
    assert data["systemd_default_memlock"] == "8M"


def test_limits_live():
    data = one(CollectContext(), "limits")["data"]
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert data["memlock"]["soft"] == (None if soft == resource.RLIM_INFINITY else soft)


# -- ports --------------------------------------------------------------------------------------------------

def test_ports_live_loopback_listener():
    pytest.importorskip("psutil")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        sec = one(CollectContext(port=port), "ports")
        (listener,) = sec["data"]["tcp_listeners"]
        assert (listener["ip"], listener["port"]) == ("127.0.0.1", port)
        if os.geteuid() == 0:
            assert listener["pid"] == os.getpid() and listener["process"]
    finally:
        srv.close()


def test_ports_asks_psutil_for_owners_only_when_something_listens(monkeypatch):
    """psutil reads every process's descriptors to name a socket's owner: not done when /proc/net/tcp, where psutil
    finds the sockets, shows nobody listening on the ports asked about."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()                       # a port nothing listens on (bound a moment ago, so free)

    def refuse(ports):
        raise AssertionError("psutil asked")
    monkeypatch.setattr(P, "psutil_listeners", refuse)
    sec = one(CollectContext(port=port), "ports")
    assert sec["data"]["tcp_listeners"] == [] and sec["source"] == "/proc/net/tcp"
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        sec = one(CollectContext(port=srv.getsockname()[1]), "ports")
        assert sec["status"] == "unavailable" or "psutil failed (AssertionError" in " ".join(sec["data"]["notes"])
    finally:
        srv.close()


def test_only_the_processes_of_the_names_asked_are_read_beyond_their_name():
    from rdmadoctor.collectors.perftest_procs import processes_named
    read = []

    class Process:
        def __init__(self, pid, name):
            self.pid, self.info = pid, {"name": name}

        def as_dict(self, attrs, ad_value=None):
            read.append(self.pid)
            return {"pid": self.pid, "name": self.info["name"], "cmdline": [self.info["name"], "-d", "rxe0"],
                    "username": "root"}

    procs = [Process(1, "systemd"), Process(2, "ib_write_bw"), Process(3, "sshd"), Process(4, "rping")]
    found = [info for _, info in processes_named(("ib_write_bw", "rping"), lambda attrs: iter(procs))]
    assert [i["pid"] for i in found] == [2, 4] and read == [2, 4]
    assert found[0]["cmdline"] == ["ib_write_bw", "-d", "rxe0"] and found[0]["username"] == "root"

def test_ports_proc_net_tcp_fallback_on_lab_tree():
    listeners = P.proc_net_listeners(tree("bookworm-rxe-active"), [22, 18515])
    assert listeners == []                                   # nothing listened in the guest when recorded


@pytest.mark.parametrize("rel", ["bookworm", "trixie"])
def test_ports_recorded_in_the_lab(rel):
    root = load_json(LAB / rel / "ports-root.json")
    nobody = load_json(LAB / rel / "ports-nobody.json")
    (listener,) = root["data"]["tcp_listeners"]
    assert listener["port"] == 18515 and listener["process"] == "ib_write_bw" and listener["pid"]
    (n,) = nobody["data"]["tcp_listeners"]
    assert n["pid"] is None and nobody["status"] == "partial"     # seen, owner not visible: said so


# -- pci ----------------------------------------------------------------------------------------------------

def test_pci_degraded_handmade():
    (d,) = one(tree("handmade-mlx5-pcie-degraded"), "pci")["data"]["devices"]
    assert (d["current_gts"], d["max_gts"], d["current_width"], d["max_width"]) == (8.0, 16.0, 8, 16)
    assert d["bdf"] == "0000:3b:00.0" and d["numa_node"] == 0 and d["local_cpulist"] == "0-17,36-53"


def test_pci_rxe_is_virtual():
    data = one(tree("trixie-rxe-active"), "pci")["data"]
    assert data["devices"] == [] and data["virtual"] == ["rxe0"]


# -- versions -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel, rdma_core, perftest", [("bookworm", "44.0-2", "4.5+0.17-1"),
                                                       ("trixie", "56.1-1", "25.01.0+0.80-1")])
def test_versions_recorded_in_the_lab(rel, rdma_core, perftest):
    data = section(load_json(LAB / rel / "facts-root.json"), "versions")["data"]
    assert data["rdma_core"] == rdma_core and data["perftest"] == perftest and data["pyverbs"] == rdma_core
    assert data["perftest_protocol_version"]


def test_versions_live_never_guess(tmp_path):
    fake = tmp_path / "dpkg-query"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    sec = one(CollectContext(env={"PATH": str(tmp_path)}), "versions")
    data = sec["data"]
    assert data["rdma_core"] is None and data["sources"]["rdma_core"].startswith("dpkg-query: ")


def test_running_programs_of_the_names_asked_are_found_by_their_kernel_name(tmp_path):
    """Real processes named as perftest's tools (copies of sleep): found by /proc/PID/comm, a name longer than the
    kernel keeps (raw_ethernet_burst_lat) completed from the command line as psutil does, others passed over."""
    import shutil
    import subprocess
    from rdmadoctor.collectors.perftest_procs import processes_named
    sleep = shutil.which("sleep")
    if sleep is None:
        pytest.skip("no sleep binary")
    started = []
    try:
        for name in ("ib_write_bw", "raw_ethernet_burst_lat", "ib_write_bwx"):
            program = tmp_path / name
            shutil.copy(sleep, program)
            started.append(subprocess.Popen([str(program), "30"]))
        mine = {p.pid for p in started}
        found = {info["pid"]: info for _, info in processes_named(("ib_write_bw", "raw_ethernet_burst_lat"))
                 if info["pid"] in mine}
        assert sorted(i["name"] for i in found.values()) == ["ib_write_bw", "raw_ethernet_burst_lat"]
        assert all(i["cmdline"][1:] == ["30"] for i in found.values())
    finally:
        for p in started:
            p.kill()
            p.wait()
