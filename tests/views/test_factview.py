"""views/factview.py: the facts joined into the flat view fact rules read."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from rdmadoctor.knowledge import perftest
from rdmadoctor.views import factview


def section(data: Dict[str, Any], status: str = "ok") -> Dict[str, Any]:
    return {"status": status, "data": data}


def port(n: int = 1, netdev: str = "eth0", state: str = "ACTIVE", rate: float = 100.0, **kw: Any) -> Dict[str, Any]:
    return {"port": n, "state": state, "link_layer": "Ethernet", "netdev": netdev, "rate_gbps": rate,
            "gids": [{"index": 0, "gid": "fe80::1", "type": "RoCE v2"},
                     {"index": 3, "gid": "::ffff:192.0.2.1", "type": "RoCE v2", "ipv4": "192.0.2.1"},
                     {"index": 2, "gid": "::ffff:192.0.2.1", "type": "IB/RoCE v1", "ipv4": "192.0.2.1"}], **kw}


def facts(ports=None, links=None, addresses=None, limits=None, driver: str = "mlx5_core",
          host: Dict[str, Any] = None) -> Dict[str, Any]:
    sections = {
        "devices": section({"devices": [{"name": "mlx5_0", "driver": driver, "ports": ports or [port()]}]}),
        "netlink": section({"links": links if links is not None else
                            [{"ifname": "eth0", "admin_up": True, "operstate": "UP", "mtu": 9000}],
                            "addresses": addresses if addresses is not None else
                            [{"ifname": "eth0", "family": 4, "address": "192.0.2.1"},
                             {"ifname": "eth0", "family": 6, "address": "2001:db8::1"}]}),
    }
    if limits is not None:
        sections["limits"] = section(limits)
    return {"host": host or {}, "sections": sections}


def test_a_port_is_joined_with_its_netdev_and_addresses():
    (p,) = factview.build(facts())["ports"]
    assert p["label"] == "mlx5_0 port 1" and p["is_roce"] and not p["is_ib"]
    assert p["netdev_known"] and p["netdev_up"] is True and p["netdev_oper"] == "UP" and p["netdev_mtu"] == 9000
    assert p["netdev_ipv4"] == ["192.0.2.1"]                                # IPv4 only
    assert p["ipv4_gids"] == ["::ffff:192.0.2.1", "::ffff:192.0.2.1"]
    assert p["ipv4_v2_gids"] == ["3: ::ffff:192.0.2.1"]


def test_a_port_whose_netdev_is_not_among_the_links_is_not_known():
    (p,) = factview.build(facts(links=[]))["ports"]
    assert p["netdev_known"] is False and p["netdev_up"] is None and p["netdev_oper"] is None


def test_unreadable_sections_are_listed_with_their_reasons():
    f = facts()
    f["sections"]["kernel"] = {"status": "unavailable", "reason": "permission denied"}
    view = factview.build(f)
    assert view["readable"]["devices"] and not view["readable"]["kernel"]
    assert view["reasons"]["kernel"] == "permission denied"


@pytest.mark.parametrize("soft, exempt, below_default, below_all_sizes", [
    (64 * 1024, False, True, True),                  # 64 KiB: even the default test cannot pin its buffers
    (8 * 1024 * 1024, False, False, True),           # 8 MiB: enough for the default, not for -a
    (64 * 1024, True, False, False),                 # root or CAP_IPC_LOCK: the limit does not apply
    (None, False, False, False),                     # unlimited
])
def test_memlock_predicates(soft, exempt, below_default, below_all_sizes):
    limits = {"memlock": {"soft": soft, "hard": soft}, "cap_ipc_lock": exempt}
    memlock = factview.build(facts(limits=limits))["memlock"]
    assert memlock["below_default"] is below_default and memlock["below_all_sizes"] is below_all_sizes
    assert memlock["exempt"] is exempt and memlock["known"] is True
    assert memlock["unlimited"] is (soft is None)


def test_memlock_below_is_relative_to_what_perftest_pins():
    assert factview.memlock_below(perftest.DEFAULT_PIN - 1, False, perftest.DEFAULT_PIN)
    assert not factview.memlock_below(perftest.DEFAULT_PIN, False, perftest.DEFAULT_PIN)
    assert not factview.memlock_below(None, False, perftest.DEFAULT_PIN)


def test_root_is_exempt_from_memlock():
    view = factview.build(facts(limits={"memlock": {"soft": 65536}}, host={"is_root": True}))
    assert view["is_root"] and view["memlock"]["exempt"] and not view["memlock"]["below_default"]


def test_link_rate_is_the_one_rate_of_the_active_hardware_ports():
    assert factview.link_rate_gbps(factview.build(facts())) == 100.0
    two = facts(ports=[port(1, rate=100.0), port(2, netdev="eth1", rate=25.0)])
    assert factview.link_rate_gbps(factview.build(two)) is None                # which one the test used is unknown
    down = facts(ports=[port(1, rate=100.0), port(2, netdev="eth1", state="DOWN", rate=25.0)])
    assert factview.link_rate_gbps(factview.build(down)) == 100.0
    assert factview.link_rate_gbps(factview.build(facts(driver="rxe"))) is None   # Soft-RoCE's rate is nominal
    assert factview.link_rate_gbps(None) is None


def test_list_items_the_schema_cannot_type_are_skipped_not_read():
    """A peer's facts pass the schema with anything as a PCI device or a firewall verdict (no recorded host had
    one, so the schema leaves their items untyped); the view keeps the entries it can read."""
    f = facts()
    f["sections"]["pci"] = section({"devices": [None, "x", {"device": "mlx5_0", "bdf": "0000:3b:00.0",
                                                             "current_link_width": "x8", "max_link_width": "x16"}]})
    f["sections"]["firewall"] = section({"verdicts": [None, 7, {"proto": "udp", "port": 4791, "verdict": "drop"}]})
    view = factview.build(f)
    assert [d["label"] for d in view["pci"]] == ["mlx5_0 (0000:3b:00.0)"] and view["pci"][0]["degraded"]
    assert list(view["firewall"]) == ["udp/4791"] and view["firewall_blocks"][0]["label"] == "udp/4791"


def _routed(routes, addresses=None, ports=None):
    f = facts(ports=ports, addresses=addresses if addresses is not None else
              [{"ifname": "eth0", "family": 4, "address": "192.0.2.1", "prefixlen": 24, "scope": "universe"},
               {"ifname": "eth1", "family": 4, "address": "198.51.100.1", "prefixlen": 24, "scope": "universe"}])
    f["sections"]["netlink"]["data"]["routes"] = routes
    return factview.build(f)["rdma_subnet_routes"]


def _route(dst: str, ifname: str, **kw: Any) -> Dict[str, Any]:
    return {"family": 4, "dst": dst, "ifname": ifname, "type": "unicast", "proto": "static", **kw}


def test_a_route_narrower_than_the_rdma_subnet_through_another_netdev_is_listed():
    (r,) = _routed([_route("192.0.2.0/24", "eth0", proto="kernel"), _route("192.0.2.7/32", "eth1"),
                    _route("198.51.100.0/24", "eth1", proto="kernel"), _route("default", "eth1")])
    assert (r["dst"], r["ifname"], r["subnet"], r["rdma_netdev"], r["address"]) == \
        ("192.0.2.7/32", "eth1", "192.0.2.0/24", "eth0", "192.0.2.1")


def test_routes_that_leave_the_rdma_subnet_alone_are_not_listed():
    assert _routed([_route("192.0.2.0/24", "eth1"),              # as wide as the subnet: not longer
                    _route("192.0.2.0/25", "eth0"),              # through the RDMA netdev itself
                    _route("192.0.0.0/16", "eth1"),              # wider
                    _route("192.0.2.7/32", "eth1", type="blackhole"),
                    _route("not a network", "eth1"), "junk", _route("192.0.2.9/32", None)]) == []
    # a second RDMA netdev (one NIC per rail in one subnet) is RDMA too
    assert _routed([_route("192.0.2.7/32", "eth1")],
                   ports=[port(), port(2, netdev="eth1")]) == []


def _flux(arp_ignore, addresses=None):
    f = facts(ports=[port(), port(2, netdev="eth1")], addresses=addresses if addresses is not None else
              [{"ifname": "eth0", "family": 4, "address": "192.0.2.1", "prefixlen": 24, "scope": "universe"},
               {"ifname": "eth1", "family": 4, "address": "192.0.2.3", "prefixlen": 24, "scope": "universe"}])
    f["sections"]["netlink"]["data"]["arp_ignore"] = arp_ignore
    return factview.build(f)["rdma_arp_flux"]


def test_rdma_netdevs_sharing_a_subnet_that_answer_arp_for_each_other_are_listed():
    (item,) = _flux({"all": 0, "eth0": 0, "eth1": 0})
    assert (item["subnet"], item["netdevs"], item["answering"], item["arp_ignore_all"]) == \
        ("192.0.2.0/24", "eth0 (192.0.2.1), eth1 (192.0.2.3)", "eth0, eth1", 0)
    # the kernel takes the larger of "all" and the interface's own value
    assert _flux({"all": 0, "eth0": 1, "eth1": 0})[0]["answering"] == "eth1"


def test_arp_flux_needs_two_rdma_netdevs_in_one_subnet_and_every_value_read():
    assert _flux({"all": 2, "eth0": 0, "eth1": 0}) == []                  # all's 2 wins
    assert _flux({"all": 0, "eth0": 1, "eth1": 2}) == []
    assert _flux({"all": 0, "eth0": None, "eth1": 0}) == []               # unreadable: not listed, not guessed
    assert _flux({"all": "0", "eth0": 0, "eth1": 0}) == []                # (a saved file is read as it comes)
    assert _flux(None) == [] and _flux("junk") == []
    other_subnet = [{"ifname": "eth0", "family": 4, "address": "192.0.2.1", "prefixlen": 24, "scope": "universe"},
                    {"ifname": "eth1", "family": 4, "address": "198.51.100.1", "prefixlen": 24, "scope": "universe"}]
    assert _flux({"all": 0, "eth0": 0, "eth1": 0}, other_subnet) == []


@pytest.mark.parametrize("rule,outbound,allow", [
    ("inet rdfilter input handle 4", False, "nft insert rule inet rdfilter input udp dport 4791 accept"),
    ("iptables-legacy ip filter INPUT rule 1", False, "iptables-legacy -I INPUT -p udp --dport 4791 -j ACCEPT"),
    ("ip6tables-legacy ip6 raw PREROUTING rule 2", False,
     "ip6tables-legacy -t raw -I PREROUTING -p udp --dport 4791 -j ACCEPT"),
    ("policy drop of iptables-legacy ip filter OUTPUT", True,
     "iptables-legacy -I OUTPUT -p udp --dport 4791 -j ACCEPT"),
    ("an unnamed place", True, "nft insert rule inet filter output udp dport 4791 accept"),
])
def test_the_fix_for_a_dropping_rule_is_written_in_its_rulesets_tool(rule, outbound, allow):
    """An nft rule does not reach a table of iptables-legacy (the lab's check once said `nft insert ...` for a legacy
    DROP), nor the other way round."""
    chain = factview._CHAIN.search(rule)
    assert factview._allow({"proto": "udp", "port": 4791, "rule": rule}, chain.group(1) if chain else None,
                           outbound) == allow


@pytest.mark.parametrize("rule,src,allow", [
    ("inet filter input handle 4", "192.0.2.2",
     "nft insert rule inet filter input ip saddr 192.0.2.2 tcp dport 18515 accept"),
    ("inet filter input handle 4", "2001:db8::2",
     "nft insert rule inet filter input ip6 saddr 2001:db8::2 tcp dport 18515 accept"),
    ("iptables-legacy ip filter INPUT rule 1", "192.0.2.2",
     "iptables-legacy -I INPUT -s 192.0.2.2 -p tcp --dport 18515 -j ACCEPT"),
    # what is not an address (a peer's agent may send anything) is left out of the command
    ("inet filter input handle 4", "192.0.2.2; rm -rf /", "nft insert rule inet filter input tcp dport 18515 accept"),
])
def test_a_packet_asked_about_from_one_source_is_let_in_from_it(rule, src, allow):
    """check --peer asks each ruleset about the packets of the other host: the fix lets in that host, not everyone,
    in the tool of the ruleset that drops them (the peer's as well as this host's)."""
    chain = factview._CHAIN.search(rule)
    verdict = {"proto": "tcp", "port": 18515, "rule": rule, "src": src}
    assert factview._allow(verdict, chain.group(1) if chain else None, False) == allow
    assert factview._allow(verdict, chain.group(1) if chain else None, True).count("saddr") == 0
