"""firewall: the three-valued evaluator on real `nft -j list ruleset` output (fixtures/facts/nft, recorded in a
private network namespace; lab/*/nft-*.json and *-save.txt recorded in the lab guests), and the collector's
refusal to guess without CAP_NET_ADMIN."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from collect_helpers import FACTS, REPO, load_json, section
from rdmadoctor.collectors import collect_facts
from rdmadoctor.collectors.base import CollectContext
from rdmadoctor.collectors.firewall import evaluate_documents
from rdmadoctor.collectors.nfteval import Packet, Ruleset, evaluate, parse_iptables_save

NFT = FACTS / "nft"
LAB = FACTS / "lab"
PEER, OTHER = "192.0.2.2", "203.0.113.9"


def inbound(data):
    return [v for v in data["verdicts"] if v.get("direction") != "out"]


def outbound(data):
    return [v for v in data["verdicts"] if v.get("direction") == "out"]


def _output_chain(*rules, policy="accept"):
    """An inet filter table with an output base chain holding these rules (nft JSON)."""
    objs = [{"table": {"family": "inet", "name": "filter"}},
            {"chain": {"family": "inet", "table": "filter", "name": "output", "type": "filter", "hook": "output",
                       "prio": 0, "policy": policy}}]
    objs += [{"rule": {"family": "inet", "table": "filter", "chain": "output", "handle": n + 2, "expr": expr}}
             for n, expr in enumerate(rules)]
    return {"nftables": objs}


def _dport(proto, port):
    return {"match": {"op": "==", "left": {"payload": {"protocol": proto, "field": "dport"}}, "right": port}}


def _meta(key, value, op="=="):
    return {"match": {"op": op, "left": {"meta": {"key": key}}, "right": value}}


def test_what_this_host_sends_is_judged_on_its_output_path():
    ctx = CollectContext(peer=PEER, port=18515)
    data = evaluate_documents(_output_chain([_dport("tcp", 18515), {"drop": None}]), {}, ctx)
    assert [(v["proto"], v["verdict"]) for v in inbound(data)] == [("tcp", "accept"), ("udp", "accept")]
    tcp, udp = outbound(data)
    assert (tcp["verdict"], tcp["dst"], udp["verdict"]) == ("drop", PEER, "accept")
    assert "inet filter output" in tcp["rule"]
    # a drop policy with only ssh let out stops both
    data = evaluate_documents(_output_chain([_dport("tcp", 22), {"accept": None}], policy="drop"), {}, ctx)
    assert [v["verdict"] for v in outbound(data)] == ["drop", "drop"]
    assert [v["verdict"] for v in inbound(data)] == ["accept", "accept"]


def test_interfaces_on_the_output_path():
    ctx = CollectContext(peer=PEER, port=18515)
    # a sent packet has no input interface: a match on one never holds, its negation always does
    data = evaluate_documents(_output_chain([_meta("iifname", "eth0"), {"drop": None}]), {}, ctx)
    assert [v["verdict"] for v in outbound(data)] == ["accept", "accept"]
    data = evaluate_documents(_output_chain([_meta("iifname", "eth0", "!="), {"drop": None}]), {}, ctx)
    assert [v["verdict"] for v in outbound(data)] == ["drop", "drop"]
    # the output interface: unknown without the route to the peer, and never lo for a peer
    pkt = Packet("tcp", 18515, dst=PEER, outbound=True)
    rs = Ruleset(_output_chain([_meta("oifname", "eth0"), {"drop": None}])["nftables"])
    assert evaluate([rs], pkt)["verdict"] == "unknown"
    assert evaluate([rs], Packet("tcp", 18515, dst=PEER, outbound=True, oif="eth0"))["verdict"] == "drop"
    assert evaluate([rs], Packet("tcp", 18515, dst=PEER, outbound=True, oif="eth1"))["verdict"] == "accept"
    lo = Ruleset(_output_chain([_meta("oifname", "lo", "!="), {"drop": None}])["nftables"])
    assert evaluate([lo], pkt)["verdict"] == "drop"
    # an inbound packet never matches an output interface, and output chains do not see it
    assert evaluate([rs], Packet("tcp", 18515, src=PEER, iif="eth0"))["verdict"] == "accept"


def test_iptables_output_rules():
    text = ("*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT DROP [0:0]\n"
            "-A OUTPUT -o lo -j ACCEPT\n-A OUTPUT -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n")
    data = evaluate_documents({"nftables": []}, {"ip": text}, CollectContext(peer=PEER, port=18515))
    assert [v["verdict"] for v in outbound(data)] == ["drop", "drop"]
    assert "policy drop" in outbound(data)[0]["why"]
    assert [v["verdict"] for v in inbound(data)] == ["accept", "accept"]


def verdict(name, proto, port, src=None):
    rs = Ruleset(load_json(NFT / f"{name}.json")["nftables"])
    return evaluate([rs], Packet(proto, port, src=src))


@pytest.mark.parametrize("name, proto, port, src, want, rule", [
    ("drop-tcp-18515", "tcp", 18515, PEER, "drop", "inet filter input handle 4"),
    ("drop-tcp-18515", "tcp", 18515, None, "drop", "inet filter input handle 4"),
    ("drop-tcp-18515", "udp", 4791, PEER, "accept", "policy accept of inet filter input"),
    ("reject-tcp-18515", "tcp", 18515, PEER, "drop", "reject at inet filter input handle 3"),
    ("reject-tcp-18515", "tcp", 18515, OTHER, "accept", "policy accept of inet filter input"),
    ("reject-tcp-18515", "tcp", 18515, None, "unknown", None),        # the rule matches on the source
    ("drop-udp-4791", "udp", 4791, PEER, "drop", "inet filter input handle 2"),
    ("drop-udp-4791", "tcp", 18515, PEER, "accept", "inet filter input handle 4"),
    # an accept in `inet filter` ends only that base chain; `ip legacyish INPUT` still has policy drop
    ("inet-and-ip", "tcp", 18515, PEER, "drop", "policy drop of ip legacyish INPUT"),
    ("inet-and-ip", "udp", 4791, PEER, "accept", "ip legacyish INPUT handle 3"),
    ("policy-drop-with-accept", "tcp", 18515, PEER, "accept", "inet filter input handle 9"),
    ("policy-drop-with-accept", "tcp", 18515, OTHER, "drop", "policy drop of inet filter input"),
    ("policy-drop-with-accept", "udp", 4791, PEER, "accept", "inet filter roce handle 12"),
    ("policy-drop-with-accept", "udp", 4791, "203.0.113.5", "drop", "policy drop of inet filter input"),
    ("policy-drop-with-accept", "tcp", 18515, None, "unknown", None),
    ("limit-unknown", "tcp", 18515, PEER, "unknown", None),           # `limit` is not modelled
    ("limit-unknown", "udp", 4791, PEER, "accept", "inet filter input handle 4"),
])
def test_nft_rulesets(name, proto, port, src, want, rule):
    res = verdict(name, proto, port, src)
    assert res["verdict"] == want, res
    if rule:
        assert res["rule"].endswith(rule) or rule in res["why"], res


def test_ipv6_packet_skips_ip_family_tables():
    res = verdict("inet-and-ip", "tcp", 18515, "2001:db8::2")
    assert res["verdict"] == "accept"                    # `ip` tables never see IPv6


def test_drop_is_only_claimed_on_a_concrete_verdict():
    for path in sorted(NFT.glob("*.json")):
        rs = Ruleset(load_json(path)["nftables"])
        for src in (None, PEER, OTHER):
            for proto, port in (("tcp", 18515), ("udp", 4791)):
                res = evaluate([rs], Packet(proto, port, src=src))
                if res["verdict"] == "drop":
                    assert res["trail"][-1]["verdict"] == "drop"
                    assert "drop" in res["why"] or "reject" in res["why"]


@pytest.mark.parametrize("rel", ["trixie"])
def test_iptables_nft_xt_match_is_unknown_then_resolved_from_save(rel):
    doc = load_json(LAB / rel / "nft-xt.json")
    assert '"xt"' in json.dumps(doc)
    ctx = CollectContext(peer=PEER)
    data = evaluate_documents(doc, {}, ctx)
    assert [v["verdict"] for v in inbound(data)] == ["unknown", "unknown"]
    assert "ip filter INPUT" in data["verdicts"][0]["why"]
    assert [v["verdict"] for v in outbound(data)] == ["accept", "accept"]      # its OUTPUT chain filters nothing
    save = {"ip": (LAB / rel / "iptables-nft-save.txt").read_text()}
    data = evaluate_documents(doc, {}, ctx, nft_save=save)
    tcp, udp = inbound(data)
    assert tcp["verdict"] == "accept" and "rule 3" in tcp["rule"]      # -m conntrack --ctstate NEW ... 18515
    assert udp["verdict"] == "unknown" and "rule 4" in udp["rule"]     # -m limit
    assert data["backend"] == "nftables"


@pytest.mark.parametrize("rel", ["trixie", "bookworm"])
def test_iptables_legacy_save_recorded_in_the_lab(rel):
    path = LAB / rel / "iptables-legacy-save.txt"
    if not path.exists():
        pytest.skip(f"not recorded for {rel}")
    data = evaluate_documents({"nftables": []}, {"ip": path.read_text()}, CollectContext(peer=PEER))
    tcp, udp = inbound(data)
    assert [v["verdict"] for v in outbound(data)] == ["accept", "accept"]
    assert tcp["verdict"] == "drop" and "REJECT" not in tcp["why"] and "rule 1" in tcp["rule"]
    assert udp["verdict"] == "accept"                       # -m multiport --dports 4790:4792
    assert data["backend"] == "iptables-legacy"
    other = evaluate_documents({"nftables": []}, {"ip": path.read_text()}, CollectContext(peer=OTHER))
    assert other["verdicts"][0]["verdict"] == "drop" and "policy drop" in other["verdicts"][0]["why"]


def test_iptables_save_parser_shapes():
    text = ("*filter\n:INPUT ACCEPT [0:0]\n:RDMA - [0:0]\n"
            "-A INPUT -i eth+ -p tcp -m tcp ! --dport 22 -j RDMA\n"
            "-A INPUT -m addrtype --dst-type LOCAL -j DROP\n"
            "-A RDMA -s 10.0.0.0/8 -j ACCEPT\n-A RDMA -j MARK --set-mark 1\nCOMMIT\n")
    objs = parse_iptables_save(text)
    rules = [o["rule"] for o in objs if "rule" in o]
    assert rules[0]["expr"][-1] == {"jump": {"target": "RDMA"}}
    assert rules[1]["expr"][0] == {"xt": {"type": "match", "name": "addrtype"}}
    assert rules[3]["expr"][-1] == {"xt": {"type": "target", "name": "MARK"}}
    rs = Ruleset(objs, "iptables-legacy")
    res = evaluate([rs], Packet("tcp", 18515, src="10.1.2.3", iif="eth0"))
    assert res["verdict"] == "accept" and "RDMA rule 1" in res["rule"]
    res = evaluate([rs], Packet("tcp", 18515, src="192.0.2.5", iif="eth0"))
    assert res["verdict"] == "unknown" and "xt target MARK" in res["why"]   # a target that is not modelled


def test_lab_live_facts_with_a_dropping_ruleset():
    for rel in ("bookworm", "trixie"):
        path = LAB / rel / "facts-firewall.json"
        if not path.exists():
            continue
        fw = section(load_json(path), "firewall")
        assert fw["status"] == "ok" and fw["source"].startswith("nft -j")
        tcp, udp = fw["data"]["verdicts"]
        assert (tcp["verdict"], udp["verdict"]) == ("drop", "drop")
        assert "reject" in udp["why"] and udp["src"] == PEER


def test_fixture_tree_and_non_root_are_unavailable(tmp_path):
    sec = section(collect_facts(CollectContext(root=tmp_path, live=False), only=["firewall"]), "firewall")
    assert sec["status"] == "unavailable" and "saved tree" in sec["reason"]
    if os.geteuid() != 0:
        sec = section(collect_facts(CollectContext(), only=["firewall"]), "firewall")
        assert sec["status"] == "unavailable" and "CAP_NET_ADMIN" in sec["reason"]


def _in_private_netns(ruleset: str, code: str):
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nft"):
        pytest.skip("needs root, unshare and nft")
    script = f"nft -f - <<'EOF'\n{ruleset}\nEOF\n{sys.executable} -c \"$CODE\""
    res = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "CODE": code, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_live_collector_in_a_private_network_namespace():
    """End to end on this host: load a ruleset into a throw-away netns and run the collector there."""
    ruleset = (NFT / "policy-drop-with-accept.nft").read_text()
    code = ("import json; from rdmadoctor.collectors import collect_facts, CollectContext; "
            "print(json.dumps(collect_facts(CollectContext(peer='10.9.8.7', probe_port=7471), only=['firewall'])))")
    fw = section(_in_private_netns(ruleset, code), "firewall")
    assert fw["status"] == "ok" and fw["data"]["backend"] == "nftables", fw
    got = {(v["proto"], v["port"]): v["verdict"] for v in fw["data"]["verdicts"]}
    assert got == {("tcp", 18515): "accept", ("udp", 4791): "accept", ("tcp", 7471): "drop"}
    assert fw["data"]["rules_seen"] == 8 and fw["data"]["nft_ruleset"]["nftables"]
